// Framework runs: the measured training runs `pipetwin calibrate --runs` fits a framework's
// overheads to (studies/framework_fit.hpp), read from a CSV file.
//
// Columns (a header row names them, in any order; every one but the optional ones is required):
//   model          anything `plan --model` takes (a zoo name, uniform:..., a model spec)
//   cluster        anything `plan --cluster` takes: a name under hardware/clusters or a file path
//   stages         K, the pipeline length in devices
//   dp             data-parallel width
//   batch          global batch (samples per optimizer step)
//   micro_batch    samples per micro-batch: M = batch / (dp x micro_batch)
//   schedule       a schedule name (gpipe, 1f1b, ...)
//   dtype          float32, bfloat16, float16 (empty: the profile's)
//   optimizer      sgd, momentum, adam (empty: the profile's)
//   measured_ms    the measured time of one iteration (one optimizer step), in milliseconds
//   virtual_stages optional: model chunks per device (empty or absent: the schedule's)
//   partitioner    optional: how the run's layers were cut (empty or absent: uniform)
//   profile        optional: the profile file the run was planned from (`plan --profile`; empty
//                  or absent: the model's shipped or analytic one)
// Blank lines are skipped; a last line without its line break is read.
//
// Every error is one line "FILE:ROW:COLUMN: NAME: what is wrong" (ROW the line in the file,
// 1-based, the header being line 1; COLUMN the 1-based field), or "FILE:ROW:" for a row with the
// wrong number of fields, or "FILE:1:" for a header missing a column.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipetwin::sim {

struct FrameworkRun {
  std::string model, cluster;
  int stages = 1, dp = 1, batch = 1, micro_batch = 1;
  int virtual_stages = 0;  // 0: the schedule's
  std::string schedule, dtype, optimizer, partitioner = "uniform", profile;
  double measured_s = 0;  // one iteration
  std::string origin;     // "FILE:ROW", for messages

  int chunks() const { return batch / (dp * micro_batch); }  // M
};

// The runs of a CSV text; `origin` names it in errors (a path).
std::vector<FrameworkRun> parse_framework_runs(std::string_view text, const std::string& origin);
// The runs of the CSV file at `path`; InputError naming it when it cannot be read or has no run.
// A relative profile or cluster path that names no file from here but one beside `path` is
// read from beside `path`.
std::vector<FrameworkRun> read_framework_runs(const std::string& path);

// The header and one line per run, in the columns above (for scripts and tests that write runs).
std::string framework_runs_header();
std::string framework_run_line(const FrameworkRun& run);

}  // namespace pipetwin::sim
