// The op-level model (profiles/zoo/op_cost.hpp) against measured profiles, layer by layer: the
// error of every layer's forward and backward at every profiled micro-batch size, with the
// device's op parameters as the micro-benchmark fitted them (nothing of the profiles used), and
// with a layer refinement fitted to the OTHER models' layers (leave one model out).
//
// The refinement (op_params.hpp LayerRefinement) is five numbers: one scale on every op-priced
// pass, and fixed seconds on the model's first layer's forward and backward and on its last
// layer's. Why a scale: the micro-benchmark times each operator alone with its data in the cache;
// inside a layer the same operators run after other layers evicted their weights (on this
// project's CPU the blocks' forward GEMMs run 10-20% slower than alone). Why boundary times: the
// profiler's first and last layers cost 40-150 us more than their operators (the loss and its
// backward's start in the last; the model input in the first), on every model (measured in
// docs/validation.md). A host / GEMM / convolution / element-wise scale each was tried and
// rejected: with five models, leaving out the only convolutional one leaves its scale unfitted.
// Fit: least squares on relative errors made robust by iteratively reweighted least squares
// (weights 1 / sqrt(max(|residual|, 2%)), an L1-like fit that one slow layer does not pull);
// boundary times are kept non-negative (a negative one is fixed at 0 and the rest refitted).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/profile.hpp"
#include "profiles/zoo/calibration.hpp"
#include "profiles/zoo/op_params.hpp"

namespace pipetwin::zoo {

struct OpTask {
  std::string model, layer, kind;
  int micro_batch = 1;
  bool backward = false;
  bool first = false, last = false;                      // the model's first or last layer
  double measured_s = 0, predicted_s = 0, held_s = 0;    // held: refined without its model
  double host_s = 0, gemm_s = 0, conv_s = 0, elt_s = 0;  // the unrefined prediction's parts
  double error() const;                                  // |predicted - measured| / measured
  double held_error() const;                             // |held - measured| / measured
};

struct ModelResult {
  std::string model;
  ErrorSummary raw, held;
  LayerRefinement refinement;  // fitted on the other models
};

struct OpValidation {
  std::vector<OpTask> tasks;
  std::vector<ModelResult> models;
  ErrorSummary raw, held;
  LayerRefinement all;  // fitted on every model (what a refined file carries)
};

// Every measured profile must be a zoo model measured on one device in the dtype `p` prices.
OpValidation validate_op_model(const std::vector<Profile>& measured, const OpParams& p,
                               const std::vector<std::string>& origins = {});

// The refinement fitted to `tasks` but those of model `leave_out`; `origin` goes in the sources.
LayerRefinement fit_refinement(const std::vector<OpTask>& tasks, const std::string& leave_out = "",
                               const std::string& origin = "");
// A task's prediction under a refinement.
double refined(const OpTask& t, const LayerRefinement& r);

Json op_validation_json(const OpValidation& v);

}  // namespace pipetwin::zoo
