// Tensor-parallel shards of the zoo's transformers, split as Megatron-LM splits them (Shoeybi et
// al., "Megatron-LM", 2019, Section 3; Korthikanti et al., "Reducing Activation Recomputation in
// Large Transformer Models", 2022, Section 4.2), and the profile of one shard.
//
// The split, per operation of a layer (profiles/zoo/ops.hpp), for the families whose LibTorch
// modules the executor can split (vit, bert, gpt2):
//   column    qkv, fc1 and the LM head: output features divided over the t devices
//             ("column-parallel", Y_i = X A_i), their biases too
//   row       proj, fc2: input features divided, the partial products all-reduced, the bias
//             added once after the reduction ("row-parallel")
//   heads     the attention core: a/t heads per device
//   inner     the element-wise ops between a column- and a row-parallel linear (GeLU, the
//             hidden dropout) and the loss over the vocabulary shard (vocab-parallel
//             cross-entropy: log-softmax over V/t logits, the max, sum and target logit
//             all-reduced, 3 x s float32 values per sample)
//   vocab     the word embedding: V/t rows per device, rows of other devices masked to zero and
//             the partial embeddings all-reduced ("vocabulary-parallel")
//   sequence  norms, output dropout and residual adds: replicated, or divided over the sequence
//             with sequence parallelism
//   none      the rest (ViT's patch embedding, BERT's pooler and classifier, ViT's head):
//             replicated
// Collectives of a shard's layer (its TpCollective lists, bytes of the whole tensor s x h):
//   attention, MLP   forward: all-reduce after the row-parallel linear ("g"); backward: an
//                    all-reduce of the input gradient before the column-parallel linear ("f").
//                    With sequence parallelism an all-gather before the column-parallel linear
//                    and a reduce-scatter after the row-parallel one, and in the backward the
//                    reverse pair: two all-reduces per block forward and two backward, or as
//                    many all-gather / reduce-scatter pairs of the same volume.
//   word embedding   forward: all-reduce (sequence parallel: reduce-scatter) of the output.
//   LM head          forward: all-gather of the input with sequence parallelism, the loss's
//                    three all-reduces of s float32 values; backward: all-reduce (reduce-scatter)
//                    of the input gradient.
//   other heads      with sequence parallelism: all-gather of the input, reduce-scatter back.
// Activations kept for backward follow profiles/zoo/activation_memory.hpp: the replicated and
// split parts of the transformer sub-layers by Korthikanti et al.'s count, applied as a ratio to
// what the descriptor keeps at t = 1 (the executor's own count, profiles/zoo/transformer.cpp), so
// that t = 1 stays the measured figure. Selective recomputation drops the attention core from the
// saved bytes and adds its forward to the backward (its FLOP share of the attention sub-layer).
// What crosses a stage boundary: the whole s x h per device (each rank of a group sends its copy
// to the same rank of the next group), divided by t with sequence parallelism.
//
// A measured profile is sharded by ratios: each pass of each layer at each micro-batch size is
// the measured time times the priced shard over the priced whole (op-level or roofline model of
// the same device, `price`), bytes likewise; an analytic profile so becomes exactly the priced
// shard. Left out, as small: the all-reduce of LayerNorm weight gradients over the group under
// sequence parallelism, the scatter-gather optimisation of stage-to-stage sends.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tensor_parallel.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

enum class TpSplit : uint8_t { none, column, row, heads, inner, vocab, sequence };

// How `op` of `layer` in a model of `family` is split (above).
TpSplit op_split(const std::string& family, const ZooLayer& layer, const OpSpec& op);

// Why `model` cannot be split t ways ("" when it can): a family without a split, or heads, the
// MLP width or the vocabulary rows not divisible by t. Prefixed by the model's name.
std::string tensor_parallel_refusal(const ZooModel& model, const TensorParallel& tp);

// One device's shard of `whole` (InputError with tensor_parallel_refusal's reason, naming
// `origin`). t = 1 without selective recomputation returns `whole`.
ZooModel shard_model(const ZooModel& whole, const TensorParallel& tp,
                     const std::string& origin = "--tp");

// The collectives of layer `l` of `whole` under `tp`, bytes per sample for activations of
// `elem` bytes.
struct LayerCollectives {
  std::vector<TpCollective> forward, backward;
};
LayerCollectives layer_collectives(const ZooModel& whole, int l, const TensorParallel& tp,
                                   double elem);

// Prices a descriptor at the given micro-batch sizes on the device and in the dtype and optimizer
// of the profile being sharded (an analytic profile: op-level or roofline).
using PriceModel = std::function<Profile(const ZooModel&, const std::vector<int>& micro_batches)>;

// The profile of one shard of `whole` (a profile of the model `model` describes, any source),
// with Profile::tensor_parallel set and each layer's collectives listed.
Profile shard_profile(const Profile& whole, const ZooModel& model, const TensorParallel& tp,
                      const PriceModel& price, const std::string& origin = "--tp");

}  // namespace pipetwin::zoo
