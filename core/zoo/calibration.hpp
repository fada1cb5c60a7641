// Calibration: per-op-kind efficiencies and the per-task overhead of the roofline
// (core/zoo/analytic.hpp) fitted by least squares against measured profiles.
//
// Issue 5: "per-op-kind efficiencies calibrated by least squares (Eigen) against measured
// profiles; the calibration's error on held-aside measured layers is reported."
//
// Samples. Every measured profile must describe a zoo model (its "model" field), measured on one
// device in one dtype, layer for layer as the descriptor lists them (names; an InputError names
// the first mismatch). Each (layer, micro-batch size) gives two samples, its forward and its
// backward time, with the roofline's two terms at 100% efficiency (TaskWork).
//
// Fit. The model is t = o + max(u_kind x compute_s, v x memory_s) with u = 1 / efficiency[kind]
// and v = 1 / memory efficiency. The max makes it piecewise linear, so we alternate:
//   1. give each sample the regime (compute- or memory-bound) the current estimate predicts,
//      starting from the built-in defaults;
//   2. solve the linear least-squares problem in (o, v, u_kind...) for those regimes, each row
//      weighted by 1 / measured time so the fit minimises relative errors (times span 10 us to
//      10 ms), with bounds o >= 0 and efficiencies <= kMaxEfficiency enforced by an active set
//      (a violating unknown is fixed at its bound and the rest re-solved, Eigen's QR each time);
//   3. repeat until no regime changes (at most max_iterations rounds), keeping the estimate with
//      the smallest weighted error under the true max model.
// A kind with no compute-bound sample keeps its default efficiency; kinds never seen in the
// fitted samples get the median of the fitted kinds (default_compute).
//
// Hold-out. Samples of held-aside layers are left out of the fit and reported separately:
// --holdout N holds aside every N-th layer of every profile (layers N-1, 2N-1, ...),
// --holdout-model M all layers of the profiles of model M. Errors are |predicted - measured| /
// measured per task; the summary gives their median and worst.
//
// Thread-safety: pure functions.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "core/zoo/analytic.hpp"

namespace pipetwin::zoo {

struct CalibrationOptions {
  int holdout_every = 0;      // 0: none
  std::string holdout_model;  // empty: none
  int max_iterations = 50;
};

struct TaskSample {
  std::string model, layer, kind;
  int micro_batch = 1;
  bool backward = false;
  bool held_out = false;
  TaskWork work;
  double measured_s = 0;
  double predicted_s = 0;  // filled by calibrate()
  double rel_error() const;
};

struct ErrorSummary {
  int count = 0;
  double median = 0, worst = 0;
  std::string worst_task;  // "model layer fwd|bwd b=N"
};

struct CalibrationResult {
  Efficiency efficiency;
  std::vector<TaskSample> samples;
  ErrorSummary fit, held;
  std::set<std::string> fitted_kinds;  // kinds whose efficiency the fit set (others: defaults)
  int iterations = 0;
};

// The samples of `measured` on `device` (see "Samples"); `origins` name the profiles in errors
// (same length as `measured`, or empty).
std::vector<TaskSample> calibration_samples(const std::vector<Profile>& measured,
                                            const DeviceSpec& device,
                                            const std::vector<std::string>& origins = {},
                                            const CalibrationOptions& options = {});

CalibrationResult calibrate(const std::vector<Profile>& measured, const DeviceSpec& device,
                            const CalibrationOptions& options = {},
                            const std::vector<std::string>& origins = {});

ErrorSummary summarize(const std::vector<TaskSample>& samples, bool held_out);

}  // namespace pipetwin::zoo
