// `pipetwin plan`: partition a model onto a cluster and write a Plan.
//
//   pipetwin plan --model M [--cluster C] -K 4 [--schedule zbv] [--virtual-stages 2] -o plan.json
//   pipetwin plan --model M -K 8 -B 64 --schedule auto [--schedules 1f1b,zb-h1,zbv] -o plan.json
//
// -K is the pipeline length in devices; with --virtual-stages v (default: the schedule's, 2 for
// zbv and dualpipev) the model is cut into v x K stages placed as the schedule's layout needs
// (sim/planner.hpp). --schedule auto plans and simulates every candidate schedule
// (studies/sweep/evaluate.hpp search_schedules), prints one line per schedule — its iteration time
// and peak memory, or why it lost — and writes the fastest that fits.
#include <algorithm>
#include <cstdio>
#include <functional>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/table.hpp"
#include "studies/sweep/evaluate.hpp"

namespace pipetwin::cli {

namespace {

struct PlanArgs {
  PlanFlags flags = [] {
    PlanFlags f;
    f.schedule_auto = true;
    return f;
  }();
  std::vector<std::string> schedules;  // --schedule auto's candidates
  bool allow_oom = false, quiet = false;
  std::string output;
};

// One line per schedule tried: v, M, iteration time, peak memory and the verdict.
void print_search(const sim::ScheduleSearch& search, const sim::PlanRequest& r) {
  std::printf("schedule auto: %zu candidates on K=%d devices x dp %d, batch %d, M %s\n",
              search.trials.size(), r.stages, r.dp, r.batch_size,
              r.chunks > 0 ? std::to_string(r.chunks).c_str() : "auto");
  Table t({"schedule", "v", "M", "iteration", "peak memory", "outcome"});
  // Names padded to the column's width: "1f1b" would be right-aligned as a number.
  size_t width = std::string("schedule").size();
  for (const auto& trial : search.trials) width = std::max(width, trial.candidate.schedule.size());
  for (const auto& trial : search.trials) {
    const auto& e = trial.evaluation;
    const bool ran = e.ok() && e.simulated;
    t.add({fmt::format("{:<{}}", trial.candidate.schedule, width),
           std::to_string(trial.candidate.virtual_stages),
           ran ? std::to_string(e.plan.chunks) : "-", ran ? fmt_seconds(e.iteration_time_s) : "-",
           ran ? fmt_bytes(e.peak_memory_max_bytes) : "-", trial.verdict});
  }
  std::fputs(t.render().c_str(), stdout);
}

void run_plan(const PlanArgs& a) {
  std::function<void(const sim::ScheduleSearch&, const sim::PlanRequest&)> on_search;
  if (!a.quiet) on_search = print_search;
  // The memory note: when the fastest partition would not have fitted (sim/planner.hpp).
  const sim::PlannedRequest planned =
      sim::plan_with_options(a.flags, a.schedules, a.allow_oom, on_search);
  save_plan(planned.plan, a.output);
  if (!a.quiet) {
    const PlanContext ctx(planned.plan, 0);
    std::fputs(plan_summary(ctx).c_str(), stdout);
    if (!planned.memory_note.empty()) std::printf("%s\n", planned.memory_note.c_str());
    std::printf("wrote %s\n", a.output.c_str());
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Partition a model onto a cluster and write a plan");
  add_plan_flags(cmd, &args->flags, all_plan_flags());
  cmd->add_option("--schedules", args->schedules,
                  "--schedule auto's candidates (default: gpipe, 1f1b, interleaved-1f1b, zb-h1, "
                  "zb-h2, zbv, dualpipev)")
      ->delimiter(',');
  cmd->add_flag("--allow-oom", args->allow_oom, "write the plan even if it does not fit in memory");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  cmd->add_option("-o,--output", args->output, "plan JSON to write")->required();
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace pipetwin::cli
