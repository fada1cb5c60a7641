// TrainData: what a training run reads — a training split walked epoch by epoch in a seeded
// order, and a held-out split for evaluation (loss and accuracy per epoch).
//
// digits / digits-tokens: the sklearn digits images (models/dataset.hpp). Sample i is held out
// when i % 5 == 4 (360 of 1797 samples; the file lists the classes in turn, so every class keeps
// about a fifth out), the other 1437 train. The training split is walked by the elastic sampler
// (core/elastic/elastic_sampler.hpp; PipeTransformer Section 3.3, "Dataset Redistribution"): each
// epoch a fresh seeded shuffle, handed out as a stream; every optimizer step takes the next
// dp x b samples (b per pipeline replica, replica r the r-th b of them) and the epoch ends when
// fewer than dp x b are left. Because a step only advances a cursor, the data-parallel width may
// change between any two steps (AutoDP) and still no sample is trained twice in an epoch, and all
// samples of a step weigh the same (1 / (dp x b): the stages scale every sample's loss so).
// Unlike the sampler's own last step of an epoch, which may be short, the executor keeps every
// step full (a micro-batch's shape is fixed for the whole schedule), so the remainder of an epoch
// (fewer than dp x b samples, different ones every epoch) is dropped, as DistributedSampler with
// drop_last does. At B = 32 an epoch is 44 steps (1408 samples) at dp 1 and 22 at dp 2. The
// sampler's position (epoch and cursor) is the data's whole state: a checkpoint stores it and a
// resumed run restores it.
// synthetic: the model's own generator (exec/runtime/data.hpp); an epoch is `steps_per_epoch` steps
// (the data is endless) and the held-out split is `eval_batches` batches drawn from another seed.
//
// AutoCache (exec/runtime/activation_store.hpp) keys F_frozen outputs by the sample ids of the
// training split (0..samples-1, the ids the sampler hands out): replica_ids() says which samples a
// drawn step gives a replica, and the data carries the trainer's ActivationStore to the workers
// (frozen_cache(); null: no cache), since every session of the run shares this source.
//
// Thread-safety: the training BatchSource is thread-safe (stage threads read it concurrently);
// draw(), begin_epoch(), restore() and set_frozen_cache() are called between windows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/elastic/elastic_sampler.hpp"
#include "exec/runtime/data.hpp"

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

class ActivationStore;

// The training split of a finite data set, epoch after epoch, through the elastic sampler.
class EpochBatches : public BatchSource {
 public:
  EpochBatches(at::Tensor inputs, at::Tensor labels, uint64_t seed);
  // A step draw() has drawn: its samples, replica 0's first.
  std::pair<at::Tensor, at::Tensor> mini_batch(int step) override;

  int64_t samples() const { return labels_.size(0); }
  int epoch() const;
  int64_t consumed() const;  // samples of the current epoch drawn so far
  // Full steps of `replicas` x `batch` samples left in the current epoch.
  int64_t steps_left(int replicas, int batch) const;
  // Draws global steps [first_step, first_step + steps), `replicas` x `batch` samples each, from
  // the current epoch (there must be that many full steps left); mini_batch() serves them.
  void draw(int64_t first_step, int64_t steps, int replicas, int batch);
  void begin_epoch(int epoch);
  elastic::ElasticSampler::Position position() const;
  void restore(const elastic::ElasticSampler::Position& position);  // InputError when invalid

  // The sample ids replica `replica` trains in drawn step `step`, in micro-batch order (empty
  // when the step is not drawn).
  std::vector<int64_t> replica_ids(int step, int replica) const override;
  // Inputs of samples [first, first + n) (shapes for the cache's slots).
  at::Tensor sample_inputs(int64_t first, int64_t n) const;
  void set_frozen_cache(ActivationStore* store) { cache_ = store; }
  ActivationStore* frozen_cache() const override { return cache_; }

 protected:
  // The first samples of the split (a dry run's shapes).
  std::pair<at::Tensor, at::Tensor> example_batch() override;

 private:
  at::Tensor inputs_, labels_;
  mutable std::mutex mu_;
  elastic::ElasticSampler sampler_;
  int64_t first_step_ = 0;
  int drawn_replicas_ = 1;
  std::vector<std::vector<int64_t>> drawn_;  // sample ids of each drawn step
  ActivationStore* cache_ = nullptr;
};

struct TrainDataOptions {
  std::string kind = "digits";  // "digits", "digits-tokens" or "synthetic"
  int batch = 1;                // samples per optimizer step
  uint64_t seed = 1;
  bool float64 = false;
  int steps_per_epoch = 8;  // synthetic
  int eval_batches = 4;     // synthetic
};

struct TrainData {
  std::shared_ptr<BatchSource> train;
  EpochBatches* epochs = nullptr;  // `train` when it walks a finite split, for its sampler
  int64_t steps_per_epoch = 0;     // at the batch of the options
  std::vector<std::pair<at::Tensor, at::Tensor>> eval;  // held-out (input, target) batches
  std::string description;                              // "digits: 1437 train, 360 held out"
};

// InputError naming the option on a bad kind, or a batch larger than the training split.
TrainData make_train_data(const TrainDataOptions& options, const models::LayeredModel& model);

}  // namespace pipetwin::exec
