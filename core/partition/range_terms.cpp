// RangeScanner (range_terms.hpp) and, in the same translation unit, StageMemory
// (stage_memory.hpp): the memory of a range at a pipeline position is what the two share.
#include "core/partition/range_terms.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>
#include <string>

#include "core/memory_walk.hpp"
#include "core/plan.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

RangeScanner::RangeScanner(const PartitionRequest& r) : r_(r) {
  const CostModel& cm = *r.cost;
  const int L = cm.num_layers();
  const double b = r.micro_batch;
  model_input_bytes_ = cm.profile().input_bytes_per_sample * b;
  for (int l = 0; l < L; ++l) {
    const StageCost c = cm.stage_cost({l}, b);
    Layer layer{c.forward_s + c.backward_s, c.static_bytes(), c.saved_bytes, c.param_bytes, 0, {}};
    double input_grad = 0;
    bool reads_skip = false;
    for (const auto& e : cm.graph().in_edges(l)) {
      layer.in.emplace_back(e.from, e.bytes_per_sample);
      if (!cm.frozen(e.from)) input_grad += e.bytes_per_sample * b;
      reads_skip = reads_skip || e.from != l - 1;
    }
    chain_ = chain_ && !reads_skip;
    for (const auto& e : cm.graph().out_edges(l)) layer.out_bytes += e.bytes_per_sample;
    layer.workspace =
        cm.profile().layers[static_cast<size_t>(l)].forward_workspace_bytes_per_sample * b;
    layer.active = !cm.frozen(l);
    layer.backward_last = cm.layer_backward_peak(l, b, true, input_grad, reads_skip);
    layer.backward_inner = cm.layer_backward_peak(l, b, false, input_grad, reads_skip);
    layers_.push_back(std::move(layer));
  }
  // cut[i] = bytes of edges u -> v with u < i <= v: the out-bytes of the range [0, i).
  cut_.assign(static_cast<size_t>(L) + 1, 0);
  RangeTerms prefix = start(0);
  for (int i = 1; i <= L; ++i) {
    extend(prefix);
    cut_[static_cast<size_t>(i)] = prefix.out_bytes;
  }
}

RangeTerms RangeScanner::start(int begin) const {
  RangeTerms t;
  t.begin = t.end = begin;
  return t;
}

void RangeScanner::extend(RangeTerms& t) const {
  const Layer& layer = layers_[static_cast<size_t>(t.end)];
  t.compute_s += layer.compute_s;
  t.static_bytes += layer.static_bytes;
  t.saved_bytes += layer.saved_bytes;
  t.param_bytes += layer.param_bytes;
  if (t.end == 0) t.model_input_bytes = model_input_bytes_;
  for (const auto& [from, bytes] : layer.in) {
    if (from < t.begin) {
      t.in_bytes += bytes;
    } else {
      t.out_bytes -= bytes;  // was leaving the range, now stays inside
    }
  }
  t.out_bytes += layer.out_bytes;
  extend_working(t, layer);
  ++t.end;
}

// CostModel::forward_working_bytes and backward_working_bytes of the range, one layer more.
// Forward: layers run in order, layer l peaking at what the layers up to it saved plus its
// workspace. Backward on a chain: layer l peaks at its layer_backward_peak less the saved
// activations of the active layers after it, already released; the last layer counts as the
// stage output. So appending n lowers every earlier layer's figure by n's saved bytes and turns
// the previous last layer into an inner one.
void RangeScanner::extend_working(RangeTerms& t, const Layer& layer) const {
  t.forward_peak = std::max(t.forward_peak, t.saved_bytes + layer.workspace);
  t.forward_ws = std::max(0.0, t.forward_peak - t.saved_bytes);
  t.forward_nograd_ws = std::max(t.forward_nograd_ws, layer.workspace);
  if (!chain_) {
    if (r_.memory == nullptr) return;
    std::vector<int> layers;
    for (int l = t.begin; l <= t.end; ++l) layers.push_back(l);
    t.backward_ws = r_.cost->backward_working_bytes(layers, r_.micro_batch);
    return;
  }
  if (t.end > t.begin) {
    const Layer& last = layers_[static_cast<size_t>(t.end - 1)];
    if (last.active) t.backward_inner = std::max(t.backward_inner, last.backward_inner);
  }
  if (layer.active) t.backward_inner -= layer.saved_bytes;
  t.backward_ws = std::max(0.0, t.backward_inner);
  if (layer.active) t.backward_ws = std::max(t.backward_ws, layer.backward_last);
}

double RangeScanner::memory(const RangeTerms& t) const {
  return t.static_bytes +
         r_.in_flight * (t.in_bytes * r_.micro_batch + t.model_input_bytes + t.saved_bytes);
}

double RangeScanner::memory(const RangeTerms& t, int stage, int num_stages) const {
  if (r_.memory == nullptr) return memory(t);
  return r_.memory->bytes(bytes(t), stage, num_stages);
}

StageBytes RangeScanner::bytes(const RangeTerms& t) const {
  const double b = r_.micro_batch;
  StageBytes s;
  s.static_bytes = t.static_bytes;
  s.input = std::max(0.0, t.in_bytes) * b + t.model_input_bytes;
  s.saved = t.saved_bytes;
  s.param = t.param_bytes;
  s.forward_ws = t.forward_ws;
  s.forward_nograd_ws = t.forward_nograd_ws;
  s.backward_ws = t.backward_ws;
  s.received_in = std::max(0.0, t.in_bytes) * b;
  s.received_out = std::max(0.0, t.out_bytes) * b;
  return s;
}

LeanestSplit leanest_split(const RangeScanner& scan, int K) {
  LeanestSplit out;
  out.sizes = min_max_split(
      scan, K, [&](const RangeTerms& t, int stage) { return scan.memory(t, stage, K); });
  int begin = 0;
  for (int s = 0; s < static_cast<int>(out.sizes.size()); ++s) {
    RangeTerms t = scan.start(begin);
    for (int i = 0; i < out.sizes[static_cast<size_t>(s)]; ++i) scan.extend(t);
    const double need = scan.memory(t, s, K);
    if (need > out.need_bytes) {
      out.need_bytes = need;
      out.stage = s;
    }
    begin = t.end;
  }
  return out;
}

// ---- StageMemory ----------------------------------------------------------------------------

bool HeldCounts::covers(const HeldCounts& o) const {
  return (pass == o.pass || o.pass == kIdle) && inputs >= o.inputs && graphs >= o.graphs &&
         stashed >= o.stashed && received_in >= o.received_in && received_out >= o.received_out;
}

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
  points_.push_back(c);
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

StageMemory::Walked StageMemory::make_walk(int K) const {
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
  return w;
}

const HeldSet& StageMemory::held(int k, int K) const {
  if (k < 0 || k >= K) throw std::out_of_range("StageMemory::held: no stage " + std::to_string(k));
  return walk(K).stages[static_cast<size_t>(k)];
}

const HeldSet& StageMemory::any_position(int K) const {
  return walk(K).any;
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

StageBytes stage_bytes(const StageCost& c, double received_in, double received_out) {
  StageBytes s;
  s.static_bytes = c.static_bytes();
  s.input = c.input_bytes;
  s.saved = c.saved_bytes;
  s.param = c.param_bytes;
  s.forward_ws = c.forward_bytes;
  s.forward_nograd_ws = c.forward_nograd_bytes;
  s.backward_ws = c.backward_bytes;
  s.received_in = received_in;
  s.received_out = received_out;
  return s;
}

}  // namespace pipetwin
