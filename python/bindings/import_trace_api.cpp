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

using namespace pybind11::literals;

// import_trace()'s keywords: the CLI's flags (profiles/trace_import/import.hpp) and -o.
struct ImportCall {
  trace_import::ImportFlags flags;
  std::string output;
};

// cli/cmd_import_trace.cpp's run_import_trace, without the printing.
trace_import::ImportResult run_import(const ImportCall& a) {
  const trace_import::ImportFlags& f = a.flags;
  const trace_import::ImportOptions o = f.options();  // checked before the catalog is read
  trace_import::ImportResult r = trace_import::import_files(f.traces, o, load_catalog(f.catalog));
  if (!a.output.empty()) save_profile(r.profile, a.output);
  return r;
}

// The layers at the largest micro-batch size: the table the CLI prints.
py::list layer_rows(const Profile& p) {
  py::list out;
  for (const auto& l : p.layers) {
    const LayerTiming& x = l.timings.back();
    out.append(py::dict("layer"_a = l.name, "kind"_a = l.kind, "micro_batch"_a = x.micro_batch,
                        "forward_s"_a = x.forward_s, "backward_s"_a = x.backward_s,
                        "optimizer_s"_a = l.optimizer_step_s, "param_bytes"_a = l.param_bytes,
                        "output_bytes_per_sample"_a = l.output_bytes_per_sample,
                        "saved_bytes_per_sample"_a = l.saved_bytes_per_sample));
  }
  return out;
}

// A figure the recording helper may not have written (-1): None then.
py::object recorded(double v) {
  return v >= 0 ? py::object(py::float_(v)) : py::object(py::none());
}

py::dict trace_row(const trace_import::TraceReport& r) {
  const std::string warning = trace_import::page_fault_warning(r);
  return py::dict(
      "origin"_a = r.origin, "micro_batch"_a = r.micro_batch, "measured_steps"_a = r.measured_steps,
      "all_steps"_a = r.all_steps, "device_time"_a = r.device_time, "step_s"_a = r.step_s,
      "unattributed_s"_a = r.unattributed_s, "unattributed_share"_a = r.unattributed_share,
      "loss_s"_a = r.loss_s, "unattributed_parts"_a = r.unattributed_parts,
      "backward_ops"_a = r.backward_ops, "backward_attributed"_a = r.backward_attributed,
      "bytes_from_metadata"_a = r.bytes_from_metadata,
      "unprofiled_step_s"_a = recorded(r.unprofiled_step_s),
      "page_faults_per_step"_a = recorded(r.page_faults_per_step),
      "warning"_a = warning.empty() ? py::object(py::none()) : py::object(py::str(warning)));
}

py::dict import_verb(const py::kwargs& kwargs) {
  Options o("import_trace", kwargs);
  ImportCall a;
  trace_import::ImportFlags& f = a.flags;
  o.paths("traces", f.traces);
  o.text("layers", f.layers);
  o.integers("micro_batch", f.micro_batches);
  o.text("device", f.device);
  o.text("model", f.model);
  o.text("loss", f.loss);
  o.path("catalog", f.catalog);
  o.path("output", a.output);
  o.finish();
  if (f.traces.empty()) throw py::type_error("import_trace() missing argument 'traces'");
  const trace_import::ImportResult r = without_gil([&] { return run_import(a); });
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
