// StageMemory and its held sets (stage_memory.hpp): what a stage holds at its pipeline position,
// from the memory walk's counts, and the bounds over every position the partitioners prune with.
#include "core/partition/stage_memory.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "core/memory_walk.hpp"
#include "core/plan.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace


namespace {

// The working bytes of each pass, indexed by WalkPass.
std::array<double, 4> working_of(const StageBytes& b) {
  std::array<double, 4> w{};
  w[static_cast<size_t>(WalkPass::kForward)] = b.forward_ws;
  w[static_cast<size_t>(WalkPass::kForwardNoGrad)] = b.forward_nograd_ws;
  w[static_cast<size_t>(WalkPass::kBackward)] = b.backward_ws;
  return w;
}

}  // namespace

double HeldCounts::bytes(const StageBytes& b) const {
  return bytes(b, working_of(b)[static_cast<size_t>(pass)]);
}

void HeldSet::add(const HeldCounts& c) {
  if (has_last_ && last_.covers(c)) return;
  last_ = c;
  has_last_ = true;
  for (const HeldCounts& p : points_) {
    if (p.covers(c)) return;
  }
  std::erase_if(points_, [&](const HeldCounts& p) { return c.covers(p); });
  if (points_.empty() || c.graphs > fullest_.graphs) fullest_ = c;
  points_.push_back(c);
  most_.inputs = std::max(points_.size() == 1 ? c.inputs : most_.inputs, c.inputs);
  most_.graphs = std::max(points_.size() == 1 ? c.graphs : most_.graphs, c.graphs);
  most_.stashed = std::max(points_.size() == 1 ? c.stashed : most_.stashed, c.stashed);
  most_.received_in =
      std::max(points_.size() == 1 ? c.received_in : most_.received_in, c.received_in);
  most_.received_out =
      std::max(points_.size() == 1 ? c.received_out : most_.received_out, c.received_out);
  passes_ |= static_cast<uint8_t>(1u << static_cast<unsigned>(c.pass));
}

void HeldSet::merge(const HeldSet& other) {
  for (const HeldCounts& c : other.points_) add(c);
}

double HeldSet::bytes(const StageBytes& b) const {
  if (points_.empty()) return kInf;
  const std::array<double, 4> working = working_of(b);
  double most = 0;
  for (const HeldCounts& c : points_) {
    most = std::max(most, c.bytes(b, working[static_cast<size_t>(c.pass)]));
  }
  return b.static_bytes + most;
}

namespace {

constexpr double kNoBound = std::numeric_limits<double>::quiet_NaN();

}  // namespace

PricedBytes::PricedBytes(const StageBytes& b) : bytes(b), working(working_of(b)) {
  nonnegative = b.input >= 0 && b.saved >= 0 && b.param >= 0 && b.received_in >= 0 &&
                b.received_out >= 0 && working[1] >= 0 && working[2] >= 0 && working[3] >= 0;
}

double HeldSet::upper(const PricedBytes& b) const {
  if (points_.empty() || !b.nonnegative) return kNoBound;
  double work = 0;  // the largest working memory of a pass some point runs
  for (size_t p = 0; p < b.working.size(); ++p) {
    if ((passes_ >> p) & 1u) work = std::max(work, b.working[p]);
  }
  return b.bytes.static_bytes + std::max(0.0, most_.bytes(b.bytes, work));
}

double HeldSet::lower(const PricedBytes& b) const {
  if (points_.empty() || !b.nonnegative) return kNoBound;
  const double working = b.working[static_cast<size_t>(fullest_.pass)];
  return b.bytes.static_bytes + std::max(0.0, fullest_.bytes(b.bytes, working));
}

// A bound decides where it can (NaN compares false both ways: the points decide).
bool HeldSet::within(const PricedBytes& b, double limit) const {
  if (upper(b) <= limit) return true;
  if (lower(b) > limit) return false;
  if (points_.empty()) return !(kInf > limit);
  double most = 0;  // as bytes()
  for (const HeldCounts& c : points_) {
    most = std::max(most, c.bytes(b.bytes, b.working[static_cast<size_t>(c.pass)]));
  }
  return !(b.bytes.static_bytes + most > limit);
}

int HeldSet::most_inputs() const {
  int most = 0;
  for (const HeldCounts& c : points_) most = std::max(most, c.inputs);
  return most;
}

void DeviceHeldSet::add(const DeviceCounts& c) {
  auto covers = [](const DeviceCounts& a, const DeviceCounts& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].covers(b[i])) return false;
    }
    return true;
  };
  if (!last_.empty() && covers(last_, c)) return;
  last_ = c;
  for (const DeviceCounts& p : points_) {
    if (covers(p, c)) return;
  }
  std::erase_if(points_, [&](const DeviceCounts& p) { return covers(c, p); });
  points_.push_back(c);
}

double DeviceHeldSet::bytes(const std::vector<StageBytes>& stages) const {
  if (points_.empty()) return kInf;
  double most = 0, fixed = 0;
  for (const StageBytes& b : stages) fixed += b.static_bytes;
  for (const DeviceCounts& p : points_) {
    double sum = 0;
    for (size_t i = 0; i < p.size(); ++i) sum += p[i].bytes(stages[i]);
    most = std::max(most, sum);
  }
  return fixed + most;
}

namespace {

// The memory walk (core/memory_walk.hpp) in counts: kept per stage of the device; every
// observation point goes to each stage's set (its own counts, its pass) and, for a device of
// several stages, to the device's set (all of them).
class CountTally {
 public:
  CountTally(const Liveness& lv, int device, std::vector<HeldSet>& per_stage, DeviceHeldSet* joint)
      : lv_(lv), per_stage_(per_stage), joint_(joint) {
    const auto& sh = lv.schedule().shape();
    stages_ = sh.stages_on(device % sh.devices_per_replica);
    local_.assign(static_cast<size_t>(sh.num_stages), 0);
    for (size_t i = 0; i < stages_.size(); ++i) local_[static_cast<size_t>(stages_[i])] = i;
    now_.resize(stages_.size());
    for (const int s : stages_) per_stage_[static_cast<size_t>(s)].add(HeldCounts{});
    if (joint_ != nullptr) joint_->add(DeviceCounts(stages_.size()));
  }

  void received(std::span<const int32_t> recvs, int sign) {
    for (const int32_t id : recvs) {
      const Action& a = lv_.schedule().action(id);
      HeldCounts& c = of(a.stage);  // the receiving stage
      (a.payload == Payload::kActivation ? c.received_in : c.received_out) += sign;
    }
  }
  void keep_input(int stage) { ++of(stage).inputs; }
  void keep_graph(int stage) { ++of(stage).graphs; }
  void release(int stage) {
    --of(stage).inputs;
    --of(stage).graphs;
  }
  void during(const LivenessCursor& cursor, int, WalkPass pass, int stage) {
    observe(cursor, pass, stage);
  }
  void after_compute(const LivenessCursor& cursor, int) { observe(cursor, WalkPass::kIdle, -1); }
  void after_transfer(const LivenessCursor&, int) {}

 private:
  HeldCounts& of(int stage) { return now_[local_[static_cast<size_t>(stage)]]; }

  // One observation point; `pass` runs on stage `running` (-1: none).
  void observe(const LivenessCursor& cursor, WalkPass pass, int running) {
    point_ = now_;
    for (size_t i = 0; i < stages_.size(); ++i) {
      HeldCounts& c = point_[i];
      c.pass = stages_[i] == running ? pass : WalkPass::kIdle;
      c.stashed = cursor.versions_alive(stages_[i]) - 1;
      per_stage_[static_cast<size_t>(stages_[i])].add(c);
    }
    if (joint_ != nullptr) joint_->add(point_);
  }

  const Liveness& lv_;
  std::vector<HeldSet>& per_stage_;
  DeviceHeldSet* joint_;
  std::vector<int> stages_;    // the device's stages, ascending
  std::vector<size_t> local_;  // stage -> index in stages_
  DeviceCounts now_;           // per stage; stashed stays 0 here: observe() reads it off the cursor
  DeviceCounts point_;         // observe()'s scratch
};

}  // namespace

StageMemory::StageMemory(Options options) : options_(std::move(options)) {}

const StageMemory::Walked& StageMemory::walk(int K) const {
  auto find = [&]() -> const Walked* {
    for (const Walked* w = walked_.load(std::memory_order_acquire); w != nullptr; w = w->next) {
      if (w->length == K) return w;
    }
    return nullptr;
  };
  if (const Walked* w = find()) return *w;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (const Walked* w = find()) return *w;  // made while this thread waited
  auto made = std::make_unique<Walked>(make_walk(K));
  made->next = walked_.load(std::memory_order_relaxed);
  const Walked* out = made.get();
  owned_.push_back(std::move(made));
  walked_.store(out, std::memory_order_release);
  return *out;
}

PipelineShape StageMemory::shape_of(int K) const {
  const int v = options_.virtual_stages;
  if (v < 1 || K % v != 0) {
    throw std::invalid_argument("StageMemory: " + std::to_string(K) + " stages are not " +
                                std::to_string(v) + " per device");
  }
  PipelineShape shape;
  shape.micro_batches = options_.micro_batches;
  shape.iterations = options_.iterations > 0 ? options_.iterations
                                             : schedule_default_iterations(options_.schedule, K);
  shape.checkpoint = options_.checkpoint;
  for (int s = 0; s + 1 < K; ++s) shape.edges.push_back({s, s + 1, 1.0});
  if (v > 1) {
    shape = lay_out_stages(options_.schedule, shape, K / v, v);
  } else {
    shape.num_stages = K;
  }
  shape.normalize("stage memory");
  return shape;
}

StageMemory::Walked StageMemory::make_walk(int K) const {
  const int v = options_.virtual_stages;
  const PipelineShape shape = shape_of(K);
  const CompiledSchedule cs(make_schedule(options_.schedule, shape),
                            "schedule " + options_.schedule, /*check_progress=*/false);
  const Liveness lv(cs);
  Walked w;
  w.length = K;
  w.stages.resize(static_cast<size_t>(K));
  const int devices = shape.devices_per_replica;
  if (v > 1) w.devices.resize(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    CountTally tally(lv, d, w.stages, v > 1 ? &w.devices[static_cast<size_t>(d)] : nullptr);
    walk_device(lv, d, tally);
    w.device_stages.push_back(shape.stages_on(d));
  }
  for (const HeldSet& h : w.stages) w.any.merge(h);
  for (size_t k = 0; k < w.stages.size(); ++k) {
    const HeldCounts& f = w.stages[k].fullest();
    HeldCounts& m = w.floor;
    const bool first = k == 0;
    m.inputs = first ? f.inputs : std::min(m.inputs, f.inputs);
    m.graphs = first ? f.graphs : std::min(m.graphs, f.graphs);
    m.stashed = first ? f.stashed : std::min(m.stashed, f.stashed);
    m.received_in = first ? f.received_in : std::min(m.received_in, f.received_in);
    m.received_out = first ? f.received_out : std::min(m.received_out, f.received_out);
  }
  return w;
}

std::vector<int> StageMemory::count_graphs(int K) const {
  const PipelineShape shape = shape_of(K);
  Schedule schedule;
  {
    const ComputeOrderOnly compute_order;
    schedule = make_schedule(options_.schedule, shape);
  }
  const auto stages = static_cast<size_t>(shape.num_stages);
  int mbs = 1;
  for (const auto& list : schedule.devices) {
    for (const Action& a : list) mbs = std::max(mbs, a.micro_batch + 1);
  }
  // The (stage, micro-batch) pairs a Recompute rebuilds: their Forward keeps no graph
  // (Liveness::keeps_graph).
  std::vector<char> recomputed(stages * static_cast<size_t>(mbs), 0);
  auto slot = [&](const Action& a) {
    return static_cast<size_t>(a.stage) * static_cast<size_t>(mbs) +
           static_cast<size_t>(a.micro_batch);
  };
  for (const auto& list : schedule.devices) {
    for (const Action& a : list) {
      if (a.op == Op::kRecompute) recomputed[slot(a)] = 1;
    }
  }
  std::vector<int> now(stages, 0), most(stages, 0);
  for (const auto& list : schedule.devices) {
    for (const Action& a : list) {
      const auto s = static_cast<size_t>(a.stage);
      if ((a.op == Op::kForward && !recomputed[slot(a)]) || a.op == Op::kRecompute) {
        most[s] = std::max(most[s], ++now[s]);
      } else if (a.op == Op::kBackward || a.op == Op::kBackwardWeight) {
        --now[s];
      }
    }
  }
  return most;
}

const std::vector<int>& StageMemory::most_graphs(int K) const {
  {
    const std::lock_guard<std::mutex> lock(graphs_mutex_);
    if (auto it = graphs_.find(K); it != graphs_.end()) return it->second;
  }
  std::vector<int> counted = count_graphs(K);  // outside the lock: other Ks proceed meanwhile
  const std::lock_guard<std::mutex> lock(graphs_mutex_);
  return graphs_.emplace(K, std::move(counted)).first->second;
}

const HeldSet& StageMemory::held(int k, int K) const {
  if (k < 0 || k >= K) throw std::out_of_range("StageMemory::held: no stage " + std::to_string(k));
  return walk(K).stages[static_cast<size_t>(k)];
}

const HeldSet& StageMemory::any_position(int K) const {
  return walk(K).any;
}

const HeldCounts* StageMemory::floor(int K) const {
  const Walked& w = walk(K);
  if (w.stages.empty()) return nullptr;
  for (const HeldSet& h : w.stages) {
    if (h.empty()) return nullptr;
  }
  return &w.floor;
}

double StageMemory::lower_everywhere(const PricedBytes& b, int K) const {
  const HeldCounts* f = floor(K);
  if (f == nullptr || !b.nonnegative) return kNoBound;
  return b.bytes.static_bytes + std::max(0.0, f->bytes(b.bytes, 0.0));
}

int StageMemory::most_in_flight(int K) const {
  return any_position(K).most_inputs();
}

const std::vector<int>& StageMemory::device_stages(int device, int K) const {
  const Walked& w = walk(K);
  if (device < 0 || device >= static_cast<int>(w.device_stages.size())) {
    throw std::out_of_range("StageMemory::device_stages: no device " + std::to_string(device));
  }
  return w.device_stages[static_cast<size_t>(device)];
}

double StageMemory::device_bytes(const std::vector<StageBytes>& stages, int device, int K) const {
  const Walked& w = walk(K);
  const std::vector<int>& mine = device_stages(device, K);
  if (stages.size() != mine.size()) {
    throw std::invalid_argument("StageMemory::device_bytes: " + std::to_string(stages.size()) +
                                " stages given, device " + std::to_string(device) + " hosts " +
                                std::to_string(mine.size()));
  }
  if (w.devices.empty()) return w.stages[static_cast<size_t>(mine.front())].bytes(stages.front());
  return w.devices[static_cast<size_t>(device)].bytes(stages);
}

}  // namespace pipetwin
