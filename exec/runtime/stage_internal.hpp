// Internal to exec/stage*.cpp: StageRuntime's weight instances (Slot) and per-micro-batch state
// (MicroBatch), shared by the forward half (stage.cpp) and the backward half (stage_backward.cpp).
//
// Thread-safety: as StageRuntime (stage.hpp).
#pragma once

#include <array>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/any.h>

#include "exec/runtime/stage.hpp"

namespace pipetwin::exec {

struct StageRuntime::Slot {
  int version = 0;
  std::vector<torch::nn::AnyModule> layers;
  std::vector<at::Tensor> params;
  int refs = 0;  // micro-batches that pin these weights (stage.hpp "Weight versions")
};

struct StageRuntime::MicroBatch {
  std::vector<at::Tensor> inputs;    // as kept for a recompute (inputs[0] past F_frozen, if any)
  std::vector<at::Tensor> received;  // as they arrived (their shapes are the input gradients')
  at::Tensor target;
  bool past_frozen = false;        // inputs[0] is the frozen prefix's output already
  std::vector<at::Tensor> leaves;  // the inputs as autograd leaves, for the input gradients
  // Per layer position, when back-propagating layer by layer: the leaves its main and skip
  // inputs were read through, and its output.
  std::vector<std::array<at::Tensor, 2>> xs;
  std::vector<at::Tensor> ys;
  std::vector<at::Tensor> outs;  // the outputs, with graph
  at::Tensor loss;               // the last stage's scaled loss, with graph
  int micro_batch = -1;
  bool split = false;  // its backward is split: forward and recompute record for W
  // Weights the graph was built on; -1: no graph. After backward_input the graph is gone and the
  // stage's WeightGradStore holds what backward_weight needs of it, on this version.
  int graph_version = -1;
  int pinned_version = -1;  // weights it keeps alive; -1: none
};

}  // namespace pipetwin::exec
