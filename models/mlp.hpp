// MLP: `mlp[:layers=4,width=256,input=64,classes=10]`, a multi-layer perceptron for tests and the
// digits data set (dataset.hpp; the default input=64 is one 8x8 digit, flattened).
//
// Layers: "fc0" .. "fc{layers-1}" (kind "linear": Linear + ReLU; fc0 flattens its input, so
// [b, 1, 8, 8] images work as well as [b, input] vectors) and "head" (Linear to `classes`
// logits). Weights and biases use PyTorch's nn.Linear default, U(-1/sqrt(in), 1/sqrt(in)).
// No dropout, no normalisation: every layer is a pure function of its input and weights. The
// config and its parser are profiles/zoo/configs.hpp's, the layers those of zoo::describe_mlp.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "profiles/zoo/configs.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

LayeredModel build_mlp(const zoo::MlpConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
