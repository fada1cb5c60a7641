#include "exec/profile_passes.hpp"

#include <algorithm>

#include <ATen/ATen.h>

#include "exec/host.hpp"
#include "exec/memory_tracker.hpp"

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

SequenceRunner::SequenceRunner(models::LayeredModel& model, int micro_batch,
                               const ProfileOptions& o, Device& device)
    : model_(model),
      device_(device),
      input_(model.synthetic_input(micro_batch, o.seed).to(device.torch_device())),
      target_(model.synthetic_target(micro_batch, o.seed).to(device.torch_device())) {
  for (auto& layer : model_.layers) {
    optimizers_.emplace_back(o.optimizer);  // one per layer: its state is per parameter list
    std::vector<at::Tensor> out;
    for (const auto& p : layer.parameters()) out.push_back(p.detach().clone());
    out_.push_back(std::move(out));
  }
}

void SequenceRunner::pass(PassTimes* t, const std::atomic<bool>* keep_going) {
  const size_t n = model_.layers.size();
  std::vector<at::Tensor> leaf(n), skip(n), y(n);
  if (!chain(leaf, skip, y, t ? &t->forward : nullptr, keep_going)) return;    // forward
  if (!chain(leaf, skip, y, t ? &t->recompute : nullptr, keep_going)) return;  // recompute
  for (size_t l = n; l-- > 0;) {
    if (stopped(keep_going)) return;
    // The gradient of layer l's output: from the next layer, and from the layers that read it
    // through a skip connection.
    at::Tensor g = l + 1 < n ? leaf[l + 1].grad() : at::Tensor();
    for (size_t c = l + 2; c < n; ++c) {
      if (model_.layers[c].skip_from == static_cast<int>(l)) g = g + skip[c].grad();
    }
    const auto a = device_.mark();
    if (l + 1 == n) {
      y[l].backward();
    } else {
      y[l].backward(g);
    }
    if (t) t->backward[l].push_back(device_.seconds(*a, *device_.mark()));
  }
  const bool in_place = t == nullptr || t->passes++ % 2 == 0;
  for (size_t l = 0; l < n; ++l) {
    const auto params = model_.layers[l].parameters();
    if (params.empty() || stopped(keep_going)) continue;
    std::vector<at::Tensor> grads;
    for (const auto& p : params) grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
    const auto a = device_.mark();
    optimizers_[l].step(in_place ? out_[l] : params, grads, out_[l]);
    at::NoGradGuard no_grad;
    for (auto& g : grads) g.zero_();
    if (t) {
      (in_place ? t->optimizer : t->optimizer_new_version)[l].push_back(
          device_.seconds(*a, *device_.mark()));
    }
  }
}

bool SequenceRunner::chain(std::vector<at::Tensor>& leaf, std::vector<at::Tensor>& skip,
                           std::vector<at::Tensor>& y, Samples* times,
                           const std::atomic<bool>* keep_going) {
  const size_t n = model_.layers.size();
  at::Tensor x = input_;
  for (size_t l = 0; l < n; ++l) {
    if (stopped(keep_going)) return false;
    const auto a = device_.mark();
    leaf[l] = l == 0 ? x : x.detach().requires_grad_(true);
    const int from = model_.layers[l].skip_from;
    if (from >= 0) skip[l] = y[static_cast<size_t>(from)].detach().requires_grad_(true);
    y[l] = model_.layers[l].forward(leaf[l], skip[l]);
    if (l + 1 == n) y[l] = model_.per_sample_loss(y[l], target_).sum();
    if (times) (*times)[l].push_back(device_.seconds(*a, *device_.mark()));
    x = y[l];
  }
  return true;
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
