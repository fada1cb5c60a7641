// `pipetwin plan`: partition a model onto a cluster and write a Plan.
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/model_source.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"

namespace pipetwin::cli {

namespace {

struct PlanArgs {
  std::string model, profile, cluster = "local-cpu-2", catalog, schedule = "gpipe",
                              partitioner = "uniform", chunks = "auto", checkpoint_mode, output;
  int stages = 2, batch = 8, dp = 1, frozen = 0, iterations = 0;
  bool checkpoint = false, allow_oom = false, quiet = false;
  ResolveOptions precision;
};

void run_plan(const PlanArgs& a) {
  check_precision_options(a.precision);
  const Catalog catalog = load_catalog(a.catalog);
  sim::PlanRequest r;
  r.cluster = load_cluster(a.cluster, catalog);
  r.model = a.model;
  r.profile = resolve_profile(a.model, a.profile, r.cluster.device, a.precision);
  if (r.model.empty()) r.model = r.profile.model;
  r.catalog = &catalog;
  r.stages = a.stages;
  r.schedule = a.schedule;
  schedule_info(r.schedule);
  r.batch_size = a.batch;
  r.partitioner = a.partitioner;
  r.dp = a.dp;
  r.frozen_layers = a.frozen;
  r.iterations = a.iterations;
  r.allow_oom = a.allow_oom;
  if (a.chunks == "auto") {
    r.chunks = 0;
  } else {
    try {
      size_t used = 0;
      r.chunks = std::stoi(a.chunks, &used);
      if (used != a.chunks.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw InputError(
          fmt::format("--chunks: expected a positive integer or auto, got \"{}\"", a.chunks));
    }
    if (r.chunks < 1)
      throw InputError(fmt::format("--chunks must be positive ({} given)", r.chunks));
  }
  r.checkpoint = a.checkpoint ? Checkpoint::kExceptLast : Checkpoint::kNone;
  if (!a.checkpoint_mode.empty() && !parse_checkpoint(a.checkpoint_mode, r.checkpoint)) {
    throw InputError(fmt::format(
        "--checkpoint-mode: expected none, except_last or always, got \"{}\"", a.checkpoint_mode));
  }
  std::string memory_note;  // when the fastest partition would not have fitted (sim/planner.hpp)
  const Plan plan = sim::make_plan(r, &memory_note);
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
  cmd->add_option("-K,--stages", args->stages, "pipeline length K")->capture_default_str();
  cmd->add_option("--schedule", args->schedule,
                  "naive, gpipe, 1f1b, pipedream, ddg, feature-replay, ftpipe-async")
      ->capture_default_str();
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
