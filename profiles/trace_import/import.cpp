#include "profiles/trace_import/import.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "profiles/trace_import/layer_bytes.hpp"
#include "profiles/trace_import/plain.hpp"

namespace pipetwin::trace_import {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Per layer, the median over the steps of `field`.
template <class F>
std::vector<double> layer_medians(const TraceMeasure& m, F field) {
  std::vector<double> out;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    std::vector<double> v;
    for (const auto& s : m.steps) v.push_back(field(s)[l]);
    out.push_back(median(v));
  }
  return out;
}

struct Imported {
  std::shared_ptr<const PlainReading> plain;  // the trace as read (plain.hpp)
  const KinetoTrace* trace = nullptr;         // plain->trace
  TraceMeasure m;
  TraceMetadata md;
  int micro_batch = 0;
  std::vector<LayerBytes> bytes;
  double input_bytes = 0;
  bool assumed_float = false;
  std::vector<double> forward, backward, optimizer;  // per layer, medians over steps
  double optimizer_total = 0;
  bool optimizer_by_accumulate = false;  // no parameter bytes: split by AccumulateGrad time
  TraceReport report;
};

int resolve_micro_batch(const KinetoTrace& t, const TraceMeasure& m, const TraceMetadata& md,
                        int flag) {
  if (flag > 0 && md.micro_batch > 0 && flag != md.micro_batch) {
    throw InputError(
        fmt::format("{}: pipetwin.micro_batch: the trace was recorded at micro-batch size {}, but "
                    "--micro-batch gives {} for it",
                    t.origin, md.micro_batch, flag));
  }
  if (flag > 0) return flag;
  if (md.micro_batch > 0) return md.micro_batch;
  const auto lead = leading_dimension(t, m);
  if (!lead || *lead < 1 || *lead > std::numeric_limits<int>::max()) {
    const bool shapes = std::any_of(t.events.begin(), t.events.end(),
                                    [](const TraceEvent& e) { return e.has_input_dims; });
    throw InputError(fmt::format(
        "{}: no micro-batch size: no \"pipetwin\" metadata and no recorded input shape of layer "
        "\"{}\" ({}); give --micro-batch",
        t.origin, m.layers.front(),
        shapes ? "record_shapes=True"
               : "the trace records no shapes at all: the legacy profiler's export writes none"));
  }
  return static_cast<int>(*lead);
}

// The optimizer time per layer: its own ranges, else the total split by parameter bytes, or where
// none were recorded by the layers' AccumulateGrad time (import.hpp).
void split_optimizer(Imported& r) {
  const TraceMeasure& m = r.m;
  r.optimizer_total = median([&] {
    std::vector<double> v;
    for (const auto& s : m.steps) v.push_back(s.optimizer_s);
    return v;
  }());
  if (m.per_layer_optimizer) {
    r.optimizer = layer_medians(m, [](const StepMeasure& s) { return s.optimizer_layer_s; });
    return;
  }
  std::vector<double> weight;
  for (const auto& b : r.bytes) weight.push_back(b.param_bytes);
  double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  if (total <= 0) {  // no bytes recorded: the time gradients took to add up stands in for them
    weight = layer_medians(m, [](const StepMeasure& s) { return s.accumulate_s; });
    total = std::accumulate(weight.begin(), weight.end(), 0.0);
    r.optimizer_by_accumulate = total > 0;
  }
  r.optimizer.assign(m.layers.size(), 0);
  if (total <= 0) return;
  for (size_t l = 0; l < m.layers.size(); ++l)
    r.optimizer[l] = r.optimizer_total * weight[l] / total;
}

TraceReport report_of(const Imported& r) {
  TraceReport t;
  t.origin = r.trace->origin;
  t.micro_batch = r.micro_batch;
  t.measured_steps = static_cast<int>(r.m.steps.size());
  t.all_steps = r.m.all_steps;
  t.device_time = r.m.device_time;
  t.backward_ops = r.m.backward_ops;
  t.backward_attributed = r.m.backward_attributed;
  t.unprofiled_step_s = r.md.unprofiled_step_s;
  t.page_faults_per_step = r.md.page_faults_per_step;
  std::vector<double> step, un, share, loss;
  std::map<std::string, std::vector<double>> parts;
  for (const auto& s : r.m.steps) {
    step.push_back(s.step_s);
    un.push_back(s.unattributed_s);
    loss.push_back(s.loss_s);
    share.push_back(s.step_s > 0 ? s.unattributed_s / s.step_s : 0);
    for (const auto& [name, v] : s.unattributed_by_name) parts[name];
  }
  for (const auto& s : r.m.steps) {
    for (auto& [name, v] : parts) {
      const auto it = s.unattributed_by_name.find(name);
      v.push_back(it == s.unattributed_by_name.end() ? 0 : it->second);
    }
  }
  t.step_s = median(step);
  t.unattributed_s = median(un);
  t.loss_s = median(loss);
  t.unattributed_share = median(share);
  for (const auto& [name, v] : parts) {
    if (median(v) > 0) t.unattributed_parts.emplace_back(name, median(v));
  }
  std::stable_sort(t.unattributed_parts.begin(), t.unattributed_parts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  t.bytes_from_metadata = std::any_of(r.bytes.begin(), r.bytes.end(),
                                      [](const LayerBytes& b) { return b.from_metadata; });
  return t;
}

Imported import_one(const KinetoTrace& raw, const ImportOptions& o, int flag_micro_batch) {
  Imported r;
  r.plain = std::make_shared<const PlainReading>(read_plain(raw, o.layers));
  r.trace = &r.plain->trace;
  const KinetoTrace& t = *r.trace;
  r.m = measure_trace(t, o.layers, o.loss_to_last_layer);
  r.md = read_metadata(t);
  r.micro_batch = resolve_micro_batch(t, r.m, r.md, flag_micro_batch);
  r.bytes = layer_bytes(t, r.m, r.micro_batch, r.input_bytes, r.assumed_float);
  r.forward = layer_medians(r.m, [](const StepMeasure& s) { return s.forward_s; });
  r.backward = layer_medians(r.m, [](const StepMeasure& s) { return s.backward_s; });
  split_optimizer(r);
  r.report = report_of(r);
  return r;
}

// Traces of one model: the same layers, one micro-batch size each, all CPU or all GPU.
void check_consistent(const Imported& a, const Imported& b) {
  const std::string& fa = a.trace->origin;
  const std::string& fb = b.trace->origin;
  if (a.micro_batch == b.micro_batch) {
    throw InputError(
        fmt::format("{}: micro-batch size {} already given by {}; one trace per micro-batch size",
                    fb, b.micro_batch, fa));
  }
  if (a.m.device_time != b.m.device_time) {
    throw InputError(fmt::format("{}: a {} trace, but {} is a {} trace", fb,
                                 b.m.device_time ? "GPU" : "CPU", fa,
                                 a.m.device_time ? "GPU" : "CPU"));
  }
  const auto& la = a.m.layers;
  const auto& lb = b.m.layers;
  for (size_t l = 0; l < std::max(la.size(), lb.size()); ++l) {
    if (l < la.size() && l < lb.size() && la[l] == lb[l]) continue;
    throw InputError(
        fmt::format("{}: layer {} is \"{}\", but in {} it is \"{}\" (the traces must "
                    "be of one model, with the same layers)",
                    fb, l, l < lb.size() ? lb[l] : "(none)", fa, l < la.size() ? la[l] : "(none)"));
  }
}

std::string resolve_device(const Imported& f, const ImportOptions& o) {
  if (!o.device.empty()) return o.device;
  const bool gpu = f.m.device_time || f.md.device.rfind("cuda", 0) == 0;
  if (!gpu) return "cpu-core";
  std::string name = f.md.device_name;
  if (name.empty() && !f.trace->device_names.empty()) name = f.trace->device_names.front();
  const std::string d = catalog_device_for(name);
  if (d.empty()) {
    throw InputError(fmt::format(
        "{}: a GPU trace of \"{}\", which names no catalog device; give --device (e.g. h100-sxm)",
        f.trace->origin, name.empty() ? "an unnamed device" : name));
  }
  return d;
}

std::string resolve_model(const Imported& f, const ImportOptions& o) {
  if (!o.model.empty()) return o.model;
  if (!f.md.model.empty()) return f.md.model;
  std::string stem = std::filesystem::path(f.trace->origin).filename().string();
  for (const char* ext : {".gz", ".json", ".trace", ".pt"}) {
    const std::string e = ext;
    if (stem.size() > e.size() && stem.compare(stem.size() - e.size(), e.size(), e) == 0)
      stem.resize(stem.size() - e.size());
  }
  return stem;
}

void check_metadata_words(const Imported& f) {
  const auto bad = [&](const char* field, const std::string& v, const std::string& known) {
    throw InputError(fmt::format("{}: pipetwin.{}: unknown {} \"{}\" (known: {})", f.trace->origin,
                                 field, field, v, known));
  };
  const std::string& d = f.md.dtype;
  const auto known = [](const std::vector<std::string>& names, const std::string& v) {
    return std::find(names.begin(), names.end(), v) != names.end();
  };
  if (!d.empty() && !known(dtype_names(), d))
    bad("dtype", d, fmt::format("{}", fmt::join(dtype_names(), ", ")));
  const std::string& o = f.md.optimizer;
  if (!o.empty() && !known(optimizer_names(), o))
    bad("optimizer", o, fmt::format("{}", fmt::join(optimizer_names(), ", ")));
}

std::string percent(double f) {
  return fmt::format("{:.1f}%", 100 * f);
}

std::string notes_of(const std::vector<Imported>& v, const ImportOptions& o) {
  const Imported& f = v.front();
  std::vector<std::string> files, shares;
  for (const auto& r : v) {
    files.push_back(std::filesystem::path(r.trace->origin).filename().string());
    std::vector<std::string> parts;
    for (const auto& [name, s] : r.report.unattributed_parts) {
      if (parts.size() == 3) break;
      parts.push_back(
          fmt::format("{} {}", name, percent(r.report.step_s > 0 ? s / r.report.step_s : 0)));
    }
    shares.push_back(fmt::format("{} at b={}{}{}{}", percent(r.report.unattributed_share),
                                 r.micro_batch, parts.empty() ? "" : " (", fmt::join(parts, ", "),
                                 parts.empty() ? "" : ")"));
  }
  const bool meta = f.report.bytes_from_metadata;
  const bool shapes = std::any_of(f.trace->events.begin(), f.trace->events.end(),
                                  [](const TraceEvent& e) { return e.has_input_dims; });
  std::string n = fmt::format(
      "pipetwin import-trace of {} ({} layers: {}): per micro-batch size the median of {} measured "
      "steps (the first step dropped as warm-up); forward: {}; backward: {}; the loss (forward "
      "and backward): {}; optimizer step: {}; recompute = forward, contention 1 and no cold "
      "starts (not measured); bytes: {}{}",
      fmt::join(files, ", "), f.m.layers.size(), o.layers.to_string(), f.report.measured_steps,
      f.m.device_time ? "the layer ranges' kernels' device time"
                      : "the CPU time of the operators in the layer ranges",
      f.m.backward_by_order ? "autograd nodes matched by name and order to the forward operators "
                              "that made them (the trace has no sequence numbers)"
                            : "autograd ops by sequence number",
      o.loss_to_last_layer ? "in the last layer's times" : "not attributed",
      f.m.per_layer_optimizer ? "per-layer ranges"
      : f.optimizer_by_accumulate
          ? "split over layers by their AccumulateGrad time (no parameter bytes recorded; adding "
            "up a gradient streams the parameter's bytes as its update does)"
      : f.m.optimizer_ranges_ignored
          ? "split over layers by parameter bytes (its per-layer ranges name other layers)"
          : "split over layers by parameter bytes",
      meta     ? "the trace's pipetwin metadata"
      : shapes ? "estimated from recorded input shapes"
               : "none recorded (no input shapes, no pipetwin metadata): parameters, activations "
                 "and messages count 0 bytes",
      std::any_of(v.begin(), v.end(), [](const Imported& r) { return r.assumed_float; })
          ? " (element type not recorded: float32 assumed)"
          : "");
  if (!f.plain->notes.empty()) {
    n += fmt::format(". Read without pipetwin's ranges: {}", fmt::join(f.plain->notes, "; "));
  }
  n += fmt::format(". Not attributed to any layer: {} of step time", fmt::join(shares, "; "));
  std::vector<std::string> faulted;
  for (const auto& r : v) {
    if (r.report.page_faults_per_step >= kManyPageFaultsPerStep)
      faulted.push_back(
          fmt::format("{:.0f} at b={}", r.report.page_faults_per_step, r.micro_batch));
  }
  if (!faulted.empty()) {
    n += fmt::format(". Page faults per profiled step: {} (the times read high)",
                     fmt::join(faulted, ", "));
  }
  return n;
}

void add_edges(Profile& p, const std::vector<LayerBytes>& bytes) {
  bool skips = false;
  for (const auto& b : bytes) skips = skips || !b.skip_from.empty();
  if (!skips) return;
  for (int l = 0; l < p.num_layers(); ++l) {
    const auto& b = bytes[size_t(l)];
    for (int from : b.skip_from)
      p.edges.push_back({from, l, p.layers[size_t(from)].output_bytes_per_sample});
    if (l + 1 < p.num_layers())
      p.edges.push_back({l, l + 1, p.layers[size_t(l)].output_bytes_per_sample});
  }
  std::stable_sort(p.edges.begin(), p.edges.end(), [](const ProfileEdge& a, const ProfileEdge& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
}

Profile assemble(const std::vector<Imported>& v, const ImportOptions& o) {
  const Imported& f = v.front();
  const Imported& largest = v.back();  // bytes per sample: from the largest micro-batch
  Profile p;
  p.model = resolve_model(f, o);
  p.device = resolve_device(f, o);
  p.dtype = f.md.dtype.empty() ? "float32" : f.md.dtype;
  p.source = "measured";
  p.optimizer = f.md.optimizer.empty() ? f.plain->optimizer : f.md.optimizer;
  p.input_bytes_per_sample = largest.input_bytes;
  const double state = p.optimizer == "adam" ? 2 : p.optimizer == "momentum" ? 1 : 0;
  for (size_t l = 0; l < f.m.layers.size(); ++l) {
    LayerProfile lp;
    lp.name = f.m.layers[l];
    const LayerBytes& b = largest.bytes[l];
    lp.kind = b.kind;
    std::vector<double> steps;
    for (const auto& r : v) {
      lp.timings.push_back(
          {r.micro_batch, r.forward[l], r.backward[l], r.forward[l], 1.0, 0, {}, {}});
      steps.push_back(r.optimizer[l]);
    }
    lp.output_bytes_per_sample = b.output_bytes_per_sample;
    lp.saved_bytes_per_sample = b.saved_bytes_per_sample;
    lp.param_bytes = b.param_bytes;
    lp.optimizer_bytes = state * b.param_bytes;
    lp.optimizer_step_s = median(steps);
    p.layers.push_back(std::move(lp));
  }
  add_edges(p, largest.bytes);
  p.notes = notes_of(v, o);
  return p;
}

}  // namespace

ImportResult import_traces(const std::vector<KinetoTrace>& traces, const ImportOptions& o) {
  if (traces.empty()) throw InputError("import-trace: give at least one trace file");
  if (!o.micro_batches.empty() && o.micro_batches.size() != traces.size()) {
    throw InputError(fmt::format("--micro-batch: {} sizes for {} trace files; give one per trace",
                                 o.micro_batches.size(), traces.size()));
  }
  std::vector<Imported> v;
  for (size_t i = 0; i < traces.size(); ++i) {
    v.push_back(import_one(traces[i], o, o.micro_batches.empty() ? 0 : o.micro_batches[i]));
    check_metadata_words(v.back());
    for (size_t j = 0; j < i; ++j) check_consistent(v[j], v[i]);
  }
  std::stable_sort(v.begin(), v.end(), [](const Imported& a, const Imported& b) {
    return a.micro_batch < b.micro_batch;
  });
  ImportResult r;
  r.profile = assemble(v, o);
  for (const auto& i : v) r.traces.push_back(i.report);
  return r;
}

ImportOptions ImportFlags::options() const {
  ImportOptions o;
  o.layers = LayerSelection::parse(layers);
  o.micro_batches = micro_batches;
  if (loss != "last" && loss != "unattributed")
    throw InputError(fmt::format("--loss: last or unattributed (\"{}\" given)", loss));
  o.loss_to_last_layer = loss == "last";
  for (int b : o.micro_batches) {
    if (b < 1) throw InputError(fmt::format("--micro-batch: sizes must be positive ({} given)", b));
  }
  o.device = device;
  o.model = model;
  return o;
}

ImportResult import_files(const std::vector<std::string>& paths, const ImportOptions& o,
                          const Catalog& catalog) {
  if (!o.device.empty()) (void)catalog.device(o.device, "--device");
  std::vector<KinetoTrace> traces;
  for (const auto& path : paths) traces.push_back(load_kineto_trace(path));
  ImportResult r = import_traces(traces, o);
  if (catalog.find_device(r.profile.device) == nullptr)
    (void)catalog.device(r.profile.device, "import-trace: device");
  return r;
}

std::string page_fault_warning(const TraceReport& r) {
  if (r.page_faults_per_step < kManyPageFaultsPerStep) return "";
  return fmt::format(
      "{}: {:.0f} page faults per profiled step: its tensors landed on fresh pages while it was "
      "recorded, so its times read high (record it with python/pipetwin_trace.py, whose "
      "steady_heap() reserves the heap first)",
      r.origin, r.page_faults_per_step);
}

std::string catalog_device_for(const std::string& device_name) {
  std::string n;
  for (char c : device_name) n += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("H200")) return "h200-sxm";
  if (has("H100")) return "h100-sxm";
  if (has("A100")) return has("80G") ? "a100-80gb" : "a100-40gb";
  if (has("V100")) return has("32G") ? "v100-32gb" : "v100-16gb";
  if (has("4090")) return "rtx-4090";
  if (has("2080 TI")) return "rtx-2080-ti";
  if (has("RTX 5000")) return "quadro-rtx-5000";
  if (has("P40")) return "tesla-p40";
  if (has(" L4") || n == "L4") return "l4";
  return "";
}

}  // namespace pipetwin::trace_import
