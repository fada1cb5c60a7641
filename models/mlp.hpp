// MLP: `mlp[:layers=4,width=256,input=64,classes=10]`, a multi-layer perceptron for tests and the
// digits data set (dataset.hpp; the default input=64 is one 8x8 digit, flattened).
//
// Layers: "fc0" .. "fc{layers-1}" (kind "linear": Linear + ReLU; fc0 flattens its input, so
// [b, 1, 8, 8] images work as well as [b, input] vectors) and "head" (Linear to `classes`
// logits). Weights and biases use PyTorch's nn.Linear default, U(-1/sqrt(in), 1/sqrt(in)).
// No dropout, no normalisation: every layer is a pure function of its input and weights.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "core/model_spec.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

struct MlpConfig {
  int64_t layers = 4;  // hidden Linear + ReLU layers (0: the head alone)
  int64_t width = 256;
  int64_t input = 64;
  int64_t classes = 10;
};

MlpConfig mlp_config(const ModelSpec& spec);
int64_t parameter_count(const MlpConfig& c);
LayeredModel build_mlp(const MlpConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
