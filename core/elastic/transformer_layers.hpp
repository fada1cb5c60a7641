// Transformer layers: how a profile's layers group into the L layers the freeze algorithm counts
// (PipeTransformer Section 2.1: "The Transformer model F has L layers"; Algorithm 1, line 7:
// "f_ATT_i, f_MLP_i <- f_i").
//
// Profiles of transformers list each block as two layers, kind "attention" then kind "mlp"
// (traces/cpu-core/bert-tiny.profile.json: embed, block0.attn, block0.mlp, ..., head). Then
// transformer layer i starts at the i-th attention layer and runs to the next one; the last one
// takes the mlp layers that follow it. Layers before the first attention layer (the embedding)
// are the prefix, layers after the last block (the task head) the suffix. A profile without
// attention layers (the synthetic model, an MLP, a ResNet) has one transformer layer per profile
// layer, except leading "embedding" layers (prefix) and trailing "head" layers (suffix).
//
// Freezing is bottom-up, so the frozen profile layers are always a prefix. The paper does not
// say where the embedding goes; it lies below layer 0 and converges before it, so we freeze it
// together with the first transformer layer. The head is never frozen: it is the task-specific
// layer being fine-tuned (the paper freezes "some layers", never the output).
//
// Thread-safety: plain value type.
#pragma once

#include <vector>

#include "core/profile.hpp"

namespace pipetwin::elastic {

class TransformerLayers {
 public:
  // Throws InputError when the profile has no layer that could freeze.
  static TransformerLayers from_profile(const Profile& profile);

  int layers() const { return static_cast<int>(begin_.size()) - 1; }  // L
  int prefix_layers() const { return begin_.front(); }
  int profile_layers() const { return profile_layers_; }
  // Profile layers of transformer layer i: [first(i), first(i + 1)).
  int first(int i) const { return begin_[static_cast<size_t>(i)]; }
  // Profile layers frozen when `frozen` transformer layers are (0..L): 0, or the prefix and the
  // first `frozen` transformer layers.
  int frozen_profile_layers(int frozen) const;

 private:
  std::vector<int> begin_;  // L + 1 entries; begin_[L] is the first suffix layer
  int profile_layers_ = 0;
};

}  // namespace pipetwin::elastic
