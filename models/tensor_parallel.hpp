// Tensor-parallel building blocks (Megatron-LM: Shoeybi et al., "Megatron-LM: Training
// Multi-Billion Parameter Language Models Using Model Parallelism", 2019, Section 3; sequence
// parallelism: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
// Models", 2022, Section 4.2.2), over an abstract communicator so that models/ does not depend on
// exec/ (docs/design.md "Layout": exec/platform/tp_comm.hpp implements it over a c10d group, and
// an in-process group of threads for tests).
//
// A tensor-parallel group is t ranks, each holding a 1/t shard of a layer's weights. Megatron's
// two conjugate operators move a tensor in and out of the sharded ("TP") region:
//   f, copy_to_tp:       identity forward, all-reduce backward (before a column-parallel linear)
//   g, reduce_from_tp:   all-reduce forward, identity backward (after a row-parallel linear)
// With sequence parallelism the tensors between the TP regions are split over the sequence
// (dimension 1) and the pair becomes
//   gather_from_sequence:      all-gather forward, reduce-scatter backward (replaces f)
//   reduce_scatter_to_sequence: reduce-scatter forward, all-gather backward (replaces g)
// and a parameter used on a sequence shard (LayerNorm weights, the bias added after a
// reduce-scatter, position embeddings) sees a partial gradient: it goes through copy_to_tp, whose
// backward sums the ranks' parts (Megatron all-reduces these gradients once per step; the sum per
// micro-batch is the same sum by linearity). gather_replicated feeds a replicated computation (the
// BERT head) from sequence shards: all-gather forward, backward this rank's slice of the (then
// identical) gradient.
//
// Every rank runs the same operations in the same order, so the collectives match. A loss computed
// in the replicated region is the same on all ranks; each rank back-propagates its own copy with
// gradient 1 (Megatron's convention), and the operators above make every shard's gradient the
// gradient of that one loss.
//
// Thread-safety: a TpComm's collectives are issued by one thread at a time per rank, in the same
// order on every rank of the group (the stage's compute thread; its backward runs there on a CPU);
// the functions here are pure apart from the collectives they issue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>

namespace pipetwin::models {

// The collectives of one tensor-parallel group, over dimension `dim` where they split.
class TpComm {
 public:
  enum class Op { kSum, kMax };
  virtual ~TpComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the element-wise sum (or max) over the group.
  virtual void all_reduce(at::Tensor& t, Op op) = 0;
  // The ranks' tensors concatenated along `dim`, in rank order (each holds one equal chunk).
  virtual at::Tensor all_gather(const at::Tensor& t, int64_t dim) = 0;
  // This rank's chunk along `dim` of the sum over the group (t.size(dim) divisible by size()).
  virtual at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) = 0;
};

// Megatron's f and g and their sequence-parallel forms (above), as autograd functions.
at::Tensor copy_to_tp(const at::Tensor& x, TpComm& comm);
at::Tensor reduce_from_tp(const at::Tensor& x, TpComm& comm);
at::Tensor gather_from_sequence(const at::Tensor& x, TpComm& comm);
at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, TpComm& comm);
at::Tensor gather_replicated(const at::Tensor& x, TpComm& comm);

// Rank r's rows [r * n / t, (r + 1) * n / t) of `dim` (a copy); the error names `field` when n is
// not divisible by t.
at::Tensor shard_of(const at::Tensor& full, int64_t dim, int rank, int size,
                    const std::string& field);

// Keyed dropout (dropout.hpp) of a shard: the mask the unsharded tensor of shape `full` would get,
// sliced at [start, start + x.size(dim)) of `dim`, so a sharded run draws the single-process run's
// masks.
at::Tensor sliced_dropout(const at::Tensor& x, double p, uint64_t site, bool training,
                          at::IntArrayRef full, int64_t dim, int64_t start);

// Embedding of `ids` in a vocabulary-parallel table: `shard` holds rows [start, start +
// shard.size(0)); ids outside give zero rows. The caller reduces the partial sums (g, or a
// reduce-scatter with sequence parallelism).
at::Tensor vocab_parallel_embedding(const at::Tensor& shard, const at::Tensor& ids, int64_t start);

// Cross entropy per row of logits split over the vocabulary: `logits` [n, V / t] holds columns
// [rank * V / t, ...) of each row, `target` [n] global ids. Local max, all-reduced max; sum of
// exponentials, all-reduced; the target's logit from the rank holding it, all-reduced (Megatron's
// vocab-parallel cross entropy). Returns [n], the same on every rank.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                        TpComm& comm);

// The global column index of each row's largest logit (the first of ties), from logits split over
// the vocabulary as above; the same on every rank.
at::Tensor vocab_parallel_argmax(const at::Tensor& logits, TpComm& comm);

}  // namespace pipetwin::models
