#include "exec/runtime/worker.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "exec/platform/host.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "exec/runtime/activation_store.hpp"
#include "exec/runtime/bundle.hpp"

namespace pipetwin::exec {

void StartGate::warmed_up() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
  }
  cv_.notify_all();
}

void StartGate::wait_warmed_up(AbortSignal& abort) {
  std::unique_lock<std::mutex> lock(mu_);
  abort.wait(
      cv_, lock, [&] { return pending_ <= 0; }, "the stages to warm up");
}

void StartGate::open() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
  }
  cv_.notify_all();
}

void StartGate::wait_open(AbortSignal& abort) {
  std::unique_lock<std::mutex> lock(mu_);
  abort.wait(
      cv_, lock, [&] { return open_; }, "the start of the run");
}

namespace {

// The data source's mini-batches are host memory, as a data loader's are; a stage copies its
// micro-batch to its device, and only that copy counts against the device (memory_tracker.hpp).
template <typename Fetch>
at::Tensor copy_to_device(Device& device, Fetch fetch) {
  at::Tensor host;
  {
    MemoryTracker::ScopedDevice on_host(-1);
    host = fetch();
  }
  return device.from_host(host);
}

}  // namespace

// Each stream of a schedule device issues to a lane of its Device.
static_assert(Device::kLanes == kStreamsPerDevice, "one Device lane per stream kind");

int64_t transfer_tag(const Action& a, int num_stages) {
  const bool act = a.payload == Payload::kActivation;
  const bool sending = a.op == Op::kSend;
  const int64_t from = (act == sending) ? a.stage : a.peer_stage;
  const int64_t to = (act == sending) ? a.peer_stage : a.stage;
  const int64_t S = num_stages;
  return ((static_cast<int64_t>(a.micro_batch) * S + from) * S + to) * 2 + (act ? 0 : 1);
}

DeviceWorker::DeviceWorker(int device, Device& hardware, WorkerShared& shared,
                           std::map<int, StageRuntime*> stages)
    : id_(device),
      device_(hardware),
      replica_(device / shared.schedule->shape().devices_per_replica),
      shared_(shared),
      stages_(std::move(stages)),
      fault_(shared.fault) {
  if (shared_.check) check_ = std::make_unique<LivenessCheck>(*shared_.check, id_);
}

DeviceWorker::~DeviceWorker() {
  join();
}

void DeviceWorker::start() {
  for (int s = 0; s < kStreamsPerDevice; ++s) {
    if (shared_.schedule->stream_actions(id_ * kStreamsPerDevice + s).empty()) continue;
    threads_.emplace_back([this, s] { run_stream(static_cast<StreamKind>(s)); });
  }
}

void DeviceWorker::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

std::vector<TimelineEvent> DeviceWorker::take_events() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(events_);
}

std::vector<MemorySample> DeviceWorker::take_memory() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(memory_);
}

void DeviceWorker::warm_up() {
  // The first run of an operator pays for allocator growth, thread-pool start and cold caches;
  // a real run's first iteration would show it. Run each stage once, untimed, and discard it.
  for (auto& [stage, st] : stages_) {
    std::vector<at::Tensor> inputs;
    at::Tensor target;
    const int step = shared_.first_step;
    for (int p : st->spec().inputs) {
      inputs.push_back(
          p == kModelInput
              ? copy_to_device(device_, [&] { return shared_.data->input(step, replica_, 0); })
              : at::randn_like(like(p)));
    }
    if (st->spec().last)
      target = copy_to_device(device_, [&] { return shared_.data->target(step, replica_, 0); });
    // A stage whose backwards the schedule splits (micro-batch 0's, say) warms up the split.
    const bool split = shared_.schedule->weight_backward_of(replica_, stage, 0) >= 0;
    st->warm_up(inputs, target, most_graphs(*shared_.liveness, id_, stage), split);
  }
  device_.synchronize();  // the clock's zero mark must find the compute lane idle
}

at::Tensor DeviceWorker::like(int producer) const {
  const at::Tensor& host = shared_.value_like(producer);
  if (host.device() == device_.torch_device()) return host;
  return at::empty(host.sizes(), host.options().device(device_.torch_device()));
}

void DeviceWorker::run_stream(StreamKind stream) {
  MemoryTracker::ScopedDevice attribute(id_);
  device_.bind(static_cast<int>(stream));
  if (stream == StreamKind::kCompute) {
    configure_compute_thread(shared_.threads_per_stage, id_, shared_.pin_threads);
  } else {
    // Copy streams copy tensors: one thread, so no OpenMP team of theirs spins on the cores the
    // compute threads use (a new thread starts with as many OpenMP threads as there are cores).
    // (OpenBLAS's thread count is process-wide: the compute threads own it.)
    at::set_num_threads(1);
    configure_transfer_thread();
    if (shared_.pin_threads) pin_to_core(id_);
  }
  const auto& cs = *shared_.schedule;
  int current = -1;
  bool issued = false;
  try {
    if (stream == StreamKind::kCompute) {
      if (shared_.warmup) warm_up();
      if (shared_.gate) shared_.gate->warmed_up();
    }
    if (shared_.gate) shared_.gate->wait_open(*shared_.abort);
    std::vector<Pending> pending;
    for (int32_t id : cs.stream_actions(id_ * kStreamsPerDevice + static_cast<int>(stream))) {
      current = id;
      shared_.board->wait_dependencies(id);
      shared_.abort->check();
      std::shared_ptr<const Mark> end = execute(id, pending);
      if (check_ && stream == StreamKind::kCompute)
        check_->after(cs.ref(id).index, cs.action(id), stages_);
      shared_.board->mark_done(id, std::move(end));
    }
    issued = true;
    // The lane's work is all issued: the host waits for it once, then reads its marks and losses.
    device_.synchronize();
    finish(pending);
  } catch (const Aborted&) {
    // Another worker failed first; its message is the one reported.
  } catch (const std::exception& e) {
    const std::string where = issued         ? std::string("the end of the run")
                              : current >= 0 ? fmt::format("action {} ({})", cs.ref(current).index,
                                                           describe(cs.action(current)))
                                             : std::string("start-up");
    shared_.abort->raise(
        fmt::format("device {} {} stream, {}: {}", id_, stream_name(stream), where, e.what()));
  }
}

std::shared_ptr<const Mark> DeviceWorker::execute(int id, std::vector<Pending>& pending) {
  const Action& a = shared_.schedule->action(id);
  fault_.at_action(shared_.rank, id_, shared_.schedule->ref(id).index,
                   static_cast<int64_t>(shared_.first_step) + a.step,
                   stream_of(a.op) == StreamKind::kCompute);
  Pending p;
  p.action = a;
  if (a.op == Op::kRecv) {
    // The transfer starts once the sender has posted it; waiting for that is not transfer time.
    shared_.transport->wait_posted(peer_device(a), id_,
                                   transfer_tag(a, shared_.schedule->shape().num_stages));
  }
  // What the action reads is made once its dependencies' lanes pass their marks: this lane waits
  // for them on the device, the host goes on (exec/platform/device.hpp).
  for (const auto& m : shared_.board->dependency_marks(id)) device_.wait_for(*m);
  p.begin = device_.mark();
  switch (a.op) {
    case Op::kForward:
      forward(id, a);
      break;
    case Op::kRecompute:
      stages_.at(a.stage)->recompute(a.micro_batch, a.version);
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      backward(id, a);
      break;
    case Op::kBackwardWeight:
      // The weight half reports each layer's gradients complete: a data-parallel bucket's
      // all-reduce depends on it (core/schedule/compiled.hpp).
      stages_.at(a.stage)->backward_weight(a.micro_batch, a.version, layer_reporter(id));
      break;
    case Op::kOptimizerStep:
      optimizer_step(a, p);
      break;
    case Op::kSend:
      send(a);
      break;
    case Op::kRecv:
      recv(a);
      break;
    case Op::kAllReduce:
      allreduce(a);
      break;
    case Op::kTensorParallel:  // a timeline event only: CompiledSchedule refuses it
      break;
  }
  std::shared_ptr<Mark> end = device_.mark();
  p.end = end;
  if (a.op == Op::kOptimizerStep) {
    // The host runs at most a step ahead of the device: an allocator that keeps memory a lane
    // still reads (hand_over) would grow with how far ahead it is.
    if (last_step_end_) device_.wait(*last_step_end_);
    last_step_end_ = end;
  }
  if (a.op == Op::kForward || a.op == Op::kRecompute || is_backward(a.op)) {
    p.action.version = stages_.at(a.stage)->last_version_used();
  } else if (a.op == Op::kOptimizerStep) {
    p.action.version = stages_.at(a.stage)->current_version();
  }
  if (stream_of(a.op) == StreamKind::kCompute) p.live_bytes = device_.live_bytes();
  pending.push_back(std::move(p));
  return end;
}

void DeviceWorker::optimizer_step(const Action& a, Pending& p) {
  StageRuntime* st = stages_.at(a.stage);
  // With loss scaling the step waits for every stage's overflow vote
  // (exec/runtime/loss_scaler.hpp): the timeline counts that wait as the step's time.
  std::function<bool(bool)> agree;
  if (shared_.vote) {
    OverflowVote* vote = shared_.vote;
    const int64_t step = a.step;
    agree = [vote, step](bool found_inf) { return vote->vote(step, found_inf); };
  }
  st->optimizer_step(a.version, agree);
  // The step's loss stays on the device until the window's work is done (finish).
  if (shared_.on_step && st->spec().last) p.loss = st->take_loss_sum();
}

std::function<void(int)> DeviceWorker::layer_reporter(int id) {
  Board* board = shared_.board;
  Device* device = &device_;
  return [board, device, id](int layer) {
    board->mark_layer(id, layer, std::shared_ptr<const Mark>(device->mark()));
  };
}

void DeviceWorker::finish(std::vector<Pending>& pending) {
  const Mark& t0 = *shared_.t0.at(id_);
  std::vector<TimelineEvent> events;
  std::vector<MemorySample> memory;
  for (Pending& p : pending) {
    const double end = device_.elapsed(t0, *p.end);
    events.push_back({id_, p.action, device_.elapsed(t0, *p.begin), end});
    if (p.live_bytes >= 0) memory.push_back({end, static_cast<double>(p.live_bytes)});
    if (p.action.op == Op::kOptimizerStep && shared_.on_step) {
      shared_.on_step(id_, p.action.stage, shared_.first_step + p.action.step,
                      p.loss.defined() ? device_.read(p.loss) : 0.0);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  events_.insert(events_.end(), events.begin(), events.end());
  memory_.insert(memory_.end(), memory.begin(), memory.end());
}

int DeviceWorker::peer_device(const Action& a) const {
  const auto& sh = shared_.schedule->shape();
  return replica_ * sh.devices_per_replica + sh.device_of(a.peer_stage, a.micro_batch);
}

void DeviceWorker::put(Key key, std::vector<at::Tensor> bundle) {
  std::lock_guard<std::mutex> lock(mu_);
  exchange_[key] = std::move(bundle);
}

std::vector<at::Tensor> DeviceWorker::take(Key key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = exchange_.find(key);
  if (it == exchange_.end()) {
    throw std::runtime_error(fmt::format("no tensor for stage {} micro-batch {} from stage {}",
                                         std::get<1>(key), std::get<2>(key), std::get<3>(key)));
  }
  std::vector<at::Tensor> t = std::move(it->second);
  exchange_.erase(it);
  for (const auto& x : t) device_.hand_over(x);  // made on another lane, perhaps
  return t;
}

std::vector<at::Tensor> DeviceWorker::edge_like(int from, int to) const {
  std::vector<at::Tensor> like;
  for (int p : shared_.graph->tensors(from, to)) like.push_back(this->like(p));
  return like;
}

namespace {

size_t index_in(const std::vector<int>& v, int x) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

}  // namespace

void DeviceWorker::forward(int id, const Action& a) {
  // Each incoming stage edge brings the tensors of its producers (exec/runtime/stage_io.hpp); they
  // land in the stage's inputs by producer. The model input comes from the data (or F_frozen).
  const auto& sh = shared_.schedule->shape();
  StageRuntime* st = stages_.at(a.stage);
  const StageSpec& spec = st->spec();
  std::vector<at::Tensor> inputs(spec.inputs.size());
  at::Tensor target;
  const int M = sh.micro_batches;
  const int step = a.micro_batch / M, micro = a.micro_batch % M;
  for (const auto& e : sh.edges) {
    if (e.to != a.stage) continue;
    const bool local = sh.device_of(e.from) == sh.device_of(a.stage);
    std::vector<at::Tensor> bundle =
        take({local ? Slot::kOutput : Slot::kInput, local ? e.from : a.stage, a.micro_batch,
              local ? a.stage : e.from});
    const auto& producers = shared_.graph->tensors(e.from, a.stage);
    for (size_t i = 0; i < producers.size(); ++i)
      inputs.at(index_in(spec.inputs, producers[i])) = std::move(bundle.at(i));
  }
  const int global_step = shared_.first_step + step;
  const bool reads_data = !spec.inputs.empty() && spec.inputs.front() == kModelInput;
  const bool f_frozen = reads_data && st->frozen_count() > 0;
  if (f_frozen) {
    inputs[0] = frozen_input(st, global_step, micro);
  } else if (reads_data) {
    inputs[0] =
        copy_to_device(device_, [&] { return shared_.data->input(global_step, replica_, micro); });
  }
  if (spec.last)
    target =
        copy_to_device(device_, [&] { return shared_.data->target(global_step, replica_, micro); });
  // What it keeps until its recompute or backward is the liveness walk's rule.
  const ForwardKeep keep{
      .graph = shared_.liveness->keeps_graph(id),
      .pinned_version = shared_.liveness->pinned_after_forward(id),
      .split = shared_.schedule->weight_backward_of(replica_, a.stage, a.micro_batch) >= 0};
  const std::vector<at::Tensor> outs =
      st->forward(a.micro_batch, a.version, std::move(inputs), keep, target, f_frozen);
  for (const auto& e : sh.edges) {
    if (e.from != a.stage) continue;
    std::vector<at::Tensor> bundle;
    // On the wire in the dtype the receiver expects (autocast: session.cpp, layer_outputs_like).
    for (int p : shared_.graph->tensors(a.stage, e.to))
      bundle.push_back(outs.at(index_in(spec.outputs, p)).to(shared_.value_like(p).scalar_type()));
    put({Slot::kOutput, a.stage, a.micro_batch, e.to}, std::move(bundle));
  }
}

void DeviceWorker::backward(int id, const Action& a) {
  // An output read by several stages gets the sum of their gradients.
  const auto& sh = shared_.schedule->shape();
  StageRuntime* st = stages_.at(a.stage);
  const StageSpec& spec = st->spec();
  std::vector<at::Tensor> grad_outputs(spec.outputs.size());
  for (const auto& e : sh.edges) {
    if (e.from != a.stage) continue;
    const bool local = sh.device_of(e.to) == sh.device_of(a.stage);
    const std::vector<at::Tensor> bundle =
        take({local ? Slot::kInputGrad : Slot::kOutputGrad, local ? e.to : a.stage, a.micro_batch,
              local ? a.stage : e.to});
    const auto& producers = shared_.graph->tensors(a.stage, e.to);
    for (size_t i = 0; i < producers.size(); ++i) {
      at::Tensor& g = grad_outputs.at(index_in(spec.outputs, producers[i]));
      g = g.defined() ? g + bundle.at(i) : bundle.at(i);
    }
  }
  // A BackwardInput leaves the weight gradients to its BackwardWeight (stage.hpp).
  const std::vector<at::Tensor> grads =
      a.op == Op::kBackwardInput
          ? st->backward_input(a.micro_batch, a.version, grad_outputs)
          : st->backward(a.micro_batch, a.version, grad_outputs, layer_reporter(id));
  for (const auto& e : sh.edges) {
    if (e.to != a.stage) continue;
    std::vector<at::Tensor> bundle;
    for (int p : shared_.graph->tensors(e.from, a.stage))
      bundle.push_back(grads.at(index_in(spec.inputs, p)).to(shared_.value_like(p).scalar_type()));
    put({Slot::kInputGrad, a.stage, a.micro_batch, e.from}, std::move(bundle));
  }
}

void DeviceWorker::send(const Action& a) {
  const bool act = a.payload == Payload::kActivation;
  const std::vector<at::Tensor> bundle =
      take({act ? Slot::kOutput : Slot::kInputGrad, a.stage, a.micro_batch, a.peer_stage});
  shared_.transport->send(pack_bundle(bundle), id_, peer_device(a),
                          transfer_tag(a, shared_.schedule->shape().num_stages));
}

void DeviceWorker::recv(const Action& a) {
  const bool act = a.payload == Payload::kActivation;
  const int from = act ? a.peer_stage : a.stage, to = act ? a.stage : a.peer_stage;
  const std::vector<at::Tensor> like = edge_like(from, to);
  at::Tensor t = shared_.transport->recv(peer_device(a), id_,
                                         transfer_tag(a, shared_.schedule->shape().num_stages),
                                         packed_like(like));
  put({act ? Slot::kInput : Slot::kOutputGrad, a.stage, a.micro_batch, a.peer_stage},
      unpack_bundle(t, like));
}

void DeviceWorker::allreduce(const Action& a) {
  const auto& sh = shared_.schedule->shape();
  const auto& bucket =
      shared_.context->stages[static_cast<size_t>(a.stage)].buckets[static_cast<size_t>(a.bucket)];
  std::vector<at::Tensor> grads =
      stages_.at(a.stage)->gradients(bucket.first_layer, bucket.last_layer);
  const std::vector<int> devices = sh.gradient_copy_devices(a.stage);
  const int64_t tag = (static_cast<int64_t>(a.step) * sh.num_stages + a.stage) * 4096 + a.bucket;
  shared_.transport->allreduce_sum(grads, devices, id_, tag);
}

at::Tensor DeviceWorker::frozen_input(StageRuntime* st, int global_step, int micro) {
  // F_frozen (PipeTransformer Section 3.2.1): the frozen layers stay out of the pipeline; they run
  // once per step over the replica's whole batch, and the step's micro-batches enter the pipeline
  // from their output. Only this device's compute thread gets here.
  const int M = shared_.schedule->shape().micro_batches;
  const std::pair<int, int> key{st->spec().stage, global_step};
  auto it = frozen_out_.find(key);
  if (it == frozen_out_.end()) {
    std::vector<at::Tensor> parts;
    for (int m = 0; m < M; ++m) parts.push_back(shared_.data->input(global_step, replica_, m));
    const at::Tensor batch = at::cat(parts, 0).to(device_.torch_device());  // none on CPU
    const at::Tensor out = frozen_output(st, global_step, batch);
    it = frozen_out_.emplace(key, std::make_pair(out.split(parts[0].size(0), 0), 0)).first;
  }
  at::Tensor x = it->second.first[static_cast<size_t>(micro)].contiguous();
  if (++it->second.second == M) frozen_out_.erase(it);
  return x;
}

at::Tensor DeviceWorker::frozen_output(StageRuntime* st, int global_step, const at::Tensor& batch) {
  // AutoCache (PipeTransformer Section 3.4, exec/runtime/activation_store.hpp): when the trainer
  // has turned the machine's cache on and this F_frozen is the whole frozen prefix, each sample of
  // the replica's batch is read (hit), completed from its entry (stale) or computed (miss).
  BatchSource* source = shared_.data;
  ActivationStore* cache = source->frozen_cache();
  if (!cache) return st->frozen_forward(batch);
  const std::vector<int64_t> ids = source->replica_ids(global_step, replica_);
  const int F = st->frozen_count();
  if (!cache->enabled() || cache->boundary() != F ||
      static_cast<int64_t>(ids.size()) != batch.size(0)) {
    at::Tensor out = st->frozen_forward(batch);
    cache->count_passes(0, F, ids);
    return out;
  }
  cache->prefetch(source->replica_ids(global_step + 1, replica_));  // Appendix E's read-ahead
  return cache->frozen_forward(ids, batch, [st](const at::Tensor& x, int from, int to) {
    return st->frozen_forward(x, from, to);
  });
}

}  // namespace pipetwin::exec
