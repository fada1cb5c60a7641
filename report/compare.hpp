// Prediction next to measurement: where a simulated run and a real one differ.
//
// Compares two timelines (or two metrics files) of the same plan: the time of every iteration
// (between consecutive optimizer-step ends), the steady-state iteration time, throughput, bubble
// fraction, per-device utilization and peak memory, and, from timelines, the median duration of
// each action kind on each stage. Relative errors are (predicted - measured) / measured; the
// headline is the median and the worst |error| over the iterations. Given several measured runs,
// `pipetwin compare` compares with the median one and prints their spread beside the error;
// given predictions from profiles measured between the runs too, their range beside it, and
// whether the two ranges overlap (ranges_apart_probability: how often they would not by chance).
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

// The iteration time (each run's median step) of several measured runs of one plan: how far apart
// runs of the same plan land on this machine (a VM's: 304 to 357 ms for four runs of one plan), so
// that a prediction error inside it cannot be told from noise.
struct RunSpread {
  int runs = 0;  // 0: one measured run, no spread known
  double low_s = 0, median_s = 0, high_s = 0;
  // Half the range, relative to the median: the +- a single run's error carries.
  double half_width() const { return median_s > 0 ? (high_s - low_s) / (2 * median_s) : 0; }
};

// The spread of `iteration_times_s` (one per run); the index of the median run (the lower
// middle one for an even count) in `*median_run`.
RunSpread run_spread(const std::vector<double>& iteration_times_s, size_t* median_run);

// A run's iteration time for the spreads: its median step, or the steady mean where the metrics
// have no median. One stalled step of a noisy VM (518 ms among 437 ms ones) moves the steady
// mean by several percent and the median step not at all.
double median_step_s(const Metrics& m);

// Several runs and predictions of one plan, as `pipetwin compare` and `pipetwin report` take
// them: the runs' spread and which run is the median one (the one a prediction is compared
// with), and the predictions' spread. `predictions` starts with the one compared.
struct Repeats {
  RunSpread runs;         // runs.runs == 0 for fewer than two runs
  RunSpread predictions;  // predictions.runs == 0 for fewer than two predictions
  size_t median_run = 0;  // index into the runs given
};
Repeats repeats_of(const std::vector<Metrics>& runs, const std::vector<Metrics>& predictions);

// How often the ranges of m and n draws of one continuous noise do not overlap: all m below all
// n, or all above, 2 / C(m + n, m) (every order of the m + n draws is equally likely). It is the
// rate at which a right model is called wrong by the overlap test: 20% for 2 predictions and 3
// runs, 1.6% for 5 and 4. Draws are alike only where they are taken across the same time, so
// predictions and runs are measured in turns (scripts/main-job.sh).
double ranges_apart_probability(int m, int n);

struct Comparison {
  RunSpread spread;  // set by the caller when several runs were measured
  // Set by the caller when the plan was predicted more than once, from profiles measured at
  // different times (in turns with the runs): how far the machine's speed moved. The error is
  // then noise where the predictions' range and the runs' range overlap.
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

// `pipetwin compare` of one plan's runs: the prediction against the median of the measured runs
// (repeats_of), with the runs' spread and, given `also` (more predictions of the plan), the
// predictions' spread. Over timelines the stages and whether the schedule is asynchronous come
// from the predicted timeline, and `samples_per_step` prices throughput; `measured` is not empty.
Comparison compare_runs(const Timeline& predicted, const std::vector<Timeline>& measured,
                        const std::vector<Timeline>& also, double samples_per_step,
                        int skip_first = 1);
Comparison compare_runs(const Metrics& predicted, const std::vector<Metrics>& measured,
                        const std::vector<Metrics>& also, int skip_first = 1);

// What the spreads say of the error: the last line of render_comparison, and the verdict of
// each prediction/measurement group in `pipetwin report`.
struct NoiseVerdict {
  enum Kind {
    kOneRun,     // no spread known: one measured run
    kRunSpread,  // the error against the runs' +-half width
    kRanges,     // the predictions' range against the runs' range
  };
  Kind kind = kOneRun;
  double error = 0;  // median-step iteration time, the prediction against the median run
  double predictions_median_error = 0;  // kRanges: the predictions' median against it
  bool within = false;           // kRunSpread: |error| <= half width; kRanges: ranges overlap
  double apart_probability = 1;  // kRanges: ranges_apart_probability(predictions, runs)
  std::string text;              // the line, without its newline
};
NoiseVerdict noise_verdict(const Comparison& c);

std::string render_comparison(const Comparison& c);

}  // namespace pipetwin
