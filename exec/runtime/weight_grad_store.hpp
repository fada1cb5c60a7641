// WeightGradStore: one stage's deferred weight gradients, micro-batch by micro-batch, for the
// split backward of zero-bubble schedules.
//
// Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Section 2, split a stage's backward
// into B (here BackwardInput, I: the input gradient, which the previous stage waits for) and W
// (BackwardWeight: the weight gradients, which only the optimizer step waits for), and their
// implementation defers W with a WeightGradStore that queues, during B, what each linear layer's
// weight gradient needs and computes it when the schedule runs W. This is that store for the
// executor (exec/runtime/stage.hpp, StageRuntime::backward_input / backward_weight):
//
//   forward / recompute of a micro-batch whose backward the schedule splits: its linear layers
//     run through models::linear inside record(mb) (models/split_linear.hpp), which binds their
//     backwards to mb's entry; a recompute rebinds them to a fresh entry;
//   I: input_half(mb, backprop) back-propagates with mb's entry deferring: each linear computes
//     dx = dy W at once and leaves dW = dyᵀ x and db = Σ dy as a closure holding x and dy, tagged
//     with its model layer. The stage then drops the micro-batch's autograd graph: what W needs
//     is in the closures;
//   W: weight_half(mb, layers, on_layer_done) runs the closures layer by layer, from the stage's
//     last layer down, adding into the parameters' .grad, and reports each layer done (a
//     data-parallel bucket's all-reduce may start once its lowest layer is: worker.cpp). I and W
//     together cost one backward: nothing is computed twice.
//
// What stays alive between I and W is thus the inputs of the stage's linear layers and the
// gradients of their outputs: a subset of the graph that the liveness walk counts for the
// micro-batch until its W (core/schedule/liveness.hpp). The weight version the graph was built on
// stays pinned until W as well (W reads the version I read). Other parameterised operations
// (LayerNorm, embeddings, convolutions, BatchNorm) compute their weight gradients in I.
//
// Thread-safety: not thread-safe; owned by a StageRuntime and used from its compute thread (the
// entries themselves take pushes from autograd's threads: models/split_linear.hpp).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include "models/split_linear.hpp"

namespace pipetwin::exec {

class WeightGradStore {
 public:
  // The entry the linears of micro-batch `mb`'s forward or recompute bind to (a new one, replacing
  // any earlier entry of mb); use with models::RecordWeightGrads.
  c10::intrusive_ptr<models::DeferredWeightGrads> record(int mb);
  // Whether mb has an entry (its forward recorded for a split backward).
  bool recorded(int mb) const { return entries_.count(mb) > 0; }

  // I: runs `backprop` with mb's entry deferring and returns what it returns; mb then awaits its
  // weight half. std::logic_error when mb has no entry.
  std::vector<at::Tensor> input_half(int mb,
                                     const std::function<std::vector<at::Tensor>()>& backprop);
  // W: runs mb's closures of each of `layers` (model layers, descending) in turn, calling
  // `on_layer_done(layer)` after each (null: none), and drops the entry. std::logic_error when mb's
  // input half has not run, or a closure belongs to a layer outside `layers`.
  void weight_half(int mb, const std::vector<int>& layers,
                   const std::function<void(int)>& on_layer_done);

  // Micro-batches whose input half ran and whose weight half has not, ascending.
  std::vector<int> awaiting() const;
  bool awaits(int mb) const;
  // Closures waiting for mb's weight half, and the bytes they hold over all micro-batches.
  int pending(int mb) const;
  int64_t bytes() const;
  // Forgets mb (a whole backward ran instead, or the schedule ended).
  void drop(int mb) { entries_.erase(mb); }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    c10::intrusive_ptr<models::DeferredWeightGrads> grads;
    bool input_done = false;
  };
  std::map<int, Entry> entries_;
};

}  // namespace pipetwin::exec
