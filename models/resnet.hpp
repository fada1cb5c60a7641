// ResNet for CIFAR (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016,
// Section 4.2): `resnet20`, `resnet32`, `resnet44`, `resnet56`, `resnet110`, or
// `resnet:depth=N` with N = 6n + 2. Options: classes=10, channels=3, image=32 (the synthetic
// input's size; the network itself is fully convolutional up to the global pooling),
// norm=batch|group, e.g. `resnet20:norm=group`.
//
// Layers, split as the EPFL report (Section 3.1) splits ResNet-20 into 11 layers:
//   "stem"              conv3x3(channels -> 16) + norm + ReLU                       kind "conv"
//   "block0".."block{3n-1}"  basic blocks (conv3x3-norm-ReLU-conv3x3-norm + shortcut, ReLU),
//                       16/32/64 channels, stride 2 at the first block of stages 2 and 3;
//                       the residual is inside the layer                         kind "residual"
//   "head"              global average pooling + Linear(64 -> classes)              kind "head"
// Shortcuts are the paper's option A for CIFAR (identity; subsample and zero-pad channels when
// the shape changes), so ResNet-20 has 0.27M parameters. Convolutions are bias-free with He
// normal initialisation; norms start at weight 1, bias 0.
//
// ImageNet ResNets (Table 1): `resnet:50`, `resnet:101`, `resnet:152` [,image=224,classes=1000,
// width=64]: "stem" conv7x7/2-norm-ReLU-maxpool3x3/2, "block{i}" bottlenecks 1x1-3x3-1x1 (stride on
// the 3x3, a 1x1 projection shortcut where the shape changes, torchvision's v1.5), "head".
//
// The config, its parser and the block list (zoo::resnet_blocks) are profiles/zoo/configs.hpp's
// (shared with the analytic zoo); the layers are those of zoo::describe_resnet(config).
//
// norm=batch (the default, as published) is BatchNorm2d: its batch statistics are computed per
// micro-batch, so a pipeline with M micro-batches does NOT reproduce single-process gradients,
// and its running statistics are updated in place by every training forward (a recompute
// updates them again). norm=group uses GroupNorm with 8 groups, which normalises each sample on
// its own: micro-batching is then exact and gradient-equality tests can use this model.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "profiles/zoo/configs.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

LayeredModel build_resnet(const zoo::ResNetConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
