// BERT encoder (Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers", NAACL
// 2019) for sequence classification, as PipeTransformer fine-tunes BERT-base / BERT-large
// (Section 4.1) and the EPFL report and FTPipe pipeline it.
//
//   bert:tiny    L2,  H128,  A2        bert:base    L12, H768,  A12  (110M: 109.48M + classifier)
//   bert:mini    L4,  H256,  A4        bert:large   L24, H1024, A16  (335M, the "340M")
//   bert:small   L4,  H512,  A8
//   bert:medium  L8,  H512,  A8        (tiny..medium: Turc et al. 2019's compact BERTs)
// The config, its parser and presets are profiles/zoo/configs.hpp's (shared with the analytic zoo),
// and the layers those of zoo::describe_bert(config), in its order.
// All: vocab 30522, 2 token types, 512 positions, FFN 4H, classes 2. tiny..medium are test
// sizes (seq 128, dropout 0; tiny is the default preset); base and large are paper sizes (seq
// 512 as in PipeTransformer's SQuAD runs, dropout 0.1). Options: layers=, hidden=, heads=, ffn=,
// seq=, vocab=, positions=, classes=, dropout=.
//
// Input: int64 token ids [b, seq] (all of token type 0, no padding mask). Layers, post-LN as in
// the original:
//   "embed"          token + position + token-type embeddings, LN, dropout       "embedding"
//   "block{i}.attn"  h = LN(x + Dropout(Attn(x)))                                 "attention"
//   "block{i}.mlp"   LN(h + Dropout(FFN(h))), FFN = Linear-GELU(exact)-Linear      "mlp"
//   "head"           pooler tanh(Linear(H -> H)) on the first ([CLS]) token, dropout,
//                    Linear(H -> classes)                                          "head"
// LayerNorm epsilon 1e-12; all weights N(0, 0.02), biases 0 (BERT's initializer_range).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "models/layered_model.hpp"
#include "models/layers.hpp"
#include "profiles/zoo/configs.hpp"

namespace pipetwin::models {

// The Transformer sub-layers' style of config c (models/tensor_parallel_model.cpp shards them).
TransformerStyle bert_style(const zoo::BertConfig& c);

LayeredModel build_bert(const zoo::BertConfig& c, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
