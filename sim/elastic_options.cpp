#include "sim/elastic_options.hpp"

#include <utility>

#include <fmt/format.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "sim/planner.hpp"

namespace pipetwin::sim {

ElasticConfig ElasticOptions::config(Cluster target, Profile resolved,
                                     const Catalog& catalog) const {
  ElasticConfig c;
  c.cluster = std::move(target);
  c.profile = std::move(resolved);
  c.model = model.empty() ? c.profile.model : model;
  c.compute_scale = resolve_compute_scale(c.profile, c.cluster, &catalog);
  c.stages = stages;
  if (batch < 1) throw InputError(fmt::format("--batch must be positive ({} given)", batch));
  c.batch = batch;
  c.epochs = epochs;
  c.samples = samples;
  c.checkpoint = parse_checkpoint_mode(checkpoint);
  c.lambda_frozen = lambda_frozen;
  if (!freeze_trace.empty()) c.trace = elastic::load_freeze_trace(freeze_trace);
  c.alpha = alpha;
  c.unit = elastic::parse_freeze_unit(freeze_unit, "--freeze-unit");
  c.interval = freeze_every;
  c.autopipe = !no_autopipe;
  c.autodp = c.autopipe && !no_autodp;
  c.autocache = !no_autocache;
  if (cache_memory_gib >= 0) c.cache.memory_budget_bytes = cache_memory_gib * kGiB;
  c.cache_costs = {host_gbps * 1e9, disk_gbps * 1e9};
  c.overheads = overheads.empty() ? elastic::TransitionOverheads::table4()
                                  : elastic::load_transition_overheads(overheads);
  c.overheads = c.overheads.scaled(transition_scale);
  c.state_transfer = !no_state_transfer;
  c.seed = seed;
  return c;
}

void ElasticOptions::write_outputs(const ElasticReport& r) const {
  if (!log.empty()) elastic::save_epoch_log(r.elastic.log, log);
  if (!trace_out.empty()) elastic::save_freeze_trace(r.elastic.trace, trace_out);
  if (!report.empty()) save_json_file(report, elastic_report_to_json(r));
}

const std::vector<OptionSpec<ElasticOptions>>& elastic_option_specs() {
  using E = ElasticOptions;
  using K = OptionKind;
  static const std::vector<OptionSpec<ElasticOptions>> specs = {
      {"--model", "elastic: model name (zoo name or uniform:...)", &E::model},
      {"--profile",
       "elastic: profile JSON (instead of a shipped one); with --plan: price the plan's layers "
       "with this profile of the same model instead (measured again, e.g. between the runs, to "
       "see how far the machine's speed moved)",
       &E::profile, K::kPath},
      {"--cluster", "elastic: cluster file or name", &E::cluster, K::kText, true},
      {"--catalog", "elastic: hardware catalog folder", &E::catalog, K::kPath},
      {"-K,--stages", "elastic: initial pipeline length (default: a node)", &E::stages},
      {"-B,--batch", "elastic: samples per pipeline replica per step", &E::batch},
      {"--epochs", "elastic: epochs", &E::epochs, K::kText, true},
      {"--samples", "elastic: samples per epoch", &E::samples},
      {"--freeze-trace", "elastic: replay this freeze trace", &E::freeze_trace, K::kPath},
      {"--alpha", "elastic: freeze rate alpha (without a trace)", &E::alpha, K::kText, true},
      {"--freeze-every", "elastic: freeze interval", &E::freeze_every, K::kText, true},
      {"--freeze-unit", "elastic: epoch or step", &E::freeze_unit, K::kText, true},
      {"--checkpoint-mode", "elastic: none, except_last or always", &E::checkpoint},
      {"--lambda-frozen", "elastic: frozen layer memory factor", &E::lambda_frozen, K::kText, true},
      {"--no-autopipe", "elastic: freeze only (no re-partitioning)", &E::no_autopipe},
      {"--no-autodp", "elastic: no extra pipeline replicas", &E::no_autodp},
      {"--no-autocache", "elastic: no activation cache", &E::no_autocache},
      {"--breakdown", "elastic: also run the Figure 9 ablation", &E::breakdown},
      {"--cache-memory", "elastic: host memory for the cache, GiB", &E::cache_memory_gib},
      {"--host-bandwidth", "elastic: cache reads, GB/s (default: intra-node link)", &E::host_gbps},
      {"--disk-bandwidth", "elastic: cache spill disk, GB/s (default 2)", &E::disk_gbps},
      {"--transition-overheads", "elastic: CSV of transition overheads (default: Table 4)",
       &E::overheads, K::kPath},
      {"--transition-scale", "elastic: factor on Table 4 overheads", &E::transition_scale},
      {"--no-state-transfer", "elastic: new replicas get state free", &E::no_state_transfer},
      {"--seed", "elastic: sampler seed", &E::seed},
      {"--log", "elastic: write the epoch log (.csv or .json)", &E::log, K::kPath},
      {"--freeze-trace-out", "elastic: write the replayed freeze trace", &E::trace_out, K::kPath},
      {"--report", "elastic: write the report JSON", &E::report, K::kPath},
  };
  return specs;
}

bool needs_elastic(const OptionSpec<ElasticOptions>& spec) {
  return std::string(spec.names) != "--profile";
}

}  // namespace pipetwin::sim
