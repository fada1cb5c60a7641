// BatchSource: the inputs and targets of every micro-batch, identical in every engine and in
// the single-process reference.
//
// Mini-batch `step` is a fixed set of samples; replica r takes the r-th of dp equal slices and
// cuts it into M micro-batches. Synthetic data is generated per mini-batch from a seed; a real
// data set (the digits images of python3-sklearn) is walked in a seeded random order, one epoch
// after another. Because a mini-batch does not depend on how it is cut, pipelined, data-parallel
// and single-process training see the same samples.
//
// With prefetch on, the first request of mini-batch `step` also starts making `step + 1` on a
// thread of its own, as a data loader's workers prepare the next batch while the model trains on
// this one: the stage that reads the data finds it made, and the step's time is the pipeline's.
// (Without, every step's first forward waited for the whole mini-batch to be drawn: 25 to 30 ms
// of a 140 ms ViT-B/16 step on an H200's host, which the simulator does not and should not
// charge.) The batches are the same either way: each is drawn from its own seeded generators.
//
// Thread-safety: thread-safe (stage threads of several devices read concurrently).
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

class ActivationStore;

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
  // Makes the next mini-batch ahead (above), for a source whose mini_batch() can make any step at
  // any time (synthetic and digits; not a trainer's drawn epochs). The executor turns it on for GPU
  // runs, whose host has cores beside the stage threads; on the CPU a prefetch thread would take a
  // stage's core.
  void set_prefetch(bool on) { prefetch_ = on; }

  // AutoCache's view of the samples (PipeTransformer Section 3.4): the cache of F_frozen's outputs
  // a trainer attached to its data, or none; and the sample ids replica `replica` trains in step
  // `step`, in micro-batch order (empty where the source does not number its samples). The
  // worker reads both through this interface; a trainer's epoch source (exec/train/) answers.
  virtual ActivationStore* frozen_cache() const { return nullptr; }
  virtual std::vector<int64_t> replica_ids(int /*step*/, int /*replica*/) const { return {}; }

 protected:
  at::Tensor slice(const at::Tensor& t, int replica, int micro) const;
  // A mini-batch of the configured size whose content does not matter (mini_batch(0) here).
  virtual std::pair<at::Tensor, at::Tensor> example_batch() { return mini_batch(0); }
  // Drops the steps cached so far (their samples changed).
  void forget_steps();
  // Waits for the batches being made ahead: a class that overrides mini_batch() calls it in its
  // destructor, before its members go (a prefetch thread may be in its mini_batch()).
  void drain();
  // Samples per step as last configured (a trainer's re-plan may change the data-parallel width
  // and with it the step's samples; configure() is called between windows only).
  int samples_per_step() const { return samples_; }

 private:
  using Batch = std::pair<at::Tensor, at::Tensor>;
  Batch cached(int step);
  // The future of mini-batch `step`, made (deferred to its first reader, or on a thread of its own)
  // if no request made it before. Called with mu_ held.
  std::shared_future<Batch> request(int step, std::launch how);
  std::mutex mu_;
  std::map<int, std::shared_future<Batch>> cache_;
  int samples_ = 1, replicas_ = 1, micro_ = 1;
  bool prefetch_ = false;
};

// Synthetic batches drawn by the model's own generators (deterministic in `seed` and the step).
std::unique_ptr<BatchSource> synthetic_batches(const models::LayeredModel& model,
                                               int samples_per_step, uint64_t seed, bool float64);
// The sklearn digits images (8x8, 10 classes) in a seeded order; `as_tokens` for BERT-style
// models (pixel values as token ids).
std::unique_ptr<BatchSource> digits_batches(int samples_per_step, uint64_t seed, bool as_tokens,
                                            bool float64);

}  // namespace pipetwin::exec
