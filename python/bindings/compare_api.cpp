#include "python/bindings/compare_api.hpp"

#include <optional>

#include <fmt/format.h>

#include "report/compare.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "python/bindings/convert.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_api.hpp"
#include "python/bindings/timeline_api.hpp"

namespace pipetwin::python {

namespace {

// One of compare()'s inputs, read: a timeline, metrics, or (a Simulation) either.
struct Input {
  std::string origin;             // the file, or the argument ("measured[1]")
  std::optional<bool> timeline;   // unset: a Simulation, which is both
  std::optional<Timeline> given;  // a Timeline object, or a Simulation's timeline
  Json doc;                       // a file's or a dict's document
};

bool is_timeline(const Json& doc) {
  return doc.is_object() && doc.contains("traceEvents");
}

// A Simulation: simulate()'s dict of metrics carrying its Timeline as `_timeline`.
const TimelineObject* simulation_timeline(py::handle value) {
  if (!py::isinstance<py::dict>(value) || !py::hasattr(value, "_timeline")) return nullptr;
  const py::object t = value.attr("_timeline");
  return py::isinstance<TimelineObject>(t) ? &t.cast<const TimelineObject&>() : nullptr;
}

Input read_input(py::handle value, const std::string& what) {
  Input in;
  in.origin = what;
  if (py::isinstance<TimelineObject>(value)) {
    in.timeline = true;
    in.given = value.cast<const TimelineObject&>().timeline;
    return in;
  }
  if (const TimelineObject* t = simulation_timeline(value)) {
    in.given = t->timeline;
    in.doc = from_python(value, what);  // its metrics
    return in;
  }
  Document d = document_of(value, what);
  in.origin = d.origin;
  in.doc = std::move(d.json);
  in.timeline = is_timeline(in.doc);
  return in;
}

std::vector<Input> read_inputs(py::handle value, const std::string& what) {
  std::vector<Input> out;
  if (value.is_none()) return out;
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    size_t i = 0;
    for (const auto item : value.cast<py::sequence>()) {
      out.push_back(read_input(item, fmt::format("{}[{}]", what, i++)));
    }
    return out;
  }
  out.push_back(read_input(value, what));
  return out;
}

void check_kind(const Input& in, bool timelines) {
  if (in.timeline && *in.timeline != timelines) {
    throw InputError("compare: give timelines only or metrics files only, not one of each (" +
                     in.origin + ")");
  }
}

Timeline timeline_of(const Input& in) {
  return in.given ? *in.given : timeline_from_chrome_trace(JsonView(in.doc, in.origin));
}

Metrics metrics_of(const Input& in) {
  return metrics_from_json(JsonView(in.doc, in.origin));
}

py::list rows(const std::vector<CompareRow>& list) {
  py::list out;
  for (const auto& r : list) {
    py::dict d;
    d["quantity"] = r.quantity;
    d["predicted"] = r.predicted;
    d["measured"] = r.measured;
    d["error"] = r.error();
    d["unit"] = r.unit;
    out.append(d);
  }
  return out;
}

py::dict spread(const RunSpread& s) {
  py::dict d;
  d["runs"] = s.runs;
  d["low_s"] = s.low_s;
  d["median_s"] = s.median_s;
  d["high_s"] = s.high_s;
  d["half_width"] = s.half_width();
  return d;
}

py::dict result(const Comparison& c) {
  py::dict out;
  out["summary"] = rows(c.summary);
  out["iterations"] = rows(c.iterations);
  out["actions"] = rows(c.actions);
  out["median_abs_iteration_error"] = c.median_abs_iteration_error;
  out["worst_abs_iteration_error"] = c.worst_abs_iteration_error;
  out["worst_iteration"] = c.worst_iteration;
  out["runs"] = spread(c.spread);
  out["predictions"] = spread(c.predictions);
  out["verdict"] = noise_verdict(c).text;
  out["text"] = render_comparison(c);
  return out;
}

// The kind every input takes: the first input's that has one (a timeline when none has).
bool choose_kind(const Input& p, const std::vector<Input>& measured,
                 const std::vector<Input>& also) {
  if (p.timeline) return *p.timeline;
  for (const auto* list : {&measured, &also}) {
    for (const auto& in : *list) {
      if (in.timeline) return *in.timeline;
    }
  }
  return true;
}

double plan_samples(py::handle plan) {
  if (plan.is_none()) return 1;
  if (py::isinstance<PlanObject>(plan)) return plan.cast<const PlanObject&>().plan.batch_size;
  return load_plan(path_text(plan, "compare(): plan")).batch_size;
}

// `pipetwin compare` (report/compare.hpp compare_runs) over inputs already read.
// `timelines`: the kind every input takes; `samples`: per step (the plan's batch, for timelines).
Comparison compare(const Input& p, const std::vector<Input>& runs, const std::vector<Input>& also,
                   bool timelines, double samples, int skip) {
  for (const auto* list : {&runs, &also}) {
    for (const auto& in : *list) check_kind(in, timelines);
  }
  if (timelines) {
    const Timeline tp = timeline_of(p);
    std::vector<Timeline> measured, others;
    for (const auto& in : runs) measured.push_back(timeline_of(in));
    for (const auto& in : also) others.push_back(timeline_of(in));
    return compare_runs(tp, measured, others, samples, skip);
  }
  std::vector<Metrics> measured, others;
  for (const auto& in : runs) measured.push_back(metrics_of(in));
  const Metrics predicted = metrics_of(p);
  for (const auto& in : also) others.push_back(metrics_of(in));
  return compare_runs(predicted, measured, others, skip);
}

py::dict compare_verb(const py::kwargs& kwargs) {
  Options o("compare", kwargs);
  const py::object predicted = o.object("predicted"), measured = o.object("measured"),
                   also = o.object("also_predicted"), plan = o.object("plan");
  int skip = 1;
  o.integer("skip", skip);
  o.finish();
  if (predicted.is_none()) throw py::type_error("compare() missing argument 'predicted'");
  const Input p = read_input(predicted, "predicted");
  const std::vector<Input> runs = read_inputs(measured, "measured");
  if (runs.empty()) throw py::type_error("compare() missing argument 'measured'");
  const std::vector<Input> others = read_inputs(also, "also_predicted");
  const bool timelines = choose_kind(p, runs, others);
  const double samples = timelines ? plan_samples(plan) : 1;
  return result(compare(p, runs, others, timelines, samples, skip));
}

}  // namespace

void bind_compare(py::module_& m) {
  m.def("_compare", &compare_verb);
}

}  // namespace pipetwin::python
