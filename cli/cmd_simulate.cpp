// `pipetwin simulate`: predict a plan's timeline and metrics with the discrete-event simulator;
// with --elastic, replay a whole PipeTransformer training run (sim/elastic_sim.hpp).
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/schedule/limits.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/model_source.hpp"
#include "sim/elastic_sim.hpp"
#include "sim/planner.hpp"

namespace pipetwin::cli {

namespace {

// --elastic: the run to replay and what to write.
struct ElasticArgs {
  bool on = false, breakdown = false, no_autopipe = false, no_autodp = false, no_autocache = false,
       no_state_transfer = false;
  std::string model, profile, cluster = "pipetransformer-2x8-rtx5000", catalog, freeze_trace,
                              freeze_unit = "epoch", checkpoint = "none", log, report, trace_out,
                              overheads;
  int stages = 0, batch = 0, epochs = 1, freeze_every = 1;
  long samples = 0;
  double alpha = 1.0 / 3, lambda_frozen = 1.0 / 6, cache_memory_gib = -1, host_gbps = 0,
         disk_gbps = 0, transition_scale = 1;
  uint64_t seed = 0;
};

struct SimulateArgs {
  std::string plan, schedule_file, timeline, metrics;
  int iterations = 0;
  double max_actions = -1;  // < 0: the default limit (core/schedule/limits.hpp)
  bool quiet = false;
  ElasticArgs elastic;
};

sim::ElasticConfig elastic_config(const ElasticArgs& a) {
  const Catalog catalog = load_catalog(a.catalog);
  sim::ElasticConfig c;
  c.cluster = load_cluster(a.cluster, catalog);
  c.profile = resolve_profile(a.model, a.profile, c.cluster.device.name);
  c.model = a.model.empty() ? c.profile.model : a.model;
  c.compute_scale = sim::resolve_compute_scale(c.profile, c.cluster, &catalog);
  c.stages = a.stages;
  if (a.batch < 1) throw InputError(fmt::format("--batch must be positive ({} given)", a.batch));
  c.batch = a.batch;
  c.epochs = a.epochs;
  c.samples = a.samples;
  c.checkpoint = parse_checkpoint_mode(a.checkpoint);
  c.lambda_frozen = a.lambda_frozen;
  if (!a.freeze_trace.empty()) c.trace = elastic::load_freeze_trace(a.freeze_trace);
  c.alpha = a.alpha;
  c.unit = elastic::parse_freeze_unit(a.freeze_unit, "--freeze-unit");
  c.interval = a.freeze_every;
  c.autopipe = !a.no_autopipe;
  c.autodp = c.autopipe && !a.no_autodp;
  c.autocache = !a.no_autocache;
  if (a.cache_memory_gib >= 0) c.cache.memory_budget_bytes = a.cache_memory_gib * kGiB;
  c.cache_costs = {a.host_gbps * 1e9, a.disk_gbps * 1e9};
  c.overheads = a.overheads.empty() ? elastic::TransitionOverheads::table4()
                                    : elastic::load_transition_overheads(a.overheads);
  c.overheads = c.overheads.scaled(a.transition_scale);
  c.state_transfer = !a.no_state_transfer;
  c.seed = a.seed;
  return c;
}

std::string elastic_summary(const sim::ElasticReport& r) {
  Table epochs(
      {"epoch", "frozen", "K", "dp", "M", "cache", "steps", "compute", "transition", "samples"});
  for (const auto& e : r.elastic.log.epochs) {
    epochs.add({std::to_string(e.epoch), std::to_string(e.frozen_layers), std::to_string(e.K),
                std::to_string(e.dp), std::to_string(e.chunks), e.cache ? "on" : "off",
                std::to_string(e.steps), fmt_seconds(e.compute_s), fmt_seconds(e.transition_s),
                fmt_rate(e.throughput_samples_per_s)});
  }
  Table runs({"run", "total time", "samples", "speedup"});
  auto add = [&](const sim::ElasticRun& run) {
    runs.add({run.name, fmt_seconds(run.total_s), fmt_rate(run.throughput()),
              fmt::format("{:.2f}x", r.baseline.total_s / run.total_s)});
  };
  add(r.baseline);
  for (const auto& run : r.breakdown) add(run);
  if (r.breakdown.empty()) add(r.elastic);
  return fmt::format("elastic run of {} ({}):\n", r.elastic.log.model, r.elastic.name) +
         epochs.render() + "\n" + runs.render() +
         fmt::format("speedup over Pipe + DDP without freezing: {:.2f}x\n", r.speedup);
}

void run_elastic(const SimulateArgs& s) {
  const ElasticArgs& a = s.elastic;
  const sim::ElasticReport r = sim::simulate_elastic(elastic_config(a), a.breakdown);
  if (!a.log.empty()) elastic::save_epoch_log(r.elastic.log, a.log);
  if (!a.trace_out.empty()) elastic::save_freeze_trace(r.elastic.trace, a.trace_out);
  if (!a.report.empty()) write_file_atomic(a.report, dump_json(sim::elastic_report_to_json(r)));
  if (!s.quiet) std::fputs(elastic_summary(r).c_str(), stdout);
}

void add_elastic_options(CLI::App* cmd, ElasticArgs& a) {
  CLI::Option* elastic =
      cmd->add_flag("--elastic", a.on, "replay a PipeTransformer elastic training run (no --plan)");
  // Every other option here only means something with --elastic.
  auto opt = [&](CLI::Option* o) { o->needs(elastic); };
  opt(cmd->add_option("--model", a.model, "elastic: model name (zoo name or uniform:...)"));
  cmd->add_option(
      "--profile", a.profile,
      "elastic: profile JSON (instead of a shipped one); with --plan: price the plan's "
      "layers with this profile of the same model instead (measured again, e.g. between "
      "the runs, to see how far the machine's speed moved)");
  opt(cmd->add_option("--cluster", a.cluster, "elastic: cluster file or name")
          ->capture_default_str());
  opt(cmd->add_option("--catalog", a.catalog, "elastic: hardware catalog folder"));
  opt(cmd->add_option("-K,--stages", a.stages,
                      "elastic: initial pipeline length (default: a node)"));
  opt(cmd->add_option("-B,--batch", a.batch, "elastic: samples per pipeline replica per step"));
  opt(cmd->add_option("--epochs", a.epochs, "elastic: epochs")->capture_default_str());
  opt(cmd->add_option("--samples", a.samples, "elastic: samples per epoch"));
  opt(cmd->add_option("--freeze-trace", a.freeze_trace, "elastic: replay this freeze trace"));
  opt(cmd->add_option("--alpha", a.alpha, "elastic: freeze rate alpha (without a trace)")
          ->capture_default_str());
  opt(cmd->add_option("--freeze-every", a.freeze_every, "elastic: freeze interval")
          ->capture_default_str());
  opt(cmd->add_option("--freeze-unit", a.freeze_unit, "elastic: epoch or step")
          ->capture_default_str());
  opt(cmd->add_option("--checkpoint-mode", a.checkpoint, "elastic: none, except_last or always"));
  opt(cmd->add_option("--lambda-frozen", a.lambda_frozen, "elastic: frozen layer memory factor")
          ->capture_default_str());
  opt(cmd->add_flag("--no-autopipe", a.no_autopipe, "elastic: freeze only (no re-partitioning)"));
  opt(cmd->add_flag("--no-autodp", a.no_autodp, "elastic: no extra pipeline replicas"));
  opt(cmd->add_flag("--no-autocache", a.no_autocache, "elastic: no activation cache"));
  opt(cmd->add_flag("--breakdown", a.breakdown, "elastic: also run the Figure 9 ablation"));
  opt(cmd->add_option("--cache-memory", a.cache_memory_gib,
                      "elastic: host memory for the cache, GiB"));
  opt(cmd->add_option("--host-bandwidth", a.host_gbps,
                      "elastic: cache reads, GB/s (default: intra-node link)"));
  opt(cmd->add_option("--disk-bandwidth", a.disk_gbps,
                      "elastic: cache spill disk, GB/s (default 2)"));
  opt(cmd->add_option("--transition-overheads", a.overheads,
                      "elastic: CSV of transition overheads (default: Table 4)"));
  opt(cmd->add_option("--transition-scale", a.transition_scale,
                      "elastic: factor on Table 4 overheads"));
  opt(cmd->add_flag("--no-state-transfer", a.no_state_transfer,
                    "elastic: new replicas get state free"));
  opt(cmd->add_option("--seed", a.seed, "elastic: sampler seed"));
  opt(cmd->add_option("--log", a.log, "elastic: write the epoch log (.csv or .json)"));
  opt(cmd->add_option("--freeze-trace-out", a.trace_out,
                      "elastic: write the replayed freeze trace"));
  opt(cmd->add_option("--report", a.report, "elastic: write the report JSON"));
}

// The plan with its layers priced by the profile at `path`: the same model, measured again.
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

void run_simulate(const SimulateArgs& a) {
  if (a.elastic.on && !a.plan.empty()) {
    throw InputError("simulate: --plan and --elastic exclude each other");
  }
  if (a.max_actions >= 0) set_action_limit(a.max_actions);
  if (a.elastic.on) return run_elastic(a);
  if (a.plan.empty()) throw InputError("simulate: --plan is required (or --elastic)");
  Plan plan = load_plan(a.plan);
  if (!a.elastic.profile.empty()) plan = repriced(std::move(plan), a.elastic.profile);
  const PlanContext ctx(plan, a.iterations);
  try {
    check_action_limit(plan.schedule, ctx.shape);  // refuse up front, naming the plan
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", a.plan, e.what()));
  }
  sim::SimResult r;
  if (!a.schedule_file.empty()) {
    const Json doc = load_json_file(a.schedule_file);
    r = sim::simulate_plan(ctx, schedule_from_json(JsonView(doc, a.schedule_file)),
                           a.schedule_file);
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
  cmd->add_option("--plan", args->plan, "plan JSON");
  cmd->add_option("--iterations", args->iterations,
                  "mini-batches to simulate (default: the plan's)");
  cmd->add_option("--schedule-file", args->schedule_file,
                  "simulate this schedule JSON instead of the plan's generated one");
  cmd->add_option("--timeline", args->timeline, "write the Chrome-trace timeline here");
  cmd->add_option("--metrics", args->metrics, "write the metrics JSON here");
  cmd->add_option("--max-actions", args->max_actions,
                  "refuse schedules estimated above this many actions (default 2e7; 0: no limit)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  add_elastic_options(cmd, args->elastic);
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace pipetwin::cli
