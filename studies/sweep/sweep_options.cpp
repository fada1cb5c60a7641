#include "studies/sweep/sweep_options.hpp"

#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::sim {

SweepInputs SweepOptions::inputs() const {
  if (grid.empty()) throw InputError("--grid is required (e.g. --grid 'stages=1,2,4;chunks=auto')");
  if (output.empty()) throw InputError("-o/--output is required (the sweep CSV)");
  if (jobs < 0) throw InputError(fmt::format("--jobs must not be negative ({} given)", jobs));
  return {.base = plan.point_config(micro_batch, alpha),
          .profile_path = plan.profile,
          .catalog_dir = plan.catalog,
          .iterations = plan.iterations,
          .samples = samples,
          .epochs = epochs,
          .framework = plan.framework.empty() ? Framework{} : load_framework(plan.framework)};
}

RunOptions SweepOptions::run_options() const {
  RunOptions o;
  o.output = output;
  o.jobs = jobs;
  if (!shard.empty()) std::tie(o.shard, o.shards) = parse_shard(shard);
  o.limit = limit;
  return o;
}

const std::vector<OptionSpec<SweepOptions>>& sweep_option_specs() {
  using S = SweepOptions;
  static const std::vector<OptionSpec<SweepOptions>> specs = {
      {"--grid", "field=values;... fields: " + knob_names() + "; values a,b or start:stop:step",
       &S::grid},
      {"--micro-batch",
       "samples per micro-batch: batch = micro-batch x chunks x dp (instead of -B)",
       &S::micro_batch},
      {"--alpha", "freeze rate: every point is also a whole elastic run", &S::alpha},
      {"--samples", "elastic runs (alpha): samples per epoch", &S::samples},
      {"--epochs", "elastic runs (alpha): epochs", &S::epochs, OptionKind::kText, true},
      {"-j,--jobs", "worker threads (default: all cores)", &S::jobs},
      {"--shard", "run shard i of n (0 <= i < n): the points with index % n == i", &S::shard},
      {"--limit", "compute at most this many new points, then stop (resumable)", &S::limit},
      {"--top", "best points to print and write to <output>.best.csv", &S::top, OptionKind::kText,
       true},
      {"-o,--output", "sweep CSV (appended to and resumed if it exists)", &S::output,
       OptionKind::kPath},
  };
  return specs;
}

}  // namespace pipetwin::sim
