// Vision Transformer (Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021), the model
// PipeTransformer trains (ViT-B/16, Section 4.1).
//
// The config, its parser and presets are profiles/zoo/configs.hpp's (shared with the analytic zoo):
//   vit:test   depth 2,  dim 32,   heads 2,  MLP 128    (unit tests)
//   vit:tiny   depth 12, dim 192,  heads 3,  MLP 768    (ViT-Ti, DeiT)      default preset
//   vit:small  depth 12, dim 384,  heads 6,  MLP 1536   (ViT-S)
//   vit:base   depth 12, dim 768,  heads 12, MLP 3072   (ViT-B/16, 86.6M parameters; = vit:b16)
//   vit:large  depth 24, dim 1024, heads 16, MLP 4096   (ViT-L/16, 304M; = vit:l16)
// test, tiny and small are test sizes: image 32, patch 4, channels 3, classes 10, dropout 0.
// base and large are paper sizes: image 224, patch 16, channels 3, classes 1000, dropout 0.1.
// Options override any field: image=, patch=, channels=, classes=, depth= (or layers=), dim= (or
// hidden=), heads=, mlp=, dropout= (e.g. `vit:tiny,image=8,patch=2,channels=1` for the 8x8
// digits). The layers are those of zoo::describe_vit(config), in its order.
//
// Layers (PipeTransformer's AutoPipe partitions attention and MLP sub-layers separately):
//   "embed"        patch embedding (a patch x patch convolution with stride patch), [class]
//                  token prepended, learned position embedding added, dropout     "embedding"
//   "block{i}.attn"  x + Dropout(MHSA(LN(x)))                                     "attention"
//   "block{i}.mlp"   x + Dropout(MLP(LN(x))), exact GELU                          "mlp"
//   "head"         LN of the [class] token, Linear(dim -> classes)                 "head"
// LayerNorm epsilon 1e-6 as in the reference implementation. Linear weights N(0, 0.02), position
// embedding N(0, 0.02), [class] token 0, patch projection PyTorch's Conv2d default.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "profiles/zoo/configs.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

LayeredModel build_vit(const zoo::VitConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
