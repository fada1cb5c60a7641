#include "exec/profile/profile_passes.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "exec/platform/host.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "exec/runtime/autocast.hpp"

namespace pipetwin::exec {

namespace {

bool stopped(const std::atomic<bool>* keep_going) {
  return keep_going != nullptr && !keep_going->load();
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<double> pass_medians(const Samples& samples) {
  std::vector<double> m;
  double sum = 0;
  size_t passes = 0;
  for (const auto& v : samples) {
    m.push_back(median(v));
    sum += m.back();
    if (!v.empty()) passes = passes == 0 ? v.size() : std::min(passes, v.size());
  }
  if (sum <= 0 || passes == 0) return m;
  std::vector<double> totals(passes, 0.0);
  for (const auto& v : samples) {
    for (size_t i = 0; i < passes && i < v.size(); ++i) totals[i] += v[i];
  }
  const double k = median(totals) / sum;
  for (double& x : m) x *= k;
  return m;
}

SequenceRunner::SequenceRunner(models::LayeredModel& model, int micro_batch,
                               const ProfileOptions& o, Device& device)
    : model_(model),
      device_(device),
      autocast_(o.autocast),
      autocast_device_(autocast_device_type(o.torch_device)),
      input_(model.synthetic_input(micro_batch, o.seed).to(device.torch_device())),
      target_(model.synthetic_target(micro_batch, o.seed).to(device.torch_device())) {
  for (auto& layer : model_.layers) {
    optimizers_.emplace_back(o.optimizer);  // one per layer: its state is per parameter list
    std::vector<at::Tensor> out;
    for (const auto& p : layer.parameters()) out.push_back(p.detach().clone());
    out_.push_back(std::move(out));
  }
}

void SequenceRunner::pass(PassTimes* t, const std::atomic<bool>* keep_going, double wait_s) {
  const size_t n = model_.layers.size();
  if (graph_.y.size() != n) graph_ = Graph(n), replay_ = Graph(n), split_ = Graph(n);
  const size_t phases = t != nullptr && t->split ? kPhases : kWholePhases;
  for (; pos_ < phases * n; ++pos_) {
    if (stopped(keep_going)) return;  // resumed here by the next call
    const auto phase = static_cast<Phase>(pos_ / n);
    const size_t i = pos_ % n;
    if (wait_s > 0 && i == 0 && (phase == Phase::kForward || phase == Phase::kBackward)) {
      device_.synchronize();
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
    switch (phase) {
      case Phase::kWarmForward:
        chain_layer(i, graph_, nullptr);
        break;
      case Phase::kForward:
        chain_layer(i, graph_, t ? &t->forward : nullptr);
        break;
      case Phase::kRecompute:
        chain_layer(i, replay_, t ? &t->recompute : nullptr);
        // Only the time is wanted: drop the layer before's graph (its saved activations) and keep
        // its output's values, so the pass holds one model's activations, not two (GPT-2 small
        // at micro-batch 8 and sequence 1024 ran out of an 80 GB H100 with both alive, and the
        // co-runner's copy beside them).
        if (i > 0) replay_.y[i - 1] = replay_.y[i - 1].detach();
        break;
      case Phase::kBackward:
        if (i == 0) replay_ = Graph(n);
        backward_layer(n - 1 - i, graph_, t ? &t->backward : nullptr);
        break;
      case Phase::kStep:
        if (i == 0) in_place_ = t == nullptr || t->passes++ % 2 == 0;
        step_layer(i, t);
        break;
      case Phase::kSplitForward: {
        if (i == 0) deferred_ = c10::make_intrusive<models::DeferredWeightGrads>();
        const models::RecordWeightGrads record(deferred_);
        models::RecordWeightGrads::set_layer(static_cast<int>(i));
        chain_layer(i, split_, nullptr);
        break;
      }
      case Phase::kInputHalf:
        deferred_->set_deferring(true);
        backward_layer(n - 1 - i, split_, &t->input_half);
        deferred_->set_deferring(false);
        break;
      case Phase::kWeightHalf:
        if (i == 0) split_ = Graph(n);  // the graph goes after I; the weight halves hold the rest
        weight_half_layer(n - 1 - i, &t->weight_half);
        break;
    }
  }
  pos_ = 0;
}

void SequenceRunner::chain_layer(size_t l, Graph& g, Samples* times) {
  const size_t n = model_.layers.size();
  const auto a = device_.mark();
  const at::Tensor x = l == 0 ? input_ : g.y[l - 1];
  g.leaf[l] = l == 0 ? x : x.detach().requires_grad_(true);
  const int from = model_.layers[l].skip_from;
  if (from >= 0) g.skip[l] = g.y[static_cast<size_t>(from)].detach().requires_grad_(true);
  {
    // Each layer's forward is an autocast region of its own (a stage's forward is one): its
    // weights are cast once per forward, as in the stage.
    const AutocastGuard autocast(autocast_device_, autocast_,
                                 autocast_ != at::ScalarType::Undefined);
    g.y[l] = model_.layers[l].forward(g.leaf[l], g.skip[l]);
  }
  if (l + 1 == n) g.y[l] = model_.per_sample_loss(float32_if_reduced(g.y[l]), target_).sum();
  if (times) (*times)[l].push_back(device_.seconds(*a, *device_.mark()));
}

void SequenceRunner::backward_layer(size_t l, const Graph& f, Samples* times) {
  const size_t n = model_.layers.size();
  // The gradient of layer l's output: from the next layer, and from the layers that read it
  // through a skip connection.
  at::Tensor g = l + 1 < n ? f.leaf[l + 1].grad() : at::Tensor();
  for (size_t c = l + 2; c < n; ++c) {
    if (model_.layers[c].skip_from == static_cast<int>(l)) g = g + f.skip[c].grad();
  }
  const auto a = device_.mark();
  if (l + 1 == n) {
    f.y[l].backward();
  } else {
    f.y[l].backward(g);
  }
  if (times) (*times)[l].push_back(device_.seconds(*a, *device_.mark()));
}

void SequenceRunner::weight_half_layer(size_t l, Samples* times) {
  const auto a = device_.mark();
  deferred_->run(static_cast<int>(l));
  if (times) (*times)[l].push_back(device_.seconds(*a, *device_.mark()));
  // The weight halves' gradients are not the step's (the step of the pass is behind): drop them.
  at::NoGradGuard no_grad;
  for (auto& p : model_.layers[l].parameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void SequenceRunner::step_layer(size_t l, PassTimes* t) {
  const auto params = model_.layers[l].parameters();
  if (params.empty()) return;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
  const auto a = device_.mark();
  optimizers_[l].step(in_place_ ? out_[l] : params, grads, out_[l]);
  at::NoGradGuard no_grad;
  for (auto& g : grads) g.zero_();
  if (t) {
    (in_place_ ? t->optimizer : t->optimizer_new_version)[l].push_back(
        device_.seconds(*a, *device_.mark()));
  }
}

CoRunner::CoRunner(const models::LayeredModel& model, int micro_batch, const ProfileOptions& o,
                   int device)
    : model_(model.clone()) {
  thread_ = std::thread([this, micro_batch, o, device] { loop(micro_batch, o, device); });
}

void CoRunner::loop(int micro_batch, ProfileOptions o, int device) {
  MemoryTracker::ScopedDevice attribute(device);
  configure_compute_thread(o.threads, 1, true);
  // The profiler's device kind: another CPU core, or other streams of the same GPU (a CudaDevice
  // of its own takes its own streams from LibTorch's pool); the model copy is already there.
  const std::unique_ptr<Device> dev = make_device(o.torch_device, device);
  dev->bind(0);
  SequenceRunner runner(model_, micro_batch, o, *dev);
  runner.pass(nullptr);  // warm-up
  dev->synchronize();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      busy_ = false;
      cv_.notify_all();
      cv_.wait(lock, [&] { return quit_ || want_.load(); });
      if (quit_) return;
      busy_ = true;
      cv_.notify_all();
    }
    // A GPU pass is waited for before the next (and before reporting a pause), so the co-runner
    // never queues more than one pass nor leaves kernels running once paused; a no-op on a CPU.
    while (want_.load()) {
      runner.pass(nullptr, &want_);
      dev->synchronize();
    }
  }
}

void CoRunner::resume() {
  std::unique_lock<std::mutex> lock(mu_);
  want_.store(true);
  cv_.notify_all();
  cv_.wait(lock, [&] { return busy_; });
}

void CoRunner::pause() {
  std::unique_lock<std::mutex> lock(mu_);
  want_.store(false);
  cv_.notify_all();
  cv_.wait(lock, [&] { return !busy_; });
}

CoRunner::~CoRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    want_.store(false);
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace pipetwin::exec
