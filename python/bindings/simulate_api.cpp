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
#include "sim/simulate_options.hpp"

namespace pipetwin::python {

namespace {

// simulate()'s keywords for a plan (sim/simulate_options.hpp, and --profile), and the plan.
struct SimulateCall {
  Plan plan;
  std::string origin = "plan";  // the plan file, or "plan" for a Plan object
  sim::SimulateOptions options;
  std::string profile;
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

sim::SimResult run_simulate(SimulateCall& c) {
  if (!c.profile.empty())
    c.plan = sim::reprice(std::move(c.plan), load_profile(c.profile), c.profile);
  c.plan = c.options.with_framework(std::move(c.plan));
  return c.options.run(PlanContext(c.plan, c.options.iterations), c.origin);
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
  using S = sim::SimulateOption;  // --plan is the plan argument, --max-actions the verb's
  for (S option : {S::kIterations, S::kScheduleFile, S::kTimeline, S::kMetrics, S::kFramework})
    bind_option_spec(o, c.options, sim::simulate_option_spec(option));
  o.path("profile", c.profile);
  o.finish();
  take_plan(plan, c);
  sim::SimResult r = without_gil([&] { return run_simulate(c); });
  py::dict out;
  out["metrics"] = to_python(metrics_to_json(r.metrics));
  out["timeline"] = TimelineObject{std::move(r.timeline)};
  return out;
}

py::dict simulate_verb(const py::kwargs& kwargs) {
  Options o("simulate", kwargs);
  bool elastic = false;
  sim::SimulateOptions limits;  // its max_actions: < 0, the default limit
  o.flag("elastic", elastic);
  bind_option_spec(o, limits, sim::simulate_option_spec(sim::SimulateOption::kMaxActions));
  const py::object plan = o.object("plan");
  if (elastic && !plan.is_none()) {
    throw InputError("simulate: --plan and --elastic exclude each other");
  }
  const ActionLimit limit(limits.max_actions);
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
