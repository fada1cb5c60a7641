// Reference training: the same model, data and optimizer on one thread, without a pipeline.
//
// What the executor must reproduce. Each micro-batch runs forward through all stages and back,
// but every stage computes with the weight version the schedule declares for that micro-batch:
// the forward of stage i reads W_i at the forward's version; the backward of stage i takes the
// vector-Jacobian product of stage i at its kept input with W_i at the backward's version (the
// same version when weights are stashed, the current one after a recompute: FTPipe Table 1; a
// backward split in BackwardInput and BackwardWeight at the BackwardInput's, which its
// BackwardWeight reads too).
// Stage i's gradients of the micro-batches of step s are summed and applied by the optimizer to
// produce version s + 1. For synchronous schedules every version is the step itself and this is
// plain mini-batch SGD; for the asynchronous ones it is the delayed-gradient training the papers
// describe, computed independently of the executor's weight stashing machinery.
//
// Thread-safety: pure function (builds its own model).
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "core/plan.hpp"
#include "core/schedule/schedule.hpp"
#include "exec/runtime/executor.hpp"

namespace pipetwin::exec {

struct ReferenceResult {
  std::vector<std::vector<at::Tensor>> stage_parameters;  // final weights per stage
  std::vector<double> step_loss;                          // mean per-sample loss per step
};

ReferenceResult reference_training(const Plan& plan, const Schedule& schedule,
                                   const ExecOptions& options);

}  // namespace pipetwin::exec
