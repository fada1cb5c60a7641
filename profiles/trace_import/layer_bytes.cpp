#include "profiles/trace_import/layer_bytes.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/trace_import/plain.hpp"

namespace pipetwin::trace_import {

namespace {

JsonView metadata_view(const KinetoTrace& t) {
  return JsonView(t.metadata, t.origin, "pipetwin");
}

// A tensor an operator read: its shape and bytes.
struct Tensor {
  std::vector<int64_t> dims;
  double bytes = 0;
};

Tensor tensor_of(const KinetoTrace& trace, const TraceEvent& e, size_t k, bool& assumed_float) {
  Tensor t{e.input_dims[k], 0};
  double elem = k < e.input_types.size() ? element_bytes(e.input_types[k]) : 0;
  if (elem == 0) {
    elem = 4;  // the type was not recorded (legacy traces): float32
    assumed_float = true;
  }
  t.bytes = elem;
  for (int64_t d : t.dims) t.bytes *= static_cast<double>(d);
  if (!(t.bytes < 1e18)) {  // an exabyte tensor: the shape is garbage, and would overflow sums
    throw InputError(fmt::format("{}: {}[{}].args.Input Dims: an input of {} has {:g} bytes",
                                 trace.origin, trace.events_path, e.file_index, e.name, t.bytes));
  }
  return t;
}

// The outermost operators with recorded shapes inside range r (descendants on its lane, in
// order).
std::vector<size_t> ops_in(const KinetoTrace& t, size_t r) {
  std::vector<size_t> ops;
  const auto& ev = t.events;
  for (size_t j = r + 1; j < ev.size() && ev[j].lane == ev[r].lane; ++j) {
    if (ev[j].ts_us >= ev[r].end_us()) break;
    if (ev[j].kind != EventKind::kHost || !ev[j].has_input_dims) continue;
    bool outermost = true, inside = false;
    for (int a = ev[j].parent; a >= 0; a = ev[size_t(a)].parent) {
      if (size_t(a) == r) {
        inside = true;
        break;
      }
      if (ev[size_t(a)].has_input_dims) outermost = false;
    }
    if (inside && outermost) ops.push_back(j);
  }
  return ops;
}

// The name of the first operator (not a range) inside range r, without its namespace: the layer's
// kind where no shapes were recorded; "layer" when it holds none.
std::string first_operator_kind(const KinetoTrace& t, size_t r) {
  const auto& ev = t.events;
  for (size_t j = r + 1; j < ev.size() && ev[j].lane == ev[r].lane; ++j) {
    if (ev[j].ts_us >= ev[r].end_us() && !(ev[j].ts_us == ev[r].end_us() && ev[j].dur_us == 0))
      break;
    if (ev[j].kind != EventKind::kHost || ev[j].range) continue;
    for (int a = ev[j].parent; a >= 0; a = ev[size_t(a)].parent) {
      if (size_t(a) == r) return operator_stem(ev[j].name);
    }
  }
  return "layer";
}

// The first tensor operand among `ops`, if any.
std::optional<Tensor> first_tensor(const KinetoTrace& t, const std::vector<size_t>& ops,
                                   bool& assumed_float) {
  for (size_t j : ops) {
    const TraceEvent& e = t.events[j];
    for (size_t k = 0; k < e.input_dims.size(); ++k) {
      if (!e.input_dims[k].empty()) return tensor_of(t, e, k, assumed_float);
    }
  }
  return std::nullopt;
}

// The first tensor read by an operator that starts after range r ends, inside the step s.
std::optional<Tensor> tensor_after(const KinetoTrace& t, size_t r, size_t s, bool& assumed_float) {
  const auto& ev = t.events;
  for (size_t j = r + 1; j < ev.size() && ev[j].lane == ev[r].lane; ++j) {
    if (ev[j].ts_us >= ev[s].end_us()) break;
    if (ev[j].ts_us < ev[r].end_us() || ev[j].kind != EventKind::kHost) continue;
    if (auto x = first_tensor(t, {j}, assumed_float)) return x;
  }
  return std::nullopt;
}

LayerBytes bytes_from_shapes(const KinetoTrace& t, const std::vector<size_t>& ops, int mb,
                             bool& assumed_float) {
  LayerBytes b;
  if (!ops.empty()) {
    std::string name = t.events[ops.front()].name;
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    b.kind = name;
  }
  bool activation_seen = false;
  for (size_t j : ops) {
    const TraceEvent& e = t.events[j];
    for (size_t k = 0; k < e.input_dims.size(); ++k) {
      if (e.input_dims[k].empty()) continue;
      if (!activation_seen) {  // the layer's input
        activation_seen = true;
        continue;
      }
      if (e.input_dims[k].front() != mb) b.param_bytes += tensor_of(t, e, k, assumed_float).bytes;
    }
  }
  return b;
}

double nonneg_field(const JsonView& j, const char* key, double fallback) {
  return j.nonneg_or(key, fallback);
}

// A metadata entry for selected layer l. Its skips name metadata layers; those not selected
// (the metadata may describe modules at another depth than --layers picks) are left out.
void apply_metadata_layer(const JsonView& j, const TraceMeasure& m, size_t l,
                          const std::vector<std::string>& described, LayerBytes& b) {
  b.from_metadata = true;
  b.kind = j.string_or("kind", b.kind);
  b.param_bytes = nonneg_field(j, "param_bytes", b.param_bytes);
  b.output_bytes_per_sample = nonneg_field(j, "output_bytes_per_sample", b.output_bytes_per_sample);
  b.saved_bytes_per_sample = nonneg_field(j, "saved_bytes_per_sample", b.output_bytes_per_sample);
  const auto skips = j.find("skip_from");
  if (!skips) return;
  for (const auto& s : skips->items()) {
    const std::string from = s.as_string();
    if (std::find(described.begin(), described.end(), from) == described.end())
      s.fail(fmt::format("\"{}\" is not one of the layers", from));
    const auto it = std::find(m.layers.begin(), m.layers.end(), from);
    if (it == m.layers.end()) continue;
    const auto idx = static_cast<size_t>(it - m.layers.begin());
    if (idx >= l) {
      s.fail(fmt::format("layer \"{}\" runs after \"{}\": a skip must come from an earlier layer",
                         from, m.layers[l]));
    }
    if (idx + 1 == l) continue;  // the predecessor: the chain already carries it
    b.skip_from.push_back(static_cast<int>(idx));
  }
}

}  // namespace

TraceMetadata read_metadata(const KinetoTrace& t) {
  TraceMetadata md;
  if (t.metadata.is_null()) return md;
  const JsonView j = metadata_view(t);
  md.model = j.string_or("model", "");
  md.dtype = j.string_or("dtype", "");
  md.device = j.string_or("device", "");
  md.device_name = j.string_or("device_name", "");
  md.optimizer = j.string_or("optimizer", "");
  if (const auto mb = j.find("micro_batch")) {
    md.micro_batch = mb->as_int32();
    if (md.micro_batch < 1) mb->fail(fmt::format("must be at least 1 ({} given)", md.micro_batch));
  }
  md.input_bytes_per_sample = j.nonneg_or("input_bytes_per_sample", -1);
  md.unprofiled_step_s = j.nonneg_or("unprofiled_step_s", -1);
  md.page_faults_per_step = j.nonneg_or("page_faults_per_step", -1);
  if (const auto layers = j.find("layers")) {
    for (const auto& l : layers->items()) {
      if (l.string("name").empty()) l.at("name").fail("must not be empty");
    }
  }
  return md;
}

std::optional<int64_t> leading_dimension(const KinetoTrace& t, const TraceMeasure& m) {
  if (m.first_range.empty() || m.first_range.front() < 0) return std::nullopt;
  bool assumed = false;
  const auto x = first_tensor(t, ops_in(t, size_t(m.first_range.front())), assumed);
  if (!x) return std::nullopt;
  return x->dims.front();
}

std::vector<LayerBytes> layer_bytes(const KinetoTrace& t, const TraceMeasure& m, int mb,
                                    double& input_bytes_per_sample, bool& assumed_float) {
  const size_t n = m.layers.size();
  std::vector<LayerBytes> out(n);
  std::vector<std::optional<Tensor>> inputs(n + 1);
  for (size_t l = 0; l < n; ++l) {
    const auto ops = ops_in(t, size_t(m.first_range[l]));
    out[l] = bytes_from_shapes(t, ops, mb, assumed_float);
    if (ops.empty()) out[l].kind = first_operator_kind(t, size_t(m.first_range[l]));
    inputs[l] = first_tensor(t, ops, assumed_float);
  }
  inputs[n] = tensor_after(t, size_t(m.first_range[n - 1]), size_t(m.measured_steps.front()),
                           assumed_float);
  for (size_t l = 0; l < n; ++l) {
    out[l].output_bytes_per_sample = inputs[l + 1] ? inputs[l + 1]->bytes / mb : 0;
    out[l].saved_bytes_per_sample = out[l].output_bytes_per_sample;
  }
  input_bytes_per_sample = inputs[0] ? inputs[0]->bytes / mb : 0;
  if (t.metadata.is_null()) return out;
  const JsonView j = metadata_view(t);
  input_bytes_per_sample = j.nonneg_or("input_bytes_per_sample", input_bytes_per_sample);
  if (const auto layers = j.find("layers")) {
    std::vector<std::string> described;
    for (const auto& entry : layers->items()) described.push_back(entry.string("name"));
    for (const auto& entry : layers->items()) {
      const auto it = std::find(m.layers.begin(), m.layers.end(), entry.string("name"));
      const auto l = static_cast<size_t>(it - m.layers.begin());
      if (it != m.layers.end()) apply_metadata_layer(entry, m, l, described, out[l]);
    }
  }
  // Element types matter only where the shapes were used.
  assumed_float = assumed_float && std::any_of(out.begin(), out.end(), [](const LayerBytes& b) {
                    return !b.from_metadata;
                  });
  return out;
}

}  // namespace pipetwin::trace_import
