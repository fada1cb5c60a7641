#include "profiles/zoo/analytic.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"

namespace pipetwin::zoo {

namespace {

constexpr const char* kFormat = "pipetwin.efficiency";
constexpr int kVersion = 1;

double checked_efficiency(const JsonView& v) {
  const double e = v.as_positive();
  if (e > kMaxEfficiency) {
    v.fail(fmt::format("efficiency must be at most {} ({} given)", kMaxEfficiency, e));
  }
  return e;
}

// Beside one co-runner on the same device (stream sets of one GPU, hyper-threads of one core) a
// task whose roofline term saturates the device gets half of it; its launch overhead is not
// shared: (overhead + 2 x work) / (overhead + work).
double fair_share(double task_s, double overhead_s) {
  return task_s > 0 ? 2.0 - overhead_s / task_s : 1.0;
}

TaskOverheads checked_overheads(const JsonView& v) {
  if (!v.raw().is_object()) v.fail("expected an object with forward_s, backward_s and step_s");
  v.allow_only({"forward_s", "backward_s", "step_s"});
  return {v.nonneg("forward_s"), v.nonneg("backward_s"), v.nonneg("step_s")};
}

Json overheads_json(const TaskOverheads& o) {
  return {{"forward_s", o.forward_s}, {"backward_s", o.backward_s}, {"step_s", o.step_s}};
}

// Bytes per element of `layer`'s output in a dtype of `elem` bytes (ZooLayer::float32_output).
double output_bytes(const ZooLayer& layer, double elem) {
  return layer.float32_output ? std::max(elem, 4.0) : elem;
}

}  // namespace

const char* pass_name(TaskPass pass) {
  static constexpr std::array<const char*, 3> kNames{"fwd", "bwd", "step"};  // in TaskPass order
  const auto i = static_cast<size_t>(pass);
  return i < kNames.size() ? kNames[i] : "?";
}

double TaskOverheads::of(TaskPass pass) const {
  switch (pass) {
    case TaskPass::forward:
      return forward_s;
    case TaskPass::backward:
      return backward_s;
    case TaskPass::step:
      return step_s;
  }
  return 0;
}

double Efficiency::compute_for(const std::string& kind) const {
  const auto it = compute.find(kind);
  return it != compute.end() ? it->second : default_compute;
}

double Efficiency::overhead_for(const std::string& kind, TaskPass pass) const {
  if (const auto it = overheads.find(kind); it != overheads.end()) return it->second.of(pass);
  return default_overheads ? default_overheads->of(pass) : overhead_s;
}

Efficiency default_efficiency() {
  Efficiency e;
  e.compute = {{"mlp", 0.65},
               {"linear", 0.6},
               {"head", 0.55},
               {"attention", 0.45},
               {"cross-attention", 0.45},
               {"conv", 0.5},
               {"residual", 0.5},
               {"cell", 0.35},
               {"embedding", 0.3},
               {"norm", 0.3}};
  e.default_compute = 0.5;
  e.memory = 0.75;
  e.overhead_s = 20e-6;
  e.notes = "built-in defaults (profiles/zoo/analytic.hpp)";
  return e;
}

Efficiency efficiency_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format", "version", "device", "dtype", "compute", "default_compute", "memory",
                  "overhead_s", "overheads", "default_overheads", "notes", "sources", "fit"});
  Efficiency e;
  e.device = doc.string_or("device", "");
  e.dtype = doc.string_or("dtype", "");
  e.notes = doc.string_or("notes", "");
  const JsonView compute = doc.at("compute");
  if (!compute.raw().is_object()) compute.fail("expected an object of op kind -> efficiency");
  for (const auto& kind : compute.keys()) e.compute[kind] = checked_efficiency(compute.at(kind));
  e.default_compute = checked_efficiency(doc.at("default_compute"));
  e.memory = checked_efficiency(doc.at("memory"));
  e.overhead_s = doc.nonneg("overhead_s");
  if (auto per_kind = doc.find("overheads")) {
    if (!per_kind->raw().is_object()) per_kind->fail("expected an object of op kind -> overheads");
    for (const auto& kind : per_kind->keys())
      e.overheads[kind] = checked_overheads(per_kind->at(kind));
  }
  if (auto fallback = doc.find("default_overheads"))
    e.default_overheads = checked_overheads(*fallback);
  if (auto sources = doc.find("sources")) {
    if (!sources->raw().is_object()) sources->fail("expected an object of field -> source");
    for (const auto& key : sources->keys()) e.sources[key] = sources->at(key).as_string();
  }
  if (auto fit = doc.find("fit")) e.fit = fit->raw();
  return e;
}

Json efficiency_to_json(const Efficiency& e) {
  Json doc = json_document(kFormat, kVersion);
  if (!e.device.empty()) doc["device"] = e.device;
  if (!e.dtype.empty()) doc["dtype"] = e.dtype;
  Json compute = Json::object();
  for (const auto& [kind, value] : e.compute) compute[kind] = value;
  doc["compute"] = std::move(compute);
  doc["default_compute"] = e.default_compute;
  doc["memory"] = e.memory;
  doc["overhead_s"] = e.overhead_s;
  if (!e.overheads.empty()) {
    Json per_kind = Json::object();
    for (const auto& [kind, o] : e.overheads) per_kind[kind] = overheads_json(o);
    doc["overheads"] = std::move(per_kind);
  }
  if (e.default_overheads) doc["default_overheads"] = overheads_json(*e.default_overheads);
  if (!e.notes.empty()) doc["notes"] = e.notes;
  if (!e.sources.empty()) {
    Json sources = Json::object();
    for (const auto& [key, text] : e.sources) sources[key] = text;
    doc["sources"] = std::move(sources);
  }
  if (!e.fit.is_null()) doc["fit"] = e.fit;
  return doc;
}

Efficiency load_efficiency(const std::string& path) {
  const Json doc = load_json_file(path);
  return efficiency_from_json(JsonView(doc, path));
}

void save_efficiency(const Efficiency& e, const std::string& path) {
  write_file_atomic(path, dump_json(efficiency_to_json(e)));
}

double device_peak(const DeviceSpec& device, const std::string& dtype) {
  const double peak = device.flops(dtype);
  if (!(peak > 0)) {
    throw InputError(
        fmt::format("device {}: no peak FLOP/s for dtype {} (peak_flops)", device.name, dtype));
  }
  return peak;
}

double device_bandwidth(const DeviceSpec& device) {
  if (!(device.memory_bandwidth > 0)) {
    throw InputError(fmt::format("device {}: memory_bandwidth must be positive ({} given)",
                                 device.name, device.memory_bandwidth));
  }
  return device.memory_bandwidth;
}

LayerWork layer_work(const ZooLayer& layer, int b, double peak_flops, double bandwidth,
                     double elem_bytes) {
  const double samples = b;
  const double param_bytes = static_cast<double>(layer.params) * elem_bytes;
  const double traffic = samples * layer.traffic_elems * elem_bytes;
  LayerWork w;
  w.forward.compute_s = samples * layer.forward_flops / peak_flops;
  w.forward.memory_s = ((layer.dense_weights ? param_bytes : 0) + traffic) / bandwidth;
  w.backward.compute_s = 2 * w.forward.compute_s;
  w.backward.memory_s = (2 * param_bytes + 2 * traffic) / bandwidth;
  return w;
}

TaskWork step_work(const ZooLayer& layer, const ParamBytes& per_param, double bandwidth) {
  return {0, static_cast<double>(layer.params) * per_param.step_traffic / bandwidth};
}

double task_time(const TaskWork& w, const std::string& kind, TaskPass pass, const Efficiency& e) {
  return e.overhead_for(kind, pass) +
         std::max(w.compute_s / e.compute_for(kind), w.memory_s / e.memory);
}

Profile analytic_memory_profile(const ZooModel& model, const DeviceSpec& device,
                                const AnalyticOptions& o) {
  const double elem = dtype_bytes(o.dtype, "analytic profile: dtype");
  if (o.micro_batches.empty())
    throw InputError("analytic profile: give at least one micro-batch size");
  for (int b : o.micro_batches) require_positive("analytic profile: micro-batch size", b);
  const ParamBytes per_param =
      param_bytes(o.dtype, parse_optimizer(o.optimizer, "analytic profile: optimizer"));
  Profile p;
  p.model = model.name;
  p.device = device.name;
  p.dtype = o.dtype;
  p.source = "analytic";
  p.optimizer = o.optimizer;
  p.input_bytes_per_sample = model.input_elems * (model.input_tokens ? 8.0 : elem);
  for (const auto& l : model.layers) {
    LayerProfile lp;
    lp.name = l.name;
    lp.kind = l.kind;
    lp.output_bytes_per_sample = l.output_elems * output_bytes(l, elem);
    lp.saved_bytes_per_sample = l.saved_elems * elem;
    const auto params = static_cast<double>(l.params);
    lp.param_bytes = params * per_param.weight;
    lp.optimizer_bytes = params * per_param.optimizer();
    p.layers.push_back(std::move(lp));
  }
  for (const auto& edge : model.edges) {
    double bytes = edge.tokens ? 8.0 : elem;
    if (!edge.tokens && edge.from >= 0 && edge.from < model.num_layers())
      bytes = output_bytes(model.layers[static_cast<size_t>(edge.from)], elem);
    p.edges.push_back({edge.from, edge.to, edge.elems * bytes});
  }
  return p;
}

Profile analytic_profile(const ZooModel& model, const DeviceSpec& device,
                         const AnalyticOptions& o) {
  const double elem = dtype_bytes(o.dtype, "analytic profile: dtype");
  const double peak = device_peak(device, o.dtype), bw = device_bandwidth(device);
  Profile p = analytic_memory_profile(model, device, o);
  const Efficiency& e = o.efficiency;
  const ParamBytes per_param =
      param_bytes(o.dtype, parse_optimizer(o.optimizer, "analytic profile: optimizer"));
  p.notes =
      fmt::format("roofline over the zoo descriptor ({}); efficiencies: {}", model.description,
                  e.device.empty() ? e.notes : "calibrated on " + e.device);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const ZooLayer& l = model.layers[i];
    LayerProfile& lp = p.layers[i];
    for (int b : o.micro_batches) {
      const LayerWork w = layer_work(l, b, peak, bw, elem);
      const double fwd = task_time(w.forward, l.kind, TaskPass::forward, e);
      const double bwd = task_time(w.backward, l.kind, TaskPass::backward, e);
      lp.timings.push_back({b, fwd, bwd, fwd,
                            fair_share(fwd, e.overhead_for(l.kind, TaskPass::forward)),
                            fair_share(bwd, e.overhead_for(l.kind, TaskPass::backward))});
    }
    lp.optimizer_step_s =
        l.params > 0 ? task_time(step_work(l, per_param, bw), l.kind, TaskPass::step, e) : 0;
  }
  return p;
}

}  // namespace pipetwin::zoo
