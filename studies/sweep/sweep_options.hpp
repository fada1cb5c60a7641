// The options of `pipetwin sweep`, declared once for the command line (cli/cmd_sweep.cpp) and the
// Python API (python/bindings/sweep_api.cpp): the plan options every point starts from
// (studies/plan_options.hpp), the grid (--grid), where the rows go (-o, --shard, --limit, --jobs)
// and the elastic runs' --alpha, --samples and --epochs, each with one entry in
// sweep_option_specs() (sim/option_table.hpp). inputs() and run_options() turn them into what
// studies/sweep/sweep.hpp and runner.hpp take, with the checks both front ends make, in the same
// order and with the same messages.
//
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/option_table.hpp"
#include "studies/plan_options.hpp"
#include "studies/sweep/runner.hpp"
#include "studies/sweep/sweep.hpp"

namespace pipetwin::sim {

// The sweep's own options, in the order --help lists them (the plan options after --grid).
enum class SweepOption : uint8_t {
  kGrid,
  kMicroBatch,
  kAlpha,
  kSamples,
  kEpochs,
  kJobs,
  kShard,
  kLimit,
  kTop,
  kOutput,
};

struct SweepOptions {
  PlanOptions plan;  // every point's values of the fields the grid does not vary
  std::string grid, output, shard;
  int jobs = 0, top = 10, epochs = 1, micro_batch = 0;
  int64_t limit = -1;
  double alpha = -1;
  long samples = 0;

  // The sweep's fixed inputs: --grid and -o given and --jobs not negative (InputErrors naming the
  // flag), then the plan options read as PlanOptions::point_config reads them.
  SweepInputs inputs() const;
  // Where and how the points run: -o, --jobs, --shard (parsed) and --limit; `stop` and
  // `progress` are the caller's.
  RunOptions run_options() const;
};

// One entry per SweepOption, in its order.
const std::vector<OptionSpec<SweepOptions>>& sweep_option_specs();
inline const OptionSpec<SweepOptions>& sweep_option_spec(SweepOption option) {
  return spec_of(sweep_option_specs(), option);
}

}  // namespace pipetwin::sim
