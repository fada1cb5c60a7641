// `pipetwin simulate`: predict a plan's timeline and metrics with the discrete-event simulator.
#include <cstdio>

#include "cli/commands.hpp"
#include "core/schedule/schedule.hpp"

namespace pipetwin::cli {

namespace {

struct SimulateArgs {
  std::string plan, schedule_file, timeline, metrics;
  int iterations = 0;
  bool quiet = false;
};

void run_simulate(const SimulateArgs& a) {
  const Plan plan = load_plan(a.plan);
  const PlanContext ctx(plan, a.iterations);
  sim::SimResult r;
  if (!a.schedule_file.empty()) {
    const Json doc = load_json_file(a.schedule_file);
    r = sim::simulate_plan(ctx, schedule_from_json(JsonView(doc, a.schedule_file)), a.schedule_file);
  } else {
    r = sim::simulate_plan(ctx);
  }
  if (!a.timeline.empty()) save_timeline(r.timeline, a.timeline);
  if (!a.metrics.empty()) save_metrics(r.metrics, a.metrics);
  if (!a.quiet) std::fputs(metrics_summary(ctx, r.metrics).c_str(), stdout);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict a plan's timeline and metrics");
  cmd->add_option("--plan", args->plan, "plan JSON")->required();
  cmd->add_option("--iterations", args->iterations, "mini-batches to simulate (default: the plan's)");
  cmd->add_option("--schedule-file", args->schedule_file,
                  "simulate this schedule JSON instead of the plan's generated one");
  cmd->add_option("--timeline", args->timeline, "write the Chrome-trace timeline here");
  cmd->add_option("--metrics", args->metrics, "write the metrics JSON here");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace pipetwin::cli
