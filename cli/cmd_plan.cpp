// `pipetwin plan`: partition a model onto a cluster and write a Plan.
//
//   pipetwin plan --model M [--cluster C] -K 4 [--schedule zbv] [--virtual-stages 2] -o plan.json
//   pipetwin plan --model M -K 8 -B 64 --schedule auto [--schedules 1f1b,zb-h1,zbv] -o plan.json
//
// -K is the pipeline length in devices; with --virtual-stages v (default: the schedule's, 2 for
// zbv and dualpipev) the model is cut into v x K stages placed as the schedule's layout needs
// (sim/planner.hpp). --schedule auto plans and simulates every candidate schedule
// (studies/sweep/evaluate.hpp search_schedules), prints one line per schedule — its iteration time and
// peak memory, or why it lost — and writes the fastest that fits.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"
#include "studies/sweep/evaluate.hpp"

namespace pipetwin::cli {

namespace {

struct PlanArgs {
  std::string model, profile, cluster = "local-cpu-2", catalog, schedule = "gpipe",
                              partitioner = "uniform", chunks = "auto", checkpoint_mode, output;
  std::vector<std::string> schedules;  // --schedule auto's candidates
  int stages = 2, batch = 8, dp = 1, frozen = 0, iterations = 0;
  int virtual_stages = -1;  // -1: not given (the schedule's default)
  bool checkpoint = false, allow_oom = false, quiet = false;
  ResolveOptions precision;
};

std::vector<std::string> known_schedules() {
  std::vector<std::string> names;
  for (const auto& info : schedule_catalog()) names.push_back(info.name);
  return names;
}

sim::PlanRequest make_request(const PlanArgs& a, const Catalog& catalog) {
  sim::PlanRequest r;
  r.cluster = load_cluster(a.cluster, catalog);
  r.model = a.model;
  r.profile = resolve_profile(a.model, a.profile, r.cluster.device, a.precision);
  if (r.model.empty()) r.model = r.profile.model;
  r.catalog = &catalog;
  r.stages = a.stages;
  r.schedule = a.schedule;
  if (a.virtual_stages != -1 && a.virtual_stages < 1) {
    throw InputError(fmt::format("--virtual-stages must be positive ({} < 1)", a.virtual_stages));
  }
  r.virtual_stages = std::max(a.virtual_stages, 0);
  r.batch_size = a.batch;
  r.partitioner = a.partitioner;
  r.dp = a.dp;
  r.frozen_layers = a.frozen;
  r.iterations = a.iterations;
  r.allow_oom = a.allow_oom;
  r.chunks = parse_count_or_auto(a.chunks, "--chunks");
  r.checkpoint = a.checkpoint ? Checkpoint::kExceptLast : Checkpoint::kNone;
  if (!a.checkpoint_mode.empty() && !parse_checkpoint(a.checkpoint_mode, r.checkpoint)) {
    throw InputError(fmt::format(
        "--checkpoint-mode: expected none, except_last or always, got \"{}\"", a.checkpoint_mode));
  }
  return r;
}

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
  check_precision_options(a.precision);
  if (!a.schedules.empty() && a.schedule != "auto") {
    throw InputError(fmt::format("--schedules {} needs --schedule auto (--schedule {} given)",
                                 fmt::join(a.schedules, ","), a.schedule));
  }
  if (a.schedule != "auto") schedule_info(a.schedule);
  const Catalog catalog = load_catalog(a.catalog);
  const sim::PlanRequest r = make_request(a, catalog);
  std::string memory_note;  // when the fastest partition would not have fitted (sim/planner.hpp)
  const Plan plan =
      a.schedule == "auto" ? plan_auto(a, r, memory_note) : sim::make_plan(r, &memory_note);
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
  cmd->add_option("--model", args->model, "model name: zoo name or uniform:layers=L,fwd_ms=f,...");
  cmd->add_option("--profile", args->profile, "profile JSON (instead of a shipped one)");
  cmd->add_option("--cluster", args->cluster, "cluster file or name in hardware/clusters")
      ->capture_default_str();
  cmd->add_option("--catalog", args->catalog, "hardware catalog folder (default: hardware/)");
  add_precision_options(cmd, &args->precision);
  cmd->add_option("-K,--stages", args->stages, "pipeline length K in devices")
      ->capture_default_str();
  cmd->add_option("--schedule", args->schedule,
                  fmt::format("{}, or auto: the fastest synchronous schedule that fits",
                              fmt::join(known_schedules(), ", ")))
      ->capture_default_str();
  cmd->add_option("--schedules", args->schedules,
                  "--schedule auto's candidates (default: gpipe, 1f1b, interleaved-1f1b, zb-h1, "
                  "zb-h2, zbv, dualpipev)")
      ->delimiter(',');
  cmd->add_option("--virtual-stages", args->virtual_stages,
                  "model chunks per device: v x K stages in the schedule's layout (default: 2 for "
                  "zbv and dualpipev, else 1; interleaved-1f1b takes any v)");
  cmd->add_option("-B,--batch", args->batch, "global batch size (samples per optimizer step)")
      ->capture_default_str();
  cmd->add_option("-M,--chunks", args->chunks, "micro-batches per mini-batch, or auto")
      ->capture_default_str();
  cmd->add_option("--partitioner", args->partitioner,
                  fmt::format("{}", fmt::join(partitioner_names(), ", ")))
      ->capture_default_str();
  cmd->add_option("--dp", args->dp, "data-parallel width (pipeline replicas)")
      ->capture_default_str();
  cmd->add_flag("--checkpoint", args->checkpoint, "checkpoint all micro-batches but the last");
  cmd->add_option("--checkpoint-mode", args->checkpoint_mode, "none, except_last or always");
  cmd->add_option("--frozen", args->frozen, "number of leading frozen layers")
      ->capture_default_str();
  cmd->add_option("--iterations", args->iterations, "default iterations for simulate/run");
  cmd->add_flag("--allow-oom", args->allow_oom, "write the plan even if it does not fit in memory");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  cmd->add_option("-o,--output", args->output, "plan JSON to write")->required();
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace pipetwin::cli
