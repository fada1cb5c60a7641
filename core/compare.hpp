// Prediction next to measurement: where a simulated run and a real one differ.
//
// Compares two timelines (or two metrics files) of the same plan: the time of every iteration
// (between consecutive optimizer-step ends), the steady-state iteration time, throughput, bubble
// fraction, per-device utilization and peak memory, and, from timelines, the median duration of
// each action kind on each stage. Relative errors are (predicted - measured) / measured; the
// headline is the median and the worst |error| over the iterations. Given several measured runs,
// `pipetwin compare` compares with the median one and prints their spread beside the error;
// given predictions from profiles measured before and after the runs too, their range beside it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/timeline.hpp"

namespace pipetwin {

struct CompareRow {
  std::string quantity;
  double predicted = 0;
  double measured = 0;
  double error() const;  // relative; 0 when both are 0
  std::string unit;      // "s", "bytes", "fraction", "samples/s"
};

// The iteration time (each run's median step) of several measured runs of one plan: how far apart runs of the same
// plan land on this machine (a VM's: 304 to 357 ms for four runs of one plan), so that a
// prediction error inside it cannot be told from noise.
struct RunSpread {
  int runs = 0;  // 0: one measured run, no spread known
  double low_s = 0, median_s = 0, high_s = 0;
  // Half the range, relative to the median: the +- a single run's error carries.
  double half_width() const { return median_s > 0 ? (high_s - low_s) / (2 * median_s) : 0; }
};

// The spread of `iteration_times_s` (one per run); the index of the median run (the lower
// middle one for an even count) in `*median_run`.
RunSpread run_spread(const std::vector<double>& iteration_times_s, size_t* median_run);

struct Comparison {
  RunSpread spread;  // set by the caller when several runs were measured
  // Set by the caller when the plan was predicted more than once, from profiles measured at
  // different times (before and after the runs): how far the machine drifted. The error is then
  // noise where the predictions' range and the runs' range overlap.
  RunSpread predictions;
  std::vector<CompareRow> iterations;  // one per step
  std::vector<CompareRow> summary;     // iteration time, throughput, bubble, devices
  std::vector<CompareRow> actions;     // median duration per (stage, action kind); timelines only
  double median_abs_iteration_error = 0;
  double worst_abs_iteration_error = 0;
  int worst_iteration = -1;
};

// `skip_first` leaves the first iterations out of the headline (warm-up of a real run).
Comparison compare_timelines(const Timeline& predicted, const Timeline& measured, int num_stages,
                             bool async, double samples_per_step, int skip_first = 1);
Comparison compare_metrics(const Metrics& predicted, const Metrics& measured, int skip_first = 1);

std::string render_comparison(const Comparison& c);

}  // namespace pipetwin
