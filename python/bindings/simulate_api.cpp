#include "python/bindings/simulate_api.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/schedule/limits.hpp"
#include "profiles/model_source.hpp"
#include "python/bindings/convert.hpp"
#include "python/bindings/elastic_api.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_api.hpp"
#include "python/bindings/plan_options.hpp"
#include "python/bindings/timeline_api.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"

namespace pipetwin::python {

namespace {

// simulate()'s keywords for a plan (cli/cmd_simulate.cpp's SimulateArgs).
struct SimulateCall {
  Plan plan;
  std::string origin = "plan";  // the plan file, or "plan" for a Plan object
  std::string schedule_file, timeline, metrics, profile;
  int iterations = 0;
};

// Sets the action limit for one call and puts the previous one back.
class ActionLimit {
 public:
  explicit ActionLimit(double actions) : previous_(action_limit()), set_(actions >= 0) {
    if (set_) set_action_limit(actions);
  }
  ~ActionLimit() {
    if (set_) set_action_limit(previous_);
  }
  ActionLimit(const ActionLimit&) = delete;
  ActionLimit& operator=(const ActionLimit&) = delete;

 private:
  double previous_;
  bool set_;
};

// The plan with its layers priced by the profile at `path`: the same model, measured again (the
// CLI's `simulate --plan P --profile F`).
Plan repriced(Plan plan, const std::string& path) {
  Profile p = load_profile(path);
  if (p.num_layers() != plan.profile.num_layers() || p.model != plan.profile.model) {
    throw InputError(fmt::format(
        "{}: model: a profile of {} ({} layers), but the plan's profile is of {} ({} layers)", path,
        p.model, p.num_layers(), plan.profile.model, plan.profile.num_layers()));
  }
  const Catalog catalog = load_catalog("");
  plan.compute_scale = sim::resolve_compute_scale(p, plan.cluster, &catalog);
  plan.profile = std::move(p);
  return plan;
}

sim::SimResult run_simulate(SimulateCall& c) {
  if (!c.profile.empty()) c.plan = repriced(std::move(c.plan), c.profile);
  const PlanContext ctx(c.plan, c.iterations);
  try {
    check_action_limit(c.plan.schedule, ctx.shape);  // refuse up front, naming the plan
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", c.origin, e.what()));
  }
  sim::SimResult r;
  if (!c.schedule_file.empty()) {
    const Json doc = load_json_file(c.schedule_file);
    r = sim::simulate_plan(ctx, schedule_from_json(JsonView(doc, c.schedule_file)),
                           c.schedule_file);
  } else {
    r = sim::simulate_plan(ctx);
  }
  if (!c.timeline.empty()) save_timeline(r.timeline, c.timeline);
  if (!c.metrics.empty()) save_metrics(r.metrics, c.metrics);
  return r;
}

// The plan argument: a Plan, or the path of a plan JSON.
void take_plan(py::handle value, SimulateCall& c) {
  if (py::isinstance<PlanObject>(value)) {
    c.plan = value.cast<const PlanObject&>().plan;
    return;
  }
  c.origin = path_text(value, "simulate(): plan");
  c.plan = load_plan(c.origin);
}

py::dict simulate_plan_call(const py::object& plan, Options& o) {
  SimulateCall c;
  o.integer("iterations", c.iterations);
  o.path("schedule_file", c.schedule_file);
  o.path("timeline", c.timeline);
  o.path("metrics", c.metrics);
  o.path("profile", c.profile);
  o.finish();
  take_plan(plan, c);
  sim::SimResult r;
  {
    py::gil_scoped_release release;
    r = run_simulate(c);
  }
  py::dict out;
  out["metrics"] = to_python(metrics_to_json(r.metrics));
  out["timeline"] = TimelineObject{std::move(r.timeline)};
  return out;
}

py::dict simulate_verb(const py::kwargs& kwargs) {
  Options o("simulate", kwargs);
  bool elastic = false;
  double max_actions = -1;  // < 0: the default limit
  o.flag("elastic", elastic);
  o.real("max_actions", max_actions);
  const py::object plan = o.object("plan");
  if (elastic && !plan.is_none()) {
    throw InputError("simulate: --plan and --elastic exclude each other");
  }
  const ActionLimit limit(max_actions);
  if (elastic) return simulate_elastic_call(o);
  refuse_elastic_options(o);
  if (plan.is_none()) throw InputError("simulate: --plan is required (or --elastic)");
  return simulate_plan_call(plan, o);
}

}  // namespace

void bind_simulate(py::module_& m) {
  m.def("_simulate", &simulate_verb);
}

}  // namespace pipetwin::python
