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
#include "sim/elastic_options.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "sim/simulate_options.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::cli {

namespace {

// --elastic: the run to replay and what to write.
struct ElasticArgs {
  bool on = false;
  sim::ElasticOptions options;
};

struct SimulateArgs {
  sim::SimulateOptions options;
  bool quiet = false;
  ElasticArgs elastic;
};

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
  const sim::ElasticOptions& a = s.elastic.options;
  const sim::ElasticReport r = sim::simulate_elastic(sim::elastic_config(a), a.breakdown);
  a.write_outputs(r);
  if (!s.quiet) std::fputs(elastic_summary(r).c_str(), stdout);
}

void add_elastic_options(CLI::App* cmd, ElasticArgs& args) {
  CLI::Option* elastic = cmd->add_flag("--elastic", args.on,
                                       "replay a PipeTransformer elastic training run (no --plan)");
  // Every other option here but --profile only means something with --elastic.
  for (const auto& spec : sim::elastic_option_specs()) {
    CLI::Option* option = add_option_spec(cmd, &args.options, spec, spec.help);
    if (sim::needs_elastic(spec)) option->needs(elastic);
  }
}

void run_simulate(const SimulateArgs& a) {
  const sim::SimulateOptions& o = a.options;
  if (a.elastic.on && !o.plan.empty()) {
    throw InputError("simulate: --plan and --elastic exclude each other");
  }
  if (o.max_actions >= 0) set_action_limit(o.max_actions);
  if (a.elastic.on) return run_elastic(a);
  if (o.plan.empty()) throw InputError("simulate: --plan is required (or --elastic)");
  Plan plan = o.with_framework(load_plan(o.plan));
  const std::string& profile = a.elastic.options.profile;
  if (!profile.empty()) plan = sim::reprice(std::move(plan), load_profile(profile), profile);
  const PlanContext ctx(plan, o.iterations);
  const sim::SimResult r = o.run(ctx, o.plan);
  if (!a.quiet) std::fputs(metrics_summary(ctx, r.metrics).c_str(), stdout);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict a plan's timeline and metrics");
  for (const auto& spec : sim::simulate_option_specs())
    add_option_spec(cmd, &args->options, spec, spec.help);
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  add_elastic_options(cmd, args->elastic);
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace pipetwin::cli
