// The options of `pipetwin simulate --plan` (the Python API's simulate(plan=...)), declared once
// with the CLI's defaults: the plan, the mini-batches to simulate, another schedule to run
// instead, the action limit, where the timeline and the metrics go and the framework whose
// overheads replace the plan's (core/framework.hpp), each with one entry in
// simulate_option_specs() (sim/option_table.hpp), which the CLI binds to its flags and the Python
// API to its keywords. --profile, which reprices the plan (planner.hpp reprice), is the elastic
// table's (sim/elastic_options.hpp): one flag for both uses.
//
// Thread-safety: a value; run() writes files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "sim/option_table.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::sim {

struct SimulateOptions {
  std::string plan, schedule_file, timeline, metrics;
  int iterations = 0;       // 0: the plan's
  double max_actions = -1;  // < 0: the default limit (core/schedule/limits.hpp)
  // A framework file (core/framework.hpp) replacing the plan's framework; "": the plan's.
  std::string framework;

  // `plan` with --framework's terms in place of its own (the plan unchanged without the flag).
  Plan with_framework(Plan plan) const;

  // The plan of `context` simulated as `simulate` does it (simulate_checked: the action limit
  // checked up front, errors naming `origin`; --schedule-file's schedule when given), then
  // --timeline and --metrics written.
  SimResult run(const PlanContext& context, const std::string& origin) const;
};

// The options, in the order --help lists them.
enum class SimulateOption : uint8_t {
  kPlan,
  kIterations,
  kScheduleFile,
  kTimeline,
  kMetrics,
  kMaxActions,
  kFramework,
};

// One entry per SimulateOption, in its order.
const std::vector<OptionSpec<SimulateOptions>>& simulate_option_specs();
inline const OptionSpec<SimulateOptions>& simulate_option_spec(SimulateOption option) {
  return spec_of(simulate_option_specs(), option);
}

}  // namespace pipetwin::sim
