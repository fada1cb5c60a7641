// GPT-2 (Radford et al., "Language Models are Unsupervised Multitask Learners", 2019), the
// decoder-only language model FTPipe fine-tunes (GPT2-1.5B, Section 5).
//
//   gpt2:tiny    L2,  d128,  h2,  vocab 1024 (no padding needed), ctx 64, seq 64, dropout 0
//                (tests; default preset)
//   gpt2:small   L12, d768,  h12  124M      gpt2:large  L36, d1280, h20  774M
//   gpt2:medium  L24, d1024, h16  355M      gpt2:xl     L48, d1600, h25  1558M
// with the aliases gpt2:124m, gpt2:355m, gpt2:774m and gpt2:1.5b. The config, its parser and
// presets are profiles/zoo/configs.hpp's (shared with the analytic zoo), and the layers those of
// zoo::describe_gpt2(config), in its order.
// Paper sizes: vocab 50257, ctx 1024 positions, seq 1024, dropout 0.1, MLP 4d. Options:
// layers=, dim=, heads=, vocab=, ctx=, seq= (<= ctx), dropout=, vocab_multiple= (128).
//
// Padded vocabulary (Megatron-LM, nanoGPT): wte and the LM head have V = vocab rounded up to a
// multiple of vocab_multiple rows (50257 -> 50304; Gpt2Config::padded_vocab()); token ids and
// targets stay in [0, vocab), so the padded rows' logits are never targets (the softmax covers
// them, and training drives them down). vocab_multiple=1 builds the published, unpadded shape.
//
// Input: int64 token ids [b, seq]; output: logits [b, seq, V]; target: the input shifted by
// one (LayeredModel::synthetic_target cuts both from one sequence of seq + 1 tokens). Layers,
// pre-LN with causal self-attention:
//   "embed"          token (wte) + position (wpe) embeddings, dropout             "embedding"
//   "block{i}.attn"  x + Dropout(CausalAttn(LN(x)))                                "attention"
//   "block{i}.mlp"   x + Dropout(MLP(LN(x))), GELU tanh approximation              "mlp"
//   "head"           final LN, LM head Linear(d -> V) without bias                 "head"
// Weights N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2L)), biases 0, LN eps 1e-5.
//
// Weight tying. The published model ties the LM head to wte; across pipeline stages that would
// need the embedding and the head on one device (or a gradient exchange), so pipetwin's head is
// untied and the built model has V * d more parameters than the tied one (38.6M for gpt2:small).
// zoo::describe_gpt2(config).parameters() counts the model as built, unique_parameters() the
// tied model, which the padding leaves (V - vocab) * d above the published count (47 * 768 = 36k
// for gpt2:small, 0.03%).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "models/layered_model.hpp"
#include "models/layers.hpp"
#include "profiles/zoo/configs.hpp"

namespace pipetwin::models {

// The Transformer sub-layers' style of config c (models/tensor_parallel_model.cpp shards them).
TransformerStyle gpt2_style(const zoo::Gpt2Config& c);

LayeredModel build_gpt2(const zoo::Gpt2Config& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
