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

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"
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

// "--schedule auto: no schedule fits ...": the leanest that ran, or the first reason.
std::string no_schedule_line(const sim::ScheduleSearch& search) {
  const sim::ScheduleTrial* leanest = nullptr;
  std::vector<std::string> tried;
  for (const auto& t : search.trials) {
    tried.push_back(t.candidate.label());
    const auto& e = t.evaluation;
    if (!e.ok() || !e.simulated) continue;
    if (!leanest || e.over_bytes < leanest->evaluation.over_bytes) leanest = &t;
  }
  if (leanest == nullptr) {
    return fmt::format("--schedule auto: no schedule can run the request (tried {}); {}: {}",
                       fmt::join(tried, ", "), search.trials.front().candidate.label(),
                       search.trials.front().evaluation.error);
  }
  const auto& e = leanest->evaluation;
  return fmt::format(
      "--schedule auto: no schedule fits (tried {}); the leanest, {}, needs {:.2f} GiB of "
      "{:.2f} GiB on {}; try more stages, checkpointing, or a smaller micro-batch",
      fmt::join(tried, ", "), leanest->candidate.label(), (e.capacity_bytes + e.over_bytes) / kGiB,
      e.capacity_bytes / kGiB, e.oom_device);
}

// --schedule auto: the fastest schedule that fits; its plan, and make_plan's memory note.
Plan plan_auto(const PlanArgs& a, const sim::PlanRequest& r, std::string& memory_note) {
  const auto candidates =
      sim::schedule_candidates(a.schedules, r.stages, r.profile.num_layers(), r.virtual_stages);
  const sim::ScheduleSearch search = sim::search_schedules(r, candidates);
  if (!a.quiet) print_search(search, r);
  if (search.chosen < 0) throw InputError(no_schedule_line(search));
  const auto& winner = search.trials[static_cast<size_t>(search.chosen)];
  try {
    return sim::make_plan(search.request, &memory_note);  // the same plan, with its note
  } catch (const InputError&) {
    memory_note.clear();
    return winner.evaluation.plan;
  }
}

void run_plan(const PlanArgs& a) {
  const PlanFlags& f = a.flags;
  f.check_precision();
  if (!a.schedules.empty() && f.schedule != "auto") {
    throw InputError(fmt::format("--schedules {} needs --schedule auto (--schedule {} given)",
                                 fmt::join(a.schedules, ","), f.schedule));
  }
  if (f.schedule != "auto") schedule_info(f.schedule);
  const Catalog catalog = load_catalog(f.catalog);
  sim::PlanRequest r = f.request(catalog);
  r.allow_oom = a.allow_oom;
  std::string memory_note;  // when the fastest partition would not have fitted (sim/planner.hpp)
  const Plan plan =
      f.schedule == "auto" ? plan_auto(a, r, memory_note) : sim::make_plan(r, &memory_note);
  save_plan(plan, a.output);
  if (!a.quiet) {
    const PlanContext ctx(plan, 0);
    std::fputs(plan_summary(ctx).c_str(), stdout);
    if (!memory_note.empty()) std::printf("%s\n", memory_note.c_str());
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
