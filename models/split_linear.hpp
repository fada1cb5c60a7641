// A linear layer whose backward can be split in two: the gradient with respect to its input now,
// the gradients with respect to its weight and bias later.
//
// Zero-bubble pipelines split a stage's backward into B, the input gradient the previous stage
// waits for, and W, the weight gradients nothing downstream waits for (Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024, Section 2: for y = xW, "the computation of ∂L/∂x ... and
// ∂L/∂W" are independent; their implementation defers the latter with a WeightGradStore). For a
// linear layer y = x Wᵀ + b the two halves are
//   input half   dx = dy W                 (what the backward of the stage must return now)
//   weight half  dW = dyᵀ x,  db = Σ dy    (needs only x and dy: kept, computed later)
// so the two together cost what one backward costs: nothing is computed twice.
//
// linear() is what every linear layer of models/ calls (LinearImpl, layers.hpp). Outside a
// RecordWeightGrads scope, or with grad mode off, it is at::linear, unchanged. Inside one, it is a
// custom autograd function bound to the scope's DeferredWeightGrads: its backward computes dx at
// once and, while that DeferredWeightGrads is deferring, pushes the weight half as a closure
// holding x and dy (tagged with the model layer set by RecordWeightGrads::set_layer); while it is
// not deferring it returns dW and db to autograd as at::linear's backward does. The binding is
// made at forward time and travels with the graph, so it holds whichever thread runs the backward
// (LibTorch runs a CUDA graph's backward on its own device threads). A deferred closure adds its
// gradients into the weight's and the bias's .grad (in place when defined, as autograd
// accumulates).
//
// Other parameterised operations (LayerNorm, Embedding, convolutions, BatchNorm, the synthetic
// layers) are not split: their weight gradients are computed in the input half, and a profile
// counts them as input-half time (exec/profile/profiler.hpp).
//
// Under autocast the forward is at::linear under the same autocast; the backward casts W, x and dy
// to the dtype autocast computed y in, and the gradients back to their tensors' dtypes, which is
// what autograd does through autocast's casts.
//
// Thread-safety: a DeferredWeightGrads is thread-safe (a backward may push from autograd's device
// threads); running its closures belongs to one thread at a time. RecordWeightGrads scopes are per
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/intrusive_ptr.h>

namespace pipetwin::models {

// The weight halves of split linear backwards, waiting to run: one micro-batch's of one stage in
// the executor (exec/runtime/weight_grad_store.hpp).
class DeferredWeightGrads : public torch::CustomClassHolder {
 public:
  // While deferring, the backwards of the linears bound to this push their weight halves here;
  // otherwise they compute them at once.
  bool deferring() const { return deferring_.load(std::memory_order_acquire); }
  void set_deferring(bool on) { deferring_.store(on, std::memory_order_release); }

  // A weight half of model layer `layer` holding `bytes` of tensors.
  void push(int layer, std::function<void()> work, int64_t bytes);
  // Runs the waiting work of `layer` (all of it: layer < 0) in the order it was pushed, and drops
  // it; returns how many closures ran.
  int run(int layer = -1);
  // Closures waiting, and the bytes of the tensors they hold.
  int pending() const;
  int64_t bytes() const;
  // The layers with work waiting, descending.
  std::vector<int> layers() const;
  void clear();

 private:
  struct Work {
    int layer = -1;
    std::function<void()> run;
    int64_t bytes = 0;
  };
  mutable std::mutex mu_;
  std::vector<Work> waiting_;
  std::atomic<bool> deferring_{false};
};

// While alive, linear() on this thread (with grad mode on) binds its backward to `grads`. Scopes
// nest; a null `grads` turns recording off inside.
class RecordWeightGrads {
 public:
  explicit RecordWeightGrads(c10::intrusive_ptr<DeferredWeightGrads> grads);
  ~RecordWeightGrads();
  RecordWeightGrads(const RecordWeightGrads&) = delete;
  RecordWeightGrads& operator=(const RecordWeightGrads&) = delete;
  // The model layer the linears called next on this thread belong to (a no-op when not recording).
  static void set_layer(int layer);

 private:
  c10::intrusive_ptr<DeferredWeightGrads> saved_;
  int saved_layer_;
};

// y = x weightᵀ + bias (bias may be undefined): at::linear, or the split linear inside a
// RecordWeightGrads scope (see above).
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// What the calling thread's operations bind their backwards to now (null grads: not recording),
// for another custom autograd function that defers a weight half as the split linear does (the
// synthetic layers, models/synthetic.hpp).
struct WeightGradBinding {
  c10::intrusive_ptr<DeferredWeightGrads> grads;
  int layer = -1;
};
WeightGradBinding current_weight_grad_binding();

// Adds `g` to `leaf`'s .grad as autograd's AccumulateGrad does without grad mode (grad mode is
// off inside): in place when defined (the executor's stages share one .grad tensor between weight
// versions).
void accumulate_grad(const at::Tensor& leaf, const at::Tensor& g);

}  // namespace pipetwin::models
