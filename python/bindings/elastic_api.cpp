#include "python/bindings/elastic_api.hpp"

#include <fmt/format.h>

#include "cli/plan_flags.hpp"
#include "core/elastic/epoch_log.hpp"
#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "python/bindings/convert.hpp"
#include "python/bindings/plan_options.hpp"
#include "sim/elastic_sim.hpp"
#include "sim/planner.hpp"

namespace pipetwin::python {

namespace {

// The elastic run's keywords, with the CLI's defaults (cli/cmd_simulate.cpp's ElasticArgs).
struct ElasticCall {
  bool breakdown = false, no_autopipe = false, no_autodp = false, no_autocache = false,
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

// Keywords that need elastic=True, as the CLI's flags that need --elastic (--profile does not:
// with a plan it reprices it).
// clang-format off
constexpr const char* kElasticOnly[] = {
    "model", "cluster", "catalog", "stages", "batch", "epochs", "samples", "freeze_trace",
    "alpha", "freeze_every", "freeze_unit", "checkpoint_mode", "lambda_frozen", "no_autopipe",
    "no_autodp", "no_autocache", "breakdown", "cache_memory", "host_bandwidth", "disk_bandwidth",
    "transition_overheads", "transition_scale", "no_state_transfer", "seed", "log",
    "freeze_trace_out", "report"};
// clang-format on

void bind(Options& o, ElasticCall& a) {
  o.text("model", a.model);
  o.path("profile", a.profile);
  o.text("cluster", a.cluster);
  o.path("catalog", a.catalog);
  o.integer("stages", a.stages);
  o.integer("batch", a.batch);
  o.integer("epochs", a.epochs);
  o.integer("samples", a.samples);
  o.path("freeze_trace", a.freeze_trace);
  o.real("alpha", a.alpha);
  o.integer("freeze_every", a.freeze_every);
  o.text("freeze_unit", a.freeze_unit);
  o.text("checkpoint_mode", a.checkpoint);
  o.real("lambda_frozen", a.lambda_frozen);
  o.flag("no_autopipe", a.no_autopipe);
  o.flag("no_autodp", a.no_autodp);
  o.flag("no_autocache", a.no_autocache);
  o.flag("breakdown", a.breakdown);
  o.real("cache_memory", a.cache_memory_gib);
  o.real("host_bandwidth", a.host_gbps);
  o.real("disk_bandwidth", a.disk_gbps);
  o.path("transition_overheads", a.overheads);
  o.real("transition_scale", a.transition_scale);
  o.flag("no_state_transfer", a.no_state_transfer);
  o.integer("seed", a.seed);
  o.path("log", a.log);
  o.path("freeze_trace_out", a.trace_out);
  o.path("report", a.report);
}

// cli/cmd_simulate.cpp's elastic_config: the same fields from the same values.
sim::ElasticConfig elastic_config(const ElasticCall& a) {
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
  c.checkpoint = cli::parse_checkpoint_mode(a.checkpoint);
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

}  // namespace

void refuse_elastic_options(const Options& o) {
  for (const char* name : kElasticOnly) {
    if (!o.has(name)) continue;
    std::string flag = name;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    throw InputError(fmt::format("--{} requires --elastic", flag));
  }
}

py::dict simulate_elastic_call(Options& o) {
  ElasticCall a;
  bind(o, a);
  o.finish();
  sim::ElasticReport r;
  {
    py::gil_scoped_release release;
    r = sim::simulate_elastic(elastic_config(a), a.breakdown);
    if (!a.log.empty()) elastic::save_epoch_log(r.elastic.log, a.log);
    if (!a.trace_out.empty()) elastic::save_freeze_trace(r.elastic.trace, a.trace_out);
    if (!a.report.empty()) write_file_atomic(a.report, dump_json(sim::elastic_report_to_json(r)));
  }
  py::dict out;
  out["report"] = to_python(sim::elastic_report_to_json(r));
  out["epoch_log"] = to_python(elastic::epoch_log_to_json(r.elastic.log));
  out["freeze_trace"] = to_python(elastic::freeze_trace_to_json(r.elastic.trace));
  return out;
}

}  // namespace pipetwin::python
