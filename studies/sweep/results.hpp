// Sweep results as files: merging shards and the summary of the best points.
//
//   merge_sweeps   the rows of shard files (runner.hpp, --shard i/n) in grid order. The shards
//                  must share one header and one grid size (the `points` column), a point found
//                  twice must have the same row, and every point 0..points-1 must be present;
//                  the result is then the same bytes as one unsharded run of the grid.
//   best_points    the feasible points that fit in memory, by throughput (samples per second,
//                  which compares points of different batch sizes, unlike iteration time) from
//                  high to low, ties broken by grid order; the top `top` rows under a leading
//                  `rank` column. In an elastic sweep (an `alpha` field) the throughput of the
//                  whole training run (elastic_samples_per_s) ranks the points instead.
//
// Thread-safety: pure functions (read and write files).
#pragma once

#include <string>
#include <vector>

#include "studies/sweep/csv.hpp"

namespace pipetwin::sim {

struct SweepTable {
  CsvRow header;
  std::vector<CsvRow> rows;
};

// A sweep CSV that must be whole: a torn last record or a row of the wrong width is an
// InputError naming the file and the line.
SweepTable load_sweep(const std::string& path);
SweepTable merge_sweeps(const std::vector<std::string>& paths);
// Written through a temp file and a rename.
void save_sweep(const SweepTable& table, const std::string& path);

SweepTable best_points(const SweepTable& table, size_t top);
// SWEEP.csv -> SWEEP.best.csv (any other name gets ".best.csv" appended).
std::string best_path(const std::string& output);

// The sweep CSV at `csv` (all), its best `top` points (best) and where they were written (path:
// best_path(csv)), as `pipetwin sweep` and `sweep merge` leave them after a whole run.
struct BestPoints {
  SweepTable all, best;
  std::string path;
};
BestPoints save_best_points(const std::string& csv, int top);
// Input columns (between `points` and `plan_M`) whose value differs between rows: what a
// summary needs to show to tell the points apart.
std::vector<size_t> varying_inputs(const SweepTable& table);

}  // namespace pipetwin::sim
