// The options of `pipetwin simulate --elastic` (and the Python API's simulate(elastic=True)),
// declared once with the CLI's defaults: the run to replay (--model, --profile, --cluster, -K, -B,
// --epochs, --samples, the freeze trace or alpha, AutoPipe/AutoDP/AutoCache switches, the cache's
// memory and bandwidths, the transition overheads, the seed) and what to write (--log,
// --freeze-trace-out, --report). config() turns them into the ElasticConfig sim/elastic_sim.hpp
// replays, checking them in the order the CLI always has; write_outputs() writes the files.
//
// The options are a table (sim/option_table.hpp), elastic_option_specs(), which the CLI binds to
// its flags and the Python API to its keywords; every one but --profile needs --elastic (with a
// plan, --profile reprices it).
//
// The model's profile is resolved above sim/ (profiles/model_source.hpp), so config() takes the
// cluster and the profile already loaded; studies/plan_options.hpp's elastic_config() loads them.
//
// Thread-safety: a value; write_outputs() writes files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "sim/elastic_sim.hpp"
#include "sim/option_table.hpp"

namespace pipetwin::sim {

struct ElasticOptions {
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

  // The run on `cluster` (loaded from `catalog`) with `profile` (resolved for its device); an
  // InputError naming the flag for a bad value (-B, --checkpoint-mode, --freeze-unit, the trace
  // and overheads files).
  ElasticConfig config(Cluster cluster, Profile profile, const Catalog& catalog) const;
  // --log (the epoch log, .csv or .json), --freeze-trace-out and --report of a replayed run.
  void write_outputs(const ElasticReport& report) const;
};

// Every option, in the order --help lists them.
const std::vector<OptionSpec<ElasticOptions>>& elastic_option_specs();
// Whether `spec` means something only with --elastic: all but --profile.
bool needs_elastic(const OptionSpec<ElasticOptions>& spec);

}  // namespace pipetwin::sim
