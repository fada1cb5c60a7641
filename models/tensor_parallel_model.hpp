// A tensor-parallel shard of a GPT-2 or BERT model (gpt2.hpp, bert.hpp): Megatron-LM's split of a
// Transformer (Shoeybi et al. 2019, Section 3) and, optionally, sequence parallelism (Korthikanti
// et al. 2022, Section 4.2.2), built from the building blocks of tensor_parallel.hpp.
//
// Each rank r of a group of t builds the whole model with the run's seed, as a single process
// does, and slices its shard out of the full weights (copies), so that a tensor-parallel run
// trains the single-process model:
//   "embed"      vocabulary-parallel token table: rows [r V/t, (r+1) V/t), ids outside masked,
//                the partial sums all-reduced (reduce-scattered over the sequence with sequence
//                parallelism); position (and BERT's token-type) tables, LayerNorm replicated
//   attention    LN replicated; qkv column-parallel: the rows of heads [r H/t, (r+1) H/t) of q, of
//                k and of v; attention over those heads; proj row-parallel (the heads' columns),
//                its bias added after the reduction; dropout, residual (and BERT's LN) replicated
//   mlp          LN replicated; fc1 column-parallel (rows of the MLP width), GELU, fc2 row-parallel
//   "head"       GPT-2: ln_f replicated, the LM head column-parallel (rows of the padded
//                vocabulary), logits [b, seq, V/t] for the vocabulary-parallel cross entropy
//                (tensor_parallel_loss); BERT: pooler and classifier replicated
// Without sequence parallelism the tensors between layers are whole and identical on every rank;
// with it they are the rank's sequence shard [b, seq/t, d], and what crosses a pipeline stage is
// that shard. Dropout masks are the single-process run's (sliced where the tensor is a shard:
// tensor_parallel.hpp's sliced_dropout), so a run with dropout on equals one process too.
//
// Thread-safety: pure functions; the modules follow LayeredModel's rule and issue their
// collectives through the TpComm they hold (tensor_parallel.hpp's rule).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/any.h>

#include "models/layered_model.hpp"
#include "models/tensor_parallel.hpp"

namespace pipetwin::models {

// Throws InputError, one line, when `full` cannot be split over t ranks: a family without
// tensor-parallel layers ("tensor parallelism needs a transformer family (gpt2, bert); resnet has
// none"), or heads, MLP width, vocabulary rows (or, with sequence parallelism, the sequence) not
// divisible by t.
void check_tensor_parallel(const LayeredModel& full, int t, bool sequence_parallel);

// The shards of `full`'s layers `layers` for comm's rank, their parameters sliced (copied) from
// full's current values.
std::vector<torch::nn::AnyModule> tensor_parallel_layers(const LayeredModel& full,
                                                         const std::vector<int>& layers,
                                                         const std::shared_ptr<TpComm>& comm,
                                                         bool sequence_parallel);

// The per-sample loss (LayeredModel::per_sample_loss) from a rank's head output: the
// vocabulary-parallel cross entropy for GPT-2, the model's own loss for BERT. The same on every
// rank of the group.
at::Tensor tensor_parallel_loss(const LayeredModel& full, const at::Tensor& output,
                                const at::Tensor& target, TpComm& comm);

// The predicted class of every position (LayeredModel's argmax over the last dimension) from a
// rank's head output: across the vocabulary shards for GPT-2.
at::Tensor tensor_parallel_predictions(const LayeredModel& full, const at::Tensor& output,
                                       TpComm& comm);

// The shape of layer `layer`'s output on one rank, given the unsharded output's `sizes`.
std::vector<int64_t> tensor_parallel_output_shape(const LayeredModel& full, int layer,
                                                  at::IntArrayRef sizes, int t,
                                                  bool sequence_parallel);

}  // namespace pipetwin::models
