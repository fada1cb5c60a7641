#include "python/bindings/import_trace_api.hpp"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "core/error.hpp"
#include "profiles/trace_import/import.hpp"
#include "python/bindings/convert.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_options.hpp"

namespace pipetwin::python {

namespace {

// import_trace()'s keywords (cli/cmd_import_trace.cpp's ImportTraceArgs).
struct ImportCall {
  std::vector<std::string> traces;
  std::string layers = "children", output, device, model, catalog, loss = "last";
  std::vector<int> micro_batches;
};

// cli/cmd_import_trace.cpp's run_import_trace, without the printing.
trace_import::ImportResult run_import(const ImportCall& a) {
  trace_import::ImportOptions o;
  o.layers = trace_import::LayerSelection::parse(a.layers);
  o.micro_batches = a.micro_batches;
  if (a.loss != "last" && a.loss != "unattributed")
    throw InputError(fmt::format("--loss: last or unattributed (\"{}\" given)", a.loss));
  o.loss_to_last_layer = a.loss == "last";
  for (int b : o.micro_batches) {
    if (b < 1) throw InputError(fmt::format("--micro-batch: sizes must be positive ({} given)", b));
  }
  o.device = a.device;
  o.model = a.model;
  const Catalog catalog = load_catalog(a.catalog);
  if (!o.device.empty()) (void)catalog.device(o.device, "--device");
  std::vector<trace_import::KinetoTrace> traces;
  for (const auto& path : a.traces) traces.push_back(trace_import::load_kineto_trace(path));
  trace_import::ImportResult r = trace_import::import_traces(traces, o);
  if (catalog.find_device(r.profile.device) == nullptr)
    (void)catalog.device(r.profile.device, "import-trace: device");
  if (!a.output.empty()) save_profile(r.profile, a.output);
  return r;
}

// The layers at the largest micro-batch size: the table the CLI prints.
py::list layer_rows(const Profile& p) {
  py::list out;
  for (const auto& l : p.layers) {
    const LayerTiming& x = l.timings.back();
    py::dict row;
    row["layer"] = l.name;
    row["kind"] = l.kind;
    row["micro_batch"] = x.micro_batch;
    row["forward_s"] = x.forward_s;
    row["backward_s"] = x.backward_s;
    row["optimizer_s"] = l.optimizer_step_s;
    row["param_bytes"] = l.param_bytes;
    row["output_bytes_per_sample"] = l.output_bytes_per_sample;
    row["saved_bytes_per_sample"] = l.saved_bytes_per_sample;
    out.append(row);
  }
  return out;
}

py::dict trace_row(const trace_import::TraceReport& r) {
  py::dict d;
  d["origin"] = r.origin;
  d["micro_batch"] = r.micro_batch;
  d["measured_steps"] = r.measured_steps;
  d["all_steps"] = r.all_steps;
  d["device_time"] = r.device_time;
  d["step_s"] = r.step_s;
  d["unattributed_s"] = r.unattributed_s;
  d["unattributed_share"] = r.unattributed_share;
  d["loss_s"] = r.loss_s;
  d["unattributed_parts"] = r.unattributed_parts;
  d["backward_ops"] = r.backward_ops;
  d["backward_attributed"] = r.backward_attributed;
  d["bytes_from_metadata"] = r.bytes_from_metadata;
  d["unprofiled_step_s"] = r.unprofiled_step_s >= 0 ? py::object(py::float_(r.unprofiled_step_s))
                                                    : py::object(py::none());
  d["page_faults_per_step"] = r.page_faults_per_step >= 0
                                  ? py::object(py::float_(r.page_faults_per_step))
                                  : py::object(py::none());
  d["warning"] = py::none();
  if (r.page_faults_per_step >= trace_import::kManyPageFaultsPerStep) {
    d["warning"] = fmt::format(
        "{}: {:.0f} page faults per profiled step: its tensors landed on fresh pages while it was "
        "recorded, so its times read high (record it with python/pipetwin_trace.py, whose "
        "steady_heap() reserves the heap first)",
        r.origin, r.page_faults_per_step);
  }
  return d;
}

py::dict import_verb(const py::kwargs& kwargs) {
  Options o("import_trace", kwargs);
  ImportCall a;
  o.paths("traces", a.traces);
  o.text("layers", a.layers);
  o.integers("micro_batch", a.micro_batches);
  o.text("device", a.device);
  o.text("model", a.model);
  o.text("loss", a.loss);
  o.path("catalog", a.catalog);
  o.path("output", a.output);
  o.finish();
  if (a.traces.empty()) throw py::type_error("import_trace() missing argument 'traces'");
  trace_import::ImportResult r;
  {
    py::gil_scoped_release release;
    r = run_import(a);
  }
  py::dict out;
  out["profile"] = to_python(profile_to_json(r.profile));
  out["layers"] = layer_rows(r.profile);
  py::list traces;
  for (const auto& t : r.traces) traces.append(trace_row(t));
  out["traces"] = traces;
  return out;
}

// A profile dict (the profile JSON) checked as a profile file is, then written.
void save_profile_dict(py::handle doc, py::handle path) {
  const Json j = from_python(doc, "profile");
  save_profile(profile_from_json(JsonView(j, "profile")), path_text(path, "path"));
}

}  // namespace

void bind_import_trace(py::module_& m) {
  m.def("_import_trace", &import_verb);
  m.def("_save_profile", &save_profile_dict, py::arg("profile"), py::arg("path"));
}

}  // namespace pipetwin::python
