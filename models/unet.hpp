// U-Net: `unet[:B=5,C=64,image=192,channels=3,out=1,norm=batch]`, the model torchgpipe benchmarks
// (Kim et al. 2020, Section 4.2.2), built from the config, parser and block list (zoo::unet_blocks)
// of profiles/zoo/configs.hpp that its analytic twin profiles/zoo/unet.cpp describes, so the two have the
// same layers, parameters and skips (tested) and a profile of one names the layers of the other.
// With c_i = C * 2^i and every block a bias-free 3x3 convolution, a norm and ReLU:
//   "enc{i}.conv{j}"         i = 0..4: channels (i = 0) or c_{i-1} -> c_i, then c_i -> c_i; the
//                            first block of a lower level max-pools its input (2x2)
//   "bottleneck.conv{j}"     max-pool, c_4 -> c_5, c_5 -> c_5, ..., c_5 -> c_4
//   "dec{i}.conv{j}"         i = 4..0: dec{i}.conv0 up-samples its input 2x (nearest), concatenates
//                            the skip from enc{i}.conv{B-1} (channels 2 c_i) -> c_{i-1}, then
//                            c_{i-1} -> c_{i-1}
//   "segment"                1x1 convolution C/2 -> out, no bias, no norm          kind "head"
// The skips are cross-layer skip connections (Layer::skip_from): dec{i}.conv0 takes
// (x, skip), and in a pipeline the encoder's output travels straight to the stage of its decoder
// block (torchgpipe's portals, exec/runtime/stage_io.hpp). Task: per-pixel regression (mean squared
// error against an out x image x image target), the synthetic data of models/.
//
// norm=batch (published) is BatchNorm2d, whose batch statistics make micro-batching inexact (see
// resnet.hpp); norm=group uses GroupNorm with gcd(8, channels) groups, which normalises each sample
// alone, so the executor's gradient-equality tests use it. Test size: `unet:B=2,C=4,image=32,
// norm=group` (23 layers, 0.28M parameters).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "profiles/zoo/configs.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

LayeredModel build_unet(const zoo::UNetConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
