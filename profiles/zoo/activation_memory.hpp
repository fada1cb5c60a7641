// Activation memory of a transformer layer per device under tensor parallelism, sequence
// parallelism and selective recomputation: Korthikanti et al., "Reducing Activation Recomputation
// in Large Transformer Models" (MLSys 2023; arXiv 2205.05198, 2022), Section 4, Table 2.
//
// For sequence length s, micro-batch b, hidden size h, a heads, 16-bit activations and 1-byte
// dropout masks, one layer (attention block, MLP block, two LayerNorms) keeps
//     s b h (34 + 5 a s / h)                         bytes without parallelism,
//     s b h (10 + 24/t + 5 a s / (h t))              with tensor parallelism of size t,
//     s b h / t (34 + 5 a s / h)                     with sequence parallelism as well,
//     s b h (10 + 24/t)  and  34 s b h / t           with selective recomputation (without and
//                                                    with sequence parallelism).
// The paper's terms, by the sub-layer pipetwin places them in (a pre-norm sub-layer is the norm,
// the block and its residual, profiles/zoo/transformer.cpp):
//   attention   replicated  LN input 2sbh, QKV input 2sbh, output dropout mask sbh
//               split       Q, K 4sbh, V 2sbh, projection input 2sbh, and the attention core:
//                           softmax output 2as^2b, its dropout mask as^2b, dropped output 2as^2b
//   MLP         replicated  LN input 2sbh, fc1 input 2sbh, output dropout mask sbh
//               split       fc1 output 8sbh, GeLU output 8sbh (for an MLP width of 4h)
// Here in general form: e bytes per element (2 in the paper), MLP width m, masks only where
// there is dropout. Tensor parallelism divides the split terms by t, sequence parallelism the
// replicated ones too, and selective recomputation drops the attention core (recomputed in the
// backward). Per micro-batch of b samples the bytes scale with b.
//
// Thread-safety: pure functions.
#pragma once

#include "core/tensor_parallel.hpp"

namespace pipetwin::zoo {

struct TransformerActivations {
  double seq = 0;          // s
  double hidden = 0;       // h
  double heads = 0;        // a
  double mlp = 0;          // m; 0: 4h
  double elem = 2;         // bytes per activation element
  bool dropout = true;     // dropout masks (1 byte per element) and the dropped attention copy
  double micro_batch = 1;  // b
};

// One sub-layer's activation bytes in the paper's three parts.
struct SublayerActivations {
  double replicated = 0;      // kept whole on every device of the group (split by sequence par.)
  double split = 0;           // divided over the group, the attention core included
  double attention_core = 0;  // the part of `split` selective recomputation drops
};

SublayerActivations attention_activations(const TransformerActivations& x);
SublayerActivations mlp_activations(const TransformerActivations& x);

// What one device of the group keeps of a sub-layer's activations.
double per_device_bytes(const SublayerActivations& a, const TensorParallel& tp);
// A whole layer (attention and MLP sub-layers) per device: the table above.
double layer_activation_bytes(const TransformerActivations& x, const TensorParallel& tp);

}  // namespace pipetwin::zoo
