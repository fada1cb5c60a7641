#include "exec/profiler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/host.hpp"
#include "exec/memory_tracker.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

constexpr int kProfileDevice = MemoryTracker::kMaxDevices - 1;

using Clock = std::chrono::steady_clock;

double since(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per layer, the samples of one kind of time.
using Samples = std::vector<std::vector<double>>;

struct PassTimes {
  Samples forward, recompute, backward, optimizer;
  explicit PassTimes(size_t layers)
      : forward(layers), recompute(layers), backward(layers), optimizer(layers) {}
};

// Runs training passes over all layers of one model at one micro-batch size (see the header).
class SequenceRunner {
 public:
  SequenceRunner(models::LayeredModel& model, int b, const ProfileOptions& o)
      : model_(model),
        input_(model.synthetic_input(b, o.seed)),
        target_(model.synthetic_target(b, o.seed)) {
    for (auto& layer : model_.layers) {
      optimizers_.emplace_back(o.optimizer);  // one per layer: its state is per parameter list
      std::vector<at::Tensor> out;
      for (const auto& p : layer.parameters()) out.push_back(p.detach().clone());
      out_.push_back(std::move(out));
    }
  }

  // One pass; records its times into `t` when given.
  void pass(PassTimes* t) {
    const size_t n = model_.layers.size();
    std::vector<at::Tensor> leaf(n), y(n);
    chain(leaf, y, t ? &t->forward : nullptr);    // forward
    chain(leaf, y, t ? &t->recompute : nullptr);  // recompute, whose graph backward uses
    for (size_t l = n; l-- > 0;) {
      const auto a = Clock::now();
      if (l + 1 == n) {
        y[l].backward();
      } else {
        y[l].backward(leaf[l + 1].grad());
      }
      if (t) t->backward[l].push_back(since(a));
    }
    for (size_t l = 0; l < n; ++l) {
      const auto params = model_.layers[l].parameters();
      if (params.empty()) continue;
      std::vector<at::Tensor> grads;
      for (const auto& p : params)
        grads.push_back(p.grad().defined() ? p.grad() : at::zeros_like(p));
      const auto a = Clock::now();
      optimizers_[l].step(params, grads,
                          out_[l]);  // into copies: the model's weights stay as built
      at::NoGradGuard no_grad;
      for (auto& g : grads) g.zero_();  // as the stage does after its step
      if (t) t->optimizer[l].push_back(since(a));
    }
  }

 private:
  void chain(std::vector<at::Tensor>& leaf, std::vector<at::Tensor>& y, Samples* times) {
    const size_t n = model_.layers.size();
    at::Tensor x = input_;
    for (size_t l = 0; l < n; ++l) {
      const auto a = Clock::now();
      leaf[l] = l == 0 ? x : x.detach().requires_grad_(true);
      y[l] = model_.layers[l].module.forward(leaf[l]);
      if (l + 1 == n) y[l] = model_.per_sample_loss(y[l], target_).sum();
      if (times) (*times)[l].push_back(since(a));
      x = y[l];
    }
  }

  models::LayeredModel& model_;
  at::Tensor input_, target_;
  std::vector<Optimizer> optimizers_;
  std::vector<std::vector<at::Tensor>> out_;
};

PassTimes timed_passes(SequenceRunner& runner, size_t layers, const ProfileOptions& o) {
  for (int i = 0; i < o.warmup; ++i) runner.pass(nullptr);
  PassTimes t(layers);
  for (int i = 0; i < o.repeats; ++i) runner.pass(&t);
  return t;
}

// A thread on the second core running passes of its own model copy until stopped.
class CoRunner {
 public:
  CoRunner(const models::LayeredModel& model, int b, const ProfileOptions& o)
      : model_(model.clone()) {
    thread_ = std::thread([this, b, o] {
      MemoryTracker::ScopedDevice attribute(kProfileDevice - 1);
      configure_compute_thread(o.threads, 1, true);
      SequenceRunner runner(model_, b, o);
      while (!stop_.load()) {
        runner.pass(nullptr);
        running_.store(true);
      }
    });
    while (!running_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~CoRunner() {
    stop_.store(true);
    thread_.join();
  }
  CoRunner(const CoRunner&) = delete;
  CoRunner& operator=(const CoRunner&) = delete;

 private:
  models::LayeredModel model_;
  std::atomic<bool> stop_{false}, running_{false};
  std::thread thread_;
};

struct MemoryMeasure {
  double output_bytes = 0, saved_bytes = 0;
};

// Bytes of layer l's output and of what its forward keeps alive for backward (live bytes with
// the graph alive, minus before), at the input x.
MemoryMeasure measure_memory(models::LayeredModel& model, size_t l, const at::Tensor& x,
                             const at::Tensor& target) {
  auto& layer = model.layers[l].module;
  MemoryMeasure m;
  {
    at::NoGradGuard no_grad;
    const at::Tensor y = layer.forward(x);
    m.output_bytes = static_cast<double>(y.numel() * y.element_size());
  }
  for (auto& p : layer.ptr()->parameters()) p.mutable_grad() = at::Tensor();
  const int64_t before = MemoryTracker::live_bytes(kProfileDevice);
  {
    const at::Tensor input = l == 0 ? x : x.detach().requires_grad_(true);
    at::Tensor out = layer.forward(input);
    if (l + 1 == model.layers.size()) out = model.per_sample_loss(out, target).sum();
    m.saved_bytes = static_cast<double>(MemoryTracker::live_bytes(kProfileDevice) - before);
  }
  return m;
}

void check_options(const ProfileOptions& o) {
  if (o.micro_batches.empty()) throw InputError("--micro-batch: give at least one size");
  for (int b : o.micro_batches) {
    if (b < 1) throw InputError(fmt::format("--micro-batch: sizes must be positive ({} given)", b));
  }
  if (o.repeats < 1)
    throw InputError(fmt::format("--repeats must be positive ({} given)", o.repeats));
  if (o.warmup < 0)
    throw InputError(fmt::format("--warmup must not be negative ({} given)", o.warmup));
  o.optimizer.validate();
}

void describe_layers(Profile& p, const models::LayeredModel& model, const ProfileOptions& o) {
  p.layers.resize(model.layers.size());
  for (size_t l = 0; l < model.layers.size(); ++l) {
    auto& pl = p.layers[l];
    pl.name = model.layers[l].name;
    pl.kind = model.layers[l].kind;
    for (const auto& t : model.layers[l].parameters()) {
      pl.param_bytes += static_cast<double>(t.numel() * t.element_size());
    }
    pl.optimizer_bytes = o.optimizer.state_ratio() * pl.param_bytes;
  }
}

// Timings (alone and, when asked, with the co-runner) and memory at micro-batch size b.
void profile_size(Profile& p, models::LayeredModel& model, int b, bool contention,
                  const ProfileOptions& o) {
  const size_t n = model.layers.size();
  SequenceRunner runner(model, b, o);
  const PassTimes alone = timed_passes(runner, n, o);
  PassTimes shared(0);
  if (contention) {
    CoRunner co(model, b, o);
    shared = timed_passes(runner, n, o);
  }
  for (size_t l = 0; l < n; ++l) {
    LayerTiming t{b, median(alone.forward[l]), median(alone.backward[l]),
                  median(alone.recompute[l])};
    if (contention) {
      const double solo = t.forward_s + t.backward_s;
      const double both = median(shared.forward[l]) + median(shared.backward[l]);
      t.contention = solo > 0 ? std::max(1.0, both / solo) : 1.0;
    }
    p.layers[l].timings.push_back(t);
    // The optimizer step does not depend on b: keep the figure of the first size.
    if (b == o.micro_batches.front()) p.layers[l].optimizer_step_s = median(alone.optimizer[l]);
  }
  if (b != o.micro_batches.back()) return;
  at::Tensor x = model.synthetic_input(b, o.seed);
  const at::Tensor target = model.synthetic_target(b, o.seed);
  for (size_t l = 0; l < n; ++l) {
    const MemoryMeasure m = measure_memory(model, l, x, target);
    p.layers[l].output_bytes_per_sample = m.output_bytes / b;
    p.layers[l].saved_bytes_per_sample = std::max(0.0, m.saved_bytes) / b;
    at::NoGradGuard no_grad;
    x = model.layers[l].module.forward(x);
  }
}

// Per usable core (at most 8), the time of passes at micro-batch size b there over the time on
// the first core. Leaves the calling thread pinned to the first core.
std::vector<double> measure_core_slowdown(models::LayeredModel& model, int b,
                                          const ProfileOptions& o) {
  const int cores = std::min(usable_cores(), 8);
  std::vector<double> total;
  for (int c = 0; c < cores; ++c) {
    configure_compute_thread(o.threads, c, true);
    SequenceRunner runner(model, b, o);
    const PassTimes t = timed_passes(runner, model.layers.size(), o);
    double sum = 0;
    for (size_t l = 0; l < model.layers.size(); ++l)
      sum += median(t.forward[l]) + median(t.backward[l]);
    total.push_back(sum);
  }
  configure_compute_thread(o.threads, 0, true);
  std::vector<double> slowdown;
  for (double t : total) slowdown.push_back(total[0] > 0 ? t / total[0] : 1.0);
  return slowdown;
}

}  // namespace

Profile profile_model(const std::string& name, const ProfileOptions& o) {
  check_options(o);
  MemoryTracker::install();
  tune_malloc();
  const bool contention = o.contention && o.pin && usable_cores() >= 2;
  Profile p;
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      MemoryTracker::ScopedDevice attribute(kProfileDevice);
      configure_compute_thread(o.threads, 0, o.pin);
      models::LayeredModel model =
          models::build_model(name, o.float64 ? at::kDouble : at::kFloat, o.seed);
      p.model = model.name;
      p.device = o.device;
      p.dtype = o.float64 ? "float64" : "float32";
      p.source = "measured";
      p.notes = fmt::format(
          "pipetwin profile: layers timed in sequence, median of {} passes after {} warm-up, {} "
          "intra-op "
          "thread(s); contention {}",
          o.repeats, o.warmup, o.threads,
          contention ? "measured against a co-runner on the second core" : "not measured (1.0)");
      describe_layers(p, model, o);
      const at::Tensor input = model.synthetic_input(o.micro_batches.front(), o.seed);
      p.input_bytes_per_sample =
          static_cast<double>(input.numel() * input.element_size()) / o.micro_batches.front();
      for (int b : o.micro_batches) profile_size(p, model, b, contention, o);
      if (contention) p.core_slowdown = measure_core_slowdown(model, o.micro_batches.back(), o);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  worker.join();
  if (failure) std::rethrow_exception(failure);
  return p;
}

}  // namespace pipetwin::exec
