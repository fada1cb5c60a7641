// BatchSource: the inputs and targets of every micro-batch, identical in every engine and in
// the single-process reference.
//
// Mini-batch `step` is a fixed set of samples; replica r takes the r-th of dp equal slices and
// cuts it into M micro-batches. Synthetic data is generated per mini-batch from a seed; a real
// data set (the digits images of python3-sklearn) is walked in a seeded random order, one epoch
// after another. Because a mini-batch does not depend on how it is cut, pipelined, data-parallel
// and single-process training see the same samples.
//
// Thread-safety: thread-safe (stage threads of several devices read concurrently).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <ATen/core/Tensor.h>

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The whole mini-batch `step` (samples_per_step samples).
  virtual std::pair<at::Tensor, at::Tensor> mini_batch(int step) = 0;

  // Micro-batch `micro` of replica `replica`'s share of mini-batch `step`.
  at::Tensor input(int step, int replica, int micro);
  at::Tensor target(int step, int replica, int micro);
  // A micro-batch's input of the configured shape, for dry runs (it reads no step).
  at::Tensor example_input();
  // Sets the cut of every step (and forgets the steps cut before).
  void configure(int samples_per_step, int replicas, int micro_batches);

 protected:
  at::Tensor slice(const at::Tensor& t, int replica, int micro) const;
  // A mini-batch of the configured size whose content does not matter (mini_batch(0) here).
  virtual std::pair<at::Tensor, at::Tensor> example_batch() { return mini_batch(0); }
  // Drops the steps cached so far (their samples changed).
  void forget_steps();
  // Samples per step as last configured (a trainer's re-plan may change the data-parallel width
  // and with it the step's samples; configure() is called between windows only).
  int samples_per_step() const { return samples_; }

 private:
  std::pair<at::Tensor, at::Tensor> cached(int step);
  std::mutex mu_;
  std::map<int, std::pair<at::Tensor, at::Tensor>> cache_;
  int samples_ = 1, replicas_ = 1, micro_ = 1;
};

// Synthetic batches drawn by the model's own generators (deterministic in `seed` and the step).
std::unique_ptr<BatchSource> synthetic_batches(const models::LayeredModel& model,
                                               int samples_per_step, uint64_t seed, bool float64);
// The sklearn digits images (8x8, 10 classes) in a seeded order; `as_tokens` for BERT-style
// models (pixel values as token ids).
std::unique_ptr<BatchSource> digits_batches(int samples_per_step, uint64_t seed, bool as_tokens,
                                            bool float64);

}  // namespace pipetwin::exec
