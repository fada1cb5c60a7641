#include "python/bindings/plan_api.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "python/bindings/convert.hpp"
#include "python/bindings/plan_options.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::python {

namespace {

// What plan() takes beyond the plan flags (cli/cmd_plan.cpp's PlanArgs).
struct PlanCall {
  sim::PlanOptions flags = [] {
    sim::PlanOptions f;
    f.schedule_auto = true;
    return f;
  }();
  std::vector<std::string> schedules;  // schedule="auto"'s candidates
  bool allow_oom = false;
  std::string output;
};

// One row per candidate of schedule="auto", the columns `pipetwin plan` prints.
Json search_rows(const std::vector<sim::ScheduleTrial>& trials) {
  Json rows = Json::array();
  for (const auto& trial : trials) {
    const auto& e = trial.evaluation;
    const bool ran = e.ok() && e.simulated;
    Json row;
    row["schedule"] = trial.candidate.schedule;
    row["virtual_stages"] = trial.candidate.virtual_stages;
    row["chunks"] = ran ? Json(e.plan.chunks) : Json(nullptr);
    row["iteration_time_s"] = ran ? Json(e.iteration_time_s) : Json(nullptr);
    row["peak_memory_max_bytes"] = ran ? Json(e.peak_memory_max_bytes) : Json(nullptr);
    row["fits"] = ran && e.fits;
    row["outcome"] = trial.verdict;
    rows.push_back(row);
  }
  return rows;
}

// `pipetwin plan`'s run (studies/plan_options.hpp), without the printing.
PlanObject run_plan(const PlanCall& call) {
  sim::PlannedRequest planned = sim::plan_with_options(call.flags, call.schedules, call.allow_oom);
  PlanObject out(std::move(planned.plan));
  out.memory_note = std::move(planned.memory_note);
  out.search = search_rows(planned.trials);
  if (!call.output.empty()) save_plan(out.plan, call.output);
  return out;
}

PlanObject plan_verb(const py::kwargs& kwargs) {
  Options o("plan", kwargs);
  PlanCall call;
  bind_plan_flags(o, call.flags);
  o.words("schedules", call.schedules);
  o.flag("allow_oom", call.allow_oom);
  o.path("output", call.output);
  o.finish();
  return without_gil([&] { return run_plan(call); });
}

PlanObject plan_from_text(const std::string& text, const std::string& origin) {
  const Json doc = parse_json_text(text, origin);
  return PlanObject(plan_from_json(JsonView(doc, origin)));
}

// The per-stage costs `pipetwin plan` prints: layers, predicted times and memory.
py::list stage_rows(const PlanObject& p) {
  const PlanContext ctx(p.plan, 0);
  py::list rows;
  for (size_t s = 0; s < ctx.stages.size(); ++s) {
    const auto& st = ctx.stages[s];
    const auto& layers = p.plan.stages[s].layers;
    py::dict row;
    row["stage"] = s;
    row["device"] = p.plan.stages[s].device;
    row["replicas"] = p.plan.stages[s].replicas;
    row["first_layer"] = *std::min_element(layers.begin(), layers.end());
    row["last_layer"] = *std::max_element(layers.begin(), layers.end());
    row["layers"] = layers.size();
    row["forward_s"] = st.forward_s;
    row["backward_s"] = st.backward_s;
    row["param_bytes"] = st.param_bytes;
    row["activation_bytes_per_micro_batch"] = st.input_bytes + st.saved_bytes;
    rows.append(row);
  }
  return rows;
}

py::list stages_of(const Plan& plan) {
  py::list out;
  for (const auto& s : plan.stages) {
    py::dict d;
    d["layers"] = s.layers;
    d["device"] = s.device;
    d["replicas"] = s.replicas;
    out.append(d);
  }
  return out;
}

std::string repr(const Plan& p) {
  return fmt::format(
      "<pipetwin.Plan {} on {}: schedule {}, {} stages on K={} devices x dp {}, batch {} = M={} "
      "x micro-batch {}>",
      p.model, p.cluster.name, p.schedule, p.num_stages(), p.devices_per_replica(), p.dp,
      p.batch_size, p.chunks, p.micro_batch_size());
}

using PlanClass = py::class_<PlanObject>;

// The plan's fields, read-only.
void bind_plan_fields(PlanClass& c) {
  c.def_property_readonly("model", [](const PlanObject& p) { return p.plan.model; })
      .def_property_readonly("cluster", [](const PlanObject& p) { return p.plan.cluster.name; })
      .def_property_readonly("device",
                             [](const PlanObject& p) { return p.plan.cluster.device.name; })
      .def_property_readonly("schedule", [](const PlanObject& p) { return p.plan.schedule; })
      .def_property_readonly("partitioner", [](const PlanObject& p) { return p.plan.partitioner; })
      .def_property_readonly("batch", [](const PlanObject& p) { return p.plan.batch_size; })
      .def_property_readonly("chunks", [](const PlanObject& p) { return p.plan.chunks; })
      .def_property_readonly("dp", [](const PlanObject& p) { return p.plan.dp; })
      .def_property_readonly("micro_batch",
                             [](const PlanObject& p) { return p.plan.micro_batch_size(); })
      .def_property_readonly("num_stages", [](const PlanObject& p) { return p.plan.num_stages(); })
      .def_property_readonly("devices",
                             [](const PlanObject& p) { return p.plan.devices_per_replica(); })
      .def_property_readonly("checkpoint",
                             [](const PlanObject& p) { return checkpoint_name(p.plan.checkpoint); })
      .def_property_readonly("frozen", [](const PlanObject& p) { return p.plan.frozen_layers; })
      .def_property_readonly("iterations", [](const PlanObject& p) { return p.plan.iterations; })
      .def_property_readonly("dtype", [](const PlanObject& p) { return p.plan.profile.dtype; })
      .def_property_readonly("stages", [](const PlanObject& p) { return stages_of(p.plan); })
      .def_property_readonly("memory_note", [](const PlanObject& p) { return p.memory_note; })
      .def_property_readonly("_search_rows",
                             [](const PlanObject& p) { return to_python(p.search); })
      .def("_stage_rows", &stage_rows);
}

// Files, JSON, equality, pickling.
void bind_plan_methods(PlanClass& c) {
  c.def(
       "save",
       [](const PlanObject& p, py::handle path) { save_plan(p.plan, path_text(path, "path")); },
       py::arg("path"), "Writes the plan JSON the CLI writes (-o), through a temp file.")
      .def(
          "to_json", [](const PlanObject& p) { return dump_json(plan_to_json(p.plan)); },
          "The plan JSON the CLI writes, as text.")
      .def(
          "to_dict", [](const PlanObject& p) { return to_python(plan_to_json(p.plan)); },
          "The plan JSON as a dict.")
      .def_static(
          "load", [](py::handle path) { return PlanObject(load_plan(path_text(path, "path"))); },
          py::arg("path"), "Reads a plan JSON file (`pipetwin plan -o`).")
      .def_static(
          "from_json",
          [](py::handle doc) {
            if (py::isinstance<py::str>(doc))
              return plan_from_text(doc.cast<std::string>(), "plan");
            const Json j = from_python(doc, "plan");
            return PlanObject(plan_from_json(JsonView(j, "plan")));
          },
          py::arg("doc"), "A plan from its JSON, as text or as a dict.")
      .def(
          "__eq__",
          [](const PlanObject& a, const PlanObject& b) {
            return plan_to_json(a.plan) == plan_to_json(b.plan);
          },
          py::is_operator())
      .def("__repr__", [](const PlanObject& p) { return repr(p.plan); })
      .def(
          py::pickle([](const PlanObject& p) { return dump_json(plan_to_json(p.plan)); },
                     [](const std::string& text) { return plan_from_text(text, "pickled plan"); }));
}

void bind_plan_class(py::module_& m) {
  PlanClass c(m, "Plan",
              "A plan: `pipetwin plan`'s output, which simulate() takes (core/plan.hpp)");
  bind_plan_fields(c);
  bind_plan_methods(c);
}

}  // namespace

void bind_plan(py::module_& m) {
  bind_plan_class(m);
  m.def("_plan", &plan_verb);
}

}  // namespace pipetwin::python
