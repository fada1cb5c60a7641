// Calibration: per-op-kind efficiencies and per-(op kind, pass) overheads of the roofline
// (profiles/zoo/analytic.hpp) fitted by least squares against measured profiles, and their error on
// measured layers held aside from the fit.
//
// Samples. Every measured profile must describe a zoo model (its "model" field), measured on one
// device in one dtype, layer for layer as the descriptor lists them (names; an InputError names
// the first mismatch). Each (layer, micro-batch size) gives two samples, its forward and its
// backward time, and each layer with parameters one more, its optimizer step (the profile's
// optimizer, traffic from core/precision.hpp), with the roofline's two terms at 100% efficiency
// (TaskWork).
//
// Model. t = o[kind, pass] + max(u_kind x compute_s, v x memory_s), u = 1 / efficiency[kind],
// v = 1 / memory efficiency. Why an overhead per (kind, pass): on the H100 profiles shipped
// under traces/h100-sxm every layer of the small models runs in 25-900 us while its roofline
// terms are under 10 us: the time is the kernels' launch latency, and its number of kernels is
// set by the layer's code: a linear layer's forward takes 28 us, an attention block's 140 us,
// their backwards 150 and 510 us (about 3-5x the forward: twice the kernels plus the autograd
// engine). One overhead for all of them fit the H100 profiles with a median error of 45%.
// A (kind, pass) with fewer than min_overhead_samples fitted samples shares one overhead per pass
// (default_overheads); kinds never fitted take it too (the median of the fitted kinds' overheads
// when no kind shares it).
//
// Identifiability. A kind's efficiency is fitted only if some fitted sample of it spends at
// least identifiable_share of its measured time in the compute term (at the prior efficiency);
// otherwise the kind is launch-bound in every sample, its efficiency says nothing about the
// time, and the fit would set it to whatever absorbs noise (0.018 for the H100 heads) that then
// breaks a larger model's prediction. Such kinds keep the prior (built-in default) efficiency;
// the memory efficiency likewise.
//
// Fit. The max makes the model piecewise linear, so we alternate:
//   1. give each sample the regime (compute- or memory-bound) the current estimate predicts,
//      starting from the built-in defaults;
//   2. solve the linear least-squares problem in (o..., v, u_kind...) for those regimes, each row
//      weighted by 1 / measured time so the fit minimises relative errors (times span 10 us to
//      10 ms), with bounds o >= 0 and efficiencies <= kMaxEfficiency enforced by an active set
//      (a violating unknown is fixed at its bound and the rest re-solved, Eigen's QR each time);
//   3. repeat until no regime changes (at most max_iterations rounds), keeping the estimate with
//      the smallest weighted error under the true max model.
// Kinds never seen in the fitted samples get the median of the fitted kinds' efficiencies
// (default_compute).
//
// Hold-out. Samples of held-aside layers are left out of the fit and reported separately:
// --holdout N holds aside every N-th layer of every profile (layers N-1, 2N-1, ...),
// --holdout-model M all layers of the profiles of model M. Errors are |predicted - measured| /
// measured per task; the summary gives their median and worst. leave_one_model_out() fits once
// per model on all the others and predicts that model: the error to expect for a model nobody
// profiled.
//
// What the model does not capture (H100, float32; measured residuals): (1) the same layer
// measured at different micro-batch sizes in one profile varies by up to 1.7x with no trend
// (ViT-tiny: micro-batches 1 and 4 slower than 2 and 8 in every layer; GPT-2-tiny: 4), and the
// same sub-layer code runs 1.6x slower in one model's profile than in another's (BERT-tiny's MLP
// backward 440 us, GPT-2-tiny's 270 us): session-to-session launch latency that no per-kind
// constant predicts. (2) Kinds of one model only (linear: mlp; conv and residual: resnet20) get
// the shared overhead when their model is held aside. (3) BERT-base and ViT-base train with
// dropout 0.1, whose keyed mask (models/layers.cpp keyed_dropout: about 15 int64 element-wise
// kernels) moves about 250 bytes per element in the forward only; the descriptor
// (profiles/zoo/zoo.hpp) does not say which elements are dropped, so this shows as a slow forward
// (BERT-base attention forward 2.0 ms against a 1.3 ms backward).
//
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "profiles/zoo/analytic.hpp"

namespace pipetwin::zoo {

struct CalibrationOptions {
  int holdout_every = 0;      // 0: none
  std::string holdout_model;  // empty: none
  int max_iterations = 50;
  bool per_kind_overheads = true;  // false: one overhead for every task (for comparison)
  int min_overhead_samples = 4;
  double identifiable_share = 0.1;
};

struct TaskSample {
  std::string model, layer, kind;
  int micro_batch = 1;  // 0 for an optimizer step
  TaskPass pass = TaskPass::forward;
  bool held_out = false;
  TaskWork work;
  double measured_s = 0;
  double predicted_s = 0;  // filled by calibrate()
  double rel_error() const;
};

struct ErrorSummary {
  int count = 0;
  double median = 0, worst = 0;
  std::string worst_task;  // "model layer fwd|bwd b=N" or "model layer step"
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

// Leave one model out: for every model among `measured`, calibrate on the others (options'
// holdout fields are ignored) and predict its tasks.
struct ModelHoldout {
  std::string model;
  ErrorSummary held;
};
struct HoldoutReport {
  std::vector<ModelHoldout> models;
  ErrorSummary overall;  // every model's held-aside tasks together
};
HoldoutReport leave_one_model_out(const std::vector<Profile>& measured, const DeviceSpec& device,
                                  const CalibrationOptions& options = {},
                                  const std::vector<std::string>& origins = {});
Json holdout_report_json(const HoldoutReport& report);

}  // namespace pipetwin::zoo
