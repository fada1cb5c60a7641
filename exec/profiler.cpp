#include "exec/profiler.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/memory_tracker.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

constexpr int kProfileDevice = MemoryTracker::kMaxDevices - 1;

template <typename F>
double median_time(int warmup, int repeats, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void configure_thread(const ProfileOptions& o) {
  at::init_num_threads();
  at::set_num_threads(o.threads);
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(o.threads);
  if (o.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
}

struct LayerMeasure {
  double forward = 0, backward = 0, recompute = 0, output_bytes = 0, saved_bytes = 0;
};

// One layer at one micro-batch size. `x` is the layer's input; `target` is used on the last layer.
LayerMeasure measure_layer(models::LayeredModel& model, size_t l, const at::Tensor& x,
                           const at::Tensor& target, const ProfileOptions& o) {
  auto& layer = model.layers[l].module;
  const bool last = l + 1 == model.layers.size();
  const bool leaf_grad = x.is_floating_point();
  auto forward = [&](at::Tensor& input) {
    input = leaf_grad ? x.detach().requires_grad_(true) : x;
    at::Tensor y = layer.forward(input);
    return last ? model.per_sample_loss(y, target).sum() : y;
  };
  LayerMeasure m;
  at::Tensor input;
  m.forward = median_time(o.warmup, o.repeats, [&] { forward(input); });
  m.recompute = median_time(o.warmup, o.repeats, [&] { forward(input); });
  {
    at::NoGradGuard no_grad;
    const at::Tensor y = layer.forward(x);
    m.output_bytes = static_cast<double>(y.numel() * y.element_size());
  }
  // Bytes the forward keeps for backward: live bytes with the graph alive, minus before.
  for (auto& p : layer.ptr()->parameters()) p.mutable_grad() = at::Tensor();
  const int64_t before = MemoryTracker::live_bytes(kProfileDevice);
  {
    at::Tensor out = forward(input);
    m.saved_bytes = static_cast<double>(MemoryTracker::live_bytes(kProfileDevice) - before);
  }
  // Backward: a fresh graph each time (built outside the timed region).
  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.repeats; ++i) {
    at::Tensor out = forward(input);
    const at::Tensor g = last ? at::Tensor() : at::ones_like(out);
    const auto a = std::chrono::steady_clock::now();
    if (last) {
      out.backward();
    } else {
      out.backward(g);
    }
    if (i >= o.warmup) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(times.begin(), times.end());
  m.backward = times[times.size() / 2];
  return m;
}

double optimizer_time(models::Layer& layer, const ProfileOptions& o) {
  std::vector<at::Tensor> params = layer.parameters();
  if (params.empty()) return 0;
  std::vector<at::Tensor> grads, out;
  for (auto& p : params) {
    grads.push_back(at::randn_like(p));
    out.push_back(p.detach().clone());
  }
  Optimizer opt(o.optimizer);
  return median_time(o.warmup, o.repeats, [&] { opt.step(out, grads, out); });
}

}  // namespace

Profile profile_model(const std::string& name, const ProfileOptions& o) {
  if (o.micro_batches.empty()) throw InputError("--micro-batch: give at least one size");
  for (int b : o.micro_batches) {
    if (b < 1) throw InputError(fmt::format("--micro-batch: sizes must be positive ({} given)", b));
  }
  o.optimizer.validate();
  MemoryTracker::install();
  Profile p;
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
    MemoryTracker::ScopedDevice attribute(kProfileDevice);
    configure_thread(o);
    models::LayeredModel model = models::build_model(name, o.float64 ? at::kDouble : at::kFloat, o.seed);
    p.model = model.name;
    p.device = o.device;
    p.dtype = o.float64 ? "float64" : "float32";
    p.source = "measured";
    p.notes = fmt::format("pipetwin profile: median of {} runs after {} warm-up, {} intra-op thread(s)",
                          o.repeats, o.warmup, o.threads);
    p.layers.resize(model.layers.size());
    for (size_t l = 0; l < model.layers.size(); ++l) {
      auto& pl = p.layers[l];
      pl.name = model.layers[l].name;
      pl.kind = model.layers[l].kind;
      for (const auto& t : model.layers[l].parameters()) {
        pl.param_bytes += static_cast<double>(t.numel() * t.element_size());
      }
      pl.optimizer_bytes = o.optimizer.state_ratio() * pl.param_bytes;
      pl.optimizer_step_s = optimizer_time(model.layers[l], o);
    }
    for (int b : o.micro_batches) {
      const at::Tensor input = model.synthetic_input(b, o.seed);
      const at::Tensor target = model.synthetic_target(b, o.seed);
      if (b == o.micro_batches.front()) {
        p.input_bytes_per_sample = static_cast<double>(input.numel() * input.element_size()) / b;
      }
      at::Tensor x = input;
      for (size_t l = 0; l < model.layers.size(); ++l) {
        const LayerMeasure m = measure_layer(model, l, x, target, o);
        auto& pl = p.layers[l];
        pl.timings.push_back({b, m.forward, m.backward, m.recompute});
        if (b == o.micro_batches.back()) {
          pl.output_bytes_per_sample = m.output_bytes / b;
          pl.saved_bytes_per_sample = std::max(0.0, m.saved_bytes) / b;
        }
        at::NoGradGuard no_grad;
        x = model.layers[l].module.forward(x);
      }
    }
    } catch (...) {
      failure = std::current_exception();
    }
  });
  worker.join();
  if (failure) std::rethrow_exception(failure);
  return p;
}

}  // namespace pipetwin::exec
