#include "sim/simulate_options.hpp"

#include "core/metrics.hpp"
#include "core/timeline.hpp"

namespace pipetwin::sim {

SimResult SimulateOptions::run(const PlanContext& context, const std::string& origin) const {
  SimResult r = simulate_checked(context, origin, schedule_file);
  if (!timeline.empty()) save_timeline(r.timeline, timeline);
  if (!metrics.empty()) save_metrics(r.metrics, metrics);
  return r;
}

Plan SimulateOptions::with_framework(Plan plan) const {
  if (!framework.empty()) plan.framework = load_framework(framework);
  return plan;
}

const std::vector<OptionSpec<SimulateOptions>>& simulate_option_specs() {
  using S = SimulateOptions;
  static const std::vector<OptionSpec<SimulateOptions>> specs = {
      {"--plan", "plan JSON", &S::plan, OptionKind::kPath},
      {"--iterations", "mini-batches to simulate (default: the plan's)", &S::iterations},
      {"--schedule-file", "simulate this schedule JSON instead of the plan's generated one",
       &S::schedule_file, OptionKind::kPath},
      {"--timeline", "write the Chrome-trace timeline here", &S::timeline, OptionKind::kPath},
      {"--metrics", "write the metrics JSON here", &S::metrics, OptionKind::kPath},
      {"--max-actions",
       "refuse schedules estimated above this many actions (default 2e7; 0: no limit)",
       &S::max_actions},
      {"--framework",
       "framework file (pipetwin calibrate --runs) whose overheads and scales replace the "
       "plan's (default: the plan's, none unless plan --framework gave one)",
       &S::framework, OptionKind::kPath},
  };
  return specs;
}

}  // namespace pipetwin::sim
