#include "exec/profile/profiler.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/profile_check.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/host.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "exec/profile/profile_passes.hpp"
#include "exec/runtime/autocast.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

constexpr int kProfileDevice = MemoryTracker::kMaxDevices - 1;

// Whether the passes measure what needs a second CPU core beside the first: the cores' speeds
// and the cold starts (on a GPU the co-runner is streams of the same device: neither applies).
bool cpu_contention(bool contention, const Device& device) {
  return contention && !device.is_cuda();
}

// Warm-up passes, then `repeats` timed passes alone; with a co-runner, each alone pass is
// followed by one while the co-runner computes and, per cold pause, one that waits that long
// before its forward and its backward while the co-runner computes (`cold`, empty for none), so
// slow drifts of the host (other tenants of a cloud machine) touch every set alike.
void timed_passes(SequenceRunner& runner, CoRunner* co, const ProfileOptions& o, PassTimes& alone,
                  PassTimes& shared, std::vector<PassTimes>& cold) {
  for (int i = 0; i < o.warmup; ++i) runner.pass(nullptr);
  for (int i = 0; i < o.repeats; ++i) {
    runner.pass(&alone);
    if (co == nullptr) continue;
    co->resume();
    runner.pass(&shared);
    for (size_t k = 0; k < cold.size(); ++k) runner.pass(&cold[k], nullptr, o.cold_pauses_s[k]);
    co->pause();
  }
}

// A set of passes' per-layer figures, each kind's medians scaled to the median pass
// (profile_passes.hpp, pass_medians).
struct Medians {
  std::vector<double> forward, recompute, backward, optimizer, optimizer_new_version;
  std::vector<double> input_half, weight_half;  // empty unless the passes timed them
  explicit Medians(const PassTimes& t)
      : forward(pass_medians(t.forward)),
        recompute(pass_medians(t.recompute)),
        backward(pass_medians(t.backward)),
        optimizer(pass_medians(t.optimizer)),
        optimizer_new_version(pass_medians(t.optimizer_new_version)) {
    if (!t.split) return;
    input_half = pass_medians(t.input_half);
    weight_half = pass_medians(t.weight_half);
  }
};

// The split backward's halves at one micro-batch size against the whole backward
// (profiler.hpp "Split backward").
struct SplitCheck {
  int micro_batch = 0;
  double halves = 0, whole = 0;  // summed over the layers
  double worst = 1;              // the layer whose I + W differs most from its B, as (I + W) / B
  size_t worst_layer = 0;
};

SplitCheck check_split(const Medians& a, int b) {
  SplitCheck c{.micro_batch = b};
  for (size_t l = 0; l < a.backward.size(); ++l) {
    const double halves = a.input_half[l] + a.weight_half[l], whole = a.backward[l];
    c.halves += halves;
    c.whole += whole;
    const double r = whole > 0 ? halves / whole : 1;
    if (std::abs(std::log(r)) > std::abs(std::log(c.worst))) c.worst = r, c.worst_layer = l;
  }
  return c;
}

// What each pause costs layer l's forward and backward (timed_passes): the figure after the
// pause less the figure beside the co-runner without one, never below 0.
void cold_extras(LayerTiming& t, const std::vector<Medians>& cold, const Medians& shared,
                 size_t l) {
  for (const Medians& c : cold) {
    t.cold_forward_s.push_back(std::max(0.0, c.forward[l] - shared.forward[l]));
    t.cold_backward_s.push_back(std::max(0.0, c.backward[l] - shared.backward[l]));
  }
}

struct MemoryMeasure {
  double output_bytes = 0, saved_bytes = 0, backward_bytes = 0;
  double forward_workspace = 0, backward_workspace = 0;  // LayerProfile's *_workspace_*
};

// Bytes of the gradients a layer's backward makes and keeps: its input's (and skip input's,
// when they take one) and its parameters'.
double gradient_bytes(const at::Tensor& input, const at::Tensor& skip,
                      const std::vector<at::Tensor>& params) {
  const auto bytes = [](const at::Tensor& t) {
    return t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0.0;
  };
  double sum = (input.requires_grad() ? bytes(input) : 0.0) + bytes(skip);
  for (const auto& p : params) sum += p.requires_grad() ? bytes(p) : 0.0;
  return sum;
}

// Bytes of layer l's output and of what its forward keeps alive for backward (live bytes with
// the graph alive, minus before), at the input x (and skip input `skip`, if it takes one).
// Under `autocast` (Undefined: none) the forward runs in an autocast region on `where`.
MemoryMeasure measure_memory(Device& device, models::LayeredModel& model, size_t l,
                             const at::Tensor& x, const at::Tensor& skip, const at::Tensor& target,
                             at::ScalarType autocast, const std::string& where) {
  auto& layer = model.layers[l];
  MemoryMeasure m;
  const bool mixed = autocast != at::ScalarType::Undefined;
  {
    at::NoGradGuard no_grad;
    const AutocastGuard guard(autocast_device_type(where), autocast, mixed);
    const at::Tensor y = layer.forward(x, skip);
    m.output_bytes = static_cast<double>(y.numel() * y.element_size());
  }
  for (auto& p : layer.parameters()) p.mutable_grad() = at::Tensor();
  const int64_t before = device.live_bytes();
  {
    const at::Tensor input = l == 0 ? x : x.detach().requires_grad_(true);
    const at::Tensor skip_input = skip.defined() ? skip.detach().requires_grad_(true) : skip;
    device.reset_peak();
    at::Tensor out;
    {
      const AutocastGuard guard(autocast_device_type(where), autocast, mixed);
      out = layer.forward(input, skip_input);
    }
    if (l + 1 == model.layers.size())
      out = model.per_sample_loss(float32_if_reduced(out), target).sum();
    const int64_t after = device.live_bytes();
    m.saved_bytes = static_cast<double>(after - before);
    m.forward_workspace = static_cast<double>(device.peak_bytes() - std::max(before, after));
    // The backward's peak above what was alive when it began (its output gradient too).
    const at::Tensor seed = at::ones_like(out);
    const int64_t start = device.live_bytes();
    device.reset_peak();
    out.backward(seed);
    m.backward_bytes = static_cast<double>(device.peak_bytes() - start);
    m.backward_workspace = m.backward_bytes - gradient_bytes(input, skip_input, layer.parameters());
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
  for (size_t i = 0; i < o.cold_pauses_s.size(); ++i) {
    const double w = o.cold_pauses_s[i];
    if (!(w > 0) || (i > 0 && w <= o.cold_pauses_s[i - 1])) {
      throw InputError(fmt::format("cold pauses must be positive and increase ({} given)",
                                   fmt::join(o.cold_pauses_s, ", ")));
    }
  }
  o.optimizer.validate();
  if (o.float64 && o.autocast != at::ScalarType::Undefined)
    throw InputError("--dtype: float64 and autocast mixed precision exclude each other");
  check_precision_device({o.float64, o.autocast}, o.torch_device);
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

// Contention factor: a time shared over the time alone, at least 1 (1 where nothing was timed).
double ratio(double shared, double alone) {
  return alone > 0 ? std::max(1.0, shared / alone) : 1.0;
}

// Per layer, the optimizer step in place and into a new weight version (profile_passes.hpp).
struct StepTimes {
  std::vector<double> in_place, new_version;
};

// Timings of every layer (alone and, when asked, with the co-runner) at micro-batch size b;
// `steps`: each layer's optimizer steps; `split`: the split backward's halves against the whole
// backward (null: not wanted).
std::vector<LayerTiming> measure_size(Device& device, models::LayeredModel& model, int b,
                                      bool contention, const ProfileOptions& o, StepTimes* steps,
                                      SplitCheck* split) {
  const size_t n = model.layers.size();
  SequenceRunner runner(model, b, o, device);
  PassTimes alone(n, o.split_backward), shared(n);
  std::vector<PassTimes> cold;
  if (cpu_contention(contention, device)) cold.assign(o.cold_pauses_s.size(), PassTimes(n));
  {
    std::unique_ptr<CoRunner> co;
    if (contention) co = std::make_unique<CoRunner>(model, b, o, kProfileDevice - 1);
    timed_passes(runner, co.get(), o, alone, shared, cold);
  }
  const Medians a(alone), sh(shared);
  std::vector<Medians> c;
  for (const PassTimes& x : cold) c.emplace_back(x);
  std::vector<LayerTiming> out;
  for (size_t l = 0; l < n; ++l) {
    LayerTiming t{b, a.forward[l], a.backward[l], a.recompute[l]};
    // The weight half, at most the whole backward (what a profile may say, core/profile.hpp).
    if (o.split_backward) t.backward_weight_s = std::min(a.weight_half[l], t.backward_s);
    if (contention) {
      // Apart for the forward (with the recompute, the same computation) and the backward: beside
      // another stage a block's backward slows by about 1.25 on this project's CPU machine, its
      // forward by about 1.05 (memory traffic: the backward streams weights, gradients and saved
      // activations), so one factor for both over-predicts forwards and under-predicts backwards.
      const double fr = t.forward_s + t.recompute_s;
      t.contention = ratio(sh.forward[l] + sh.recompute[l], fr);
      t.contention_backward = ratio(sh.backward[l], t.backward_s);
      cold_extras(t, c, sh, l);
    }
    out.push_back(t);
    if (steps) {
      steps->in_place.push_back(a.optimizer[l]);
      steps->new_version.push_back(a.optimizer_new_version[l]);
    }
  }
  if (split && o.split_backward) *split = check_split(a, b);
  return out;
}

// The notes' line on the split backward: I + W over B per size, and the layer that differs most.
std::string split_note(const std::vector<SplitCheck>& checks, const Profile& p) {
  if (checks.empty()) return "";
  std::string sizes;
  const SplitCheck* worst = &checks.front();
  for (const SplitCheck& c : checks) {
    sizes += fmt::format("{}{:.2f} at micro-batch {}", sizes.empty() ? "" : ", ",
                         c.whole > 0 ? c.halves / c.whole : 1.0, c.micro_batch);
    if (std::abs(std::log(c.worst)) > std::abs(std::log(worst->worst))) worst = &c;
  }
  return fmt::format(
      "; split backward (I + W, weight halves of linear layers deferred) over the whole backward: "
      "{}; layer {} ({}) differs most: {:.2f} at micro-batch {}",
      sizes, worst->worst_layer, p.layers[worst->worst_layer].name, worst->worst,
      worst->micro_batch);
}

// Timings and, at the largest size, memory at micro-batch size b.
void profile_size(Profile& p, Device& device, models::LayeredModel& model, int b, bool contention,
                  const ProfileOptions& o, std::vector<SplitCheck>& checks) {
  const size_t n = model.layers.size();
  StepTimes steps;
  SplitCheck split;
  const std::vector<LayerTiming> t = measure_size(device, model, b, contention, o, &steps, &split);
  if (o.split_backward) checks.push_back(split);
  for (size_t l = 0; l < n; ++l) {
    p.layers[l].timings.push_back(t[l]);
    // The optimizer step does not depend on b: keep the figures of the first size.
    if (b == o.micro_batches.front()) {
      p.layers[l].optimizer_step_s = steps.in_place[l];
      p.layers[l].optimizer_new_version_s = steps.new_version[l];
    }
  }
  if (b != o.micro_batches.back()) return;
  const c10::Device where = device.torch_device();  // .to(where) copies nothing on the CPU
  std::map<int, at::Tensor> values{
      {models::LayeredModel::kModelInput, model.synthetic_input(b, o.seed).to(where)}};
  const at::Tensor target = model.synthetic_target(b, o.seed).to(where);
  for (size_t l = 0; l < n; ++l) {
    const int from = model.layers[l].skip_from;
    const MemoryMeasure m = measure_memory(device, model, l, values.at(static_cast<int>(l) - 1),
                                           from >= 0 ? values.at(from) : at::Tensor(), target,
                                           o.autocast, o.torch_device);
    p.layers[l].output_bytes_per_sample = m.output_bytes / b;
    p.layers[l].saved_bytes_per_sample = std::max(0.0, m.saved_bytes) / b;
    p.layers[l].backward_bytes_per_sample = std::max(0.0, m.backward_bytes) / b;
    p.layers[l].forward_workspace_bytes_per_sample = std::max(0.0, m.forward_workspace) / b;
    p.layers[l].backward_workspace_bytes_per_sample = std::max(0.0, m.backward_workspace) / b;
    at::NoGradGuard no_grad;
    const AutocastGuard guard(autocast_device_type(o.torch_device), o.autocast,
                              o.autocast != at::ScalarType::Undefined);
    model.forward_layers({static_cast<int>(l)}, values);
  }
  // A model with cross-layer skip connections names its edges; each carries its producer's output.
  p.edges.clear();
  if (model.has_skips()) {
    for (const auto& [from, to] : model.edges())
      p.edges.push_back({from, to, p.layers[static_cast<size_t>(from)].output_bytes_per_sample});
  }
}

// Sizes whose timings a stall of the host disturbed (profiles/profile_check.hpp) are measured
// again, at most twice; the notes say which. A disturbance that survives is left as measured
// and named in the notes (the host was busy for long: profile again).
void remeasure_disturbed(Profile& p, Device& device, models::LayeredModel& model, bool contention,
                         const ProfileOptions& o) {
  std::vector<int> again;
  for (int round = 0; round < 2; ++round) {
    const std::vector<int> sizes = disturbed_sizes(p);
    if (sizes.empty()) break;
    for (int b : sizes) {
      const std::vector<LayerTiming> t =
          measure_size(device, model, b, contention, o, nullptr, nullptr);
      for (size_t l = 0; l < p.layers.size(); ++l) {
        for (auto& x : p.layers[l].timings) {
          if (x.micro_batch == b) x = t[l];
        }
      }
      again.push_back(b);
    }
  }
  if (!again.empty()) {
    p.notes += fmt::format("; measured again after a host stall at micro-batch {}",
                           fmt::join(again, ", "));
  }
  const auto left = disturbed_timings(p);
  if (!left.empty()) {
    p.notes += fmt::format("; still disturbed: layer {} {} at micro-batch {} ({:.3g} s)",
                           left.front().layer, left.front().pass, left.front().micro_batch,
                           left.front().seconds);
  }
}

// Per usable core (at most 8), the time of passes at micro-batch size b there over the time on
// the first core; the cores take turns pass by pass. Leaves the calling thread on the first core.
std::vector<double> measure_core_slowdown(Device& device, models::LayeredModel& model, int b,
                                          const ProfileOptions& o) {
  const int cores = std::min(usable_cores(), 8);
  SequenceRunner runner(model, b, o, device);
  std::vector<PassTimes> t(static_cast<size_t>(cores), PassTimes(model.layers.size()));
  for (int i = 0; i < o.warmup + o.repeats; ++i) {
    for (int c = 0; c < cores; ++c) {
      configure_compute_thread(o.threads, c, true);
      runner.pass(i < o.warmup ? nullptr : &t[static_cast<size_t>(c)]);
    }
  }
  configure_compute_thread(o.threads, 0, true);
  // A core's pass: the median forward pass plus the median backward pass (pass_medians), as
  // the layers' figures are taken.
  std::vector<double> total;
  for (const auto& pt : t) {
    double sum = 0;
    for (const Samples* s : {&pt.forward, &pt.backward}) {
      for (double x : pass_medians(*s)) sum += x;
    }
    total.push_back(sum);
  }
  std::vector<double> slowdown;
  for (double x : total) slowdown.push_back(total[0] > 0 ? x / total[0] : 1.0);
  return slowdown;
}

// "AMD EPYC, 2 usable cores": what the profile was measured on, for its notes.
std::string host_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return fmt::format("{}, {} usable core(s)", model, usable_cores());
}

// InputError where a layer of `model` cannot train under the CPU's autocast
// (exec/runtime/autocast.hpp).
void check_cpu_autocast(models::LayeredModel& model, const ProfileOptions& o) {
  if (o.autocast == at::ScalarType::Undefined || o.torch_device != "cpu") return;
  check_cpu_autocast_trains(model, model.synthetic_input(1, o.seed), o.autocast);
}

// The catalog entry of the GPU `device` is (hardware/devices.json), for a profile measured there.
std::string catalog_device(const Device& device) {
  if (!device.is_cuda()) return "cpu-core";
  const std::string name = catalog_name_for_gpu(device.describe(), device.capacity_bytes());
  if (name.empty()) {
    throw InputError(fmt::format(
        "--device: the GPU {} has no entry in the hardware catalog that pipetwin knows; name "
        "one with --catalog-device",
        device.describe()));
  }
  return name;
}

}  // namespace

Profile profile_model(const std::string& name, const ProfileOptions& o) {
  check_options(o);
  MemoryTracker::install();
  tune_malloc();
  const std::unique_ptr<Device> device = make_device(o.torch_device, kProfileDevice);
  // Contention: of CPU cores shared by stages, or of stream sets sharing one GPU (profiler.hpp);
  // core slow-down: of CPU cores only.
  const bool contention = o.contention && (device->is_cuda() || (o.pin && usable_cores() >= 2));
  Profile p;
  p.device = o.device.empty() ? catalog_device(*device) : o.device;
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      MemoryTracker::ScopedDevice attribute(kProfileDevice);
      configure_compute_thread(o.threads, 0, o.pin);
      device->bind(0);
      const Precision precision{o.float64, o.autocast};
      models::LayeredModel model = models::build_model(name, weight_dtype(precision), o.seed);
      if (device->is_cuda()) model.to(device->torch_device());
      check_cpu_autocast(model, o);
      p.model = model.name;
      p.dtype = precision_name(precision);
      p.source = "measured";
      // The rule the optimizer figures are for, as core/precision.hpp names it.
      p.optimizer = o.optimizer.kind == "adam" ? "adam"
                    : o.optimizer.momentum > 0 ? "momentum"
                                               : "sgd";
      p.notes = fmt::format(
          "pipetwin profile on {}: layers timed in sequence, median of {} passes after {} warm-up, "
          "{} intra-op thread(s); contention {}",
          device->is_cuda() ? device->describe() + ", timed by CUDA events" : host_description(),
          o.repeats, o.warmup, o.threads,
          !contention         ? "not measured (1.0)"
          : device->is_cuda() ? "measured against a co-runner on other streams of the GPU"
                              : "measured against a co-runner on the second core");
      describe_layers(p, model, o);
      const at::Tensor input = model.synthetic_input(o.micro_batches.front(), o.seed);
      p.input_bytes_per_sample =
          static_cast<double>(input.numel() * input.element_size()) / o.micro_batches.front();
      if (cpu_contention(contention, *device)) p.cold_pauses_s = o.cold_pauses_s;
      std::vector<SplitCheck> checks;
      for (int b : o.micro_batches) profile_size(p, *device, model, b, contention, o, checks);
      p.notes += split_note(checks, p);
      remeasure_disturbed(p, *device, model, contention, o);
      if (cpu_contention(contention, *device))
        p.core_slowdown = measure_core_slowdown(*device, model, o.micro_batches.back(), o);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  worker.join();
  if (failure) std::rethrow_exception(failure);
  return p;
}

}  // namespace pipetwin::exec
