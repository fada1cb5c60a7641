// Vision Transformer (Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021), the model
// PipeTransformer trains (ViT-B/16, Section 4.1).
//
//   vit:test   depth 2,  dim 32,   heads 2,  MLP 128    (unit tests)
//   vit:tiny   depth 12, dim 192,  heads 3,  MLP 768    (ViT-Ti, DeiT)      default preset
//   vit:small  depth 12, dim 384,  heads 6,  MLP 1536   (ViT-S)
//   vit:base   depth 12, dim 768,  heads 12, MLP 3072   (ViT-B/16, 86.6M parameters)
//   vit:large  depth 24, dim 1024, heads 16, MLP 4096   (ViT-L/16, 304M)
// test, tiny and small are test sizes: image 32, patch 4, channels 3, classes 10, dropout 0.
// base and large are paper sizes: image 224, patch 16, channels 3, classes 1000, dropout 0.1.
// Options override any field: image=, patch=, channels=, classes=, depth=, dim=, heads=, mlp=,
// dropout= (e.g. `vit:tiny,image=8,patch=2,channels=1` for the 8x8 digits).
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

#include "core/model_spec.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

struct VitConfig {
  int64_t depth = 12, dim = 192, heads = 3, mlp = 768;
  int64_t image = 32, patch = 4, channels = 3, classes = 10;
  double dropout = 0;
};

VitConfig vit_config(const ModelSpec& spec);
int64_t parameter_count(const VitConfig& c);
LayeredModel build_vit(const VitConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
