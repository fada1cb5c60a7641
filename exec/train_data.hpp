// TrainData: what a training run reads — a training split walked epoch by epoch in a seeded
// order, and a held-out split for evaluation (issue 4: "loss/accuracy" per epoch).
//
// digits / digits-tokens: the sklearn digits images (models/dataset.hpp). Sample i is held out
// when i % 5 == 4 (360 of 1797 samples; the file lists the classes in turn, so every class keeps
// about a fifth out), the other 1437 train. An epoch is floor(1437 / B) optimizer steps of B
// samples: epoch e walks the training split in the order randperm(seed * 7919 + e) and drops the
// remainder (as DistributedSampler with drop_last does), so every replica's share of every step
// is full and each sample is trained at most once per epoch. The order is the data generator's
// whole state: a checkpoint stores the current epoch's order and the step (the sampler's
// position), and a resumed run uses that order (set_order), so it continues the same sequence
// even if the generator changed between versions.
// synthetic: the model's own generator (exec/data.hpp); an epoch is `steps_per_epoch` steps (the
// data is endless) and the held-out split is `eval_batches` batches drawn from another seed.
//
// Thread-safety: the training BatchSource is thread-safe (stage threads read it concurrently);
// order()/set_order() may be called between windows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "exec/data.hpp"

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

// The training split of a finite data set, epoch after epoch in seeded orders.
class EpochBatches : public BatchSource {
 public:
  EpochBatches(at::Tensor inputs, at::Tensor labels, int samples_per_step, uint64_t seed);
  std::pair<at::Tensor, at::Tensor> mini_batch(int step) override;

  int64_t samples() const { return labels_.size(0); }
  int64_t steps_per_epoch() const { return samples() / samples_per_step_; }
  // Indices into the split, in the order of `epoch`; set_order replaces it (a resumed run).
  std::vector<int64_t> order(int64_t epoch);
  void set_order(int64_t epoch, std::vector<int64_t> order);

 private:
  const std::vector<int64_t>& order_locked(int64_t epoch);
  at::Tensor inputs_, labels_;
  int samples_per_step_;
  uint64_t seed_;
  std::mutex mu_;
  std::map<int64_t, std::vector<int64_t>> orders_;
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
  EpochBatches* epochs = nullptr;  // `train` when it walks a finite split, for its order
  int64_t steps_per_epoch = 0;
  std::vector<std::pair<at::Tensor, at::Tensor>> eval;  // held-out (input, target) batches
  std::string description;                              // "digits: 1437 train, 360 held out"
};

// InputError naming the option on a bad kind, or a batch larger than the training split.
TrainData make_train_data(const TrainDataOptions& options, const models::LayeredModel& model);

}  // namespace pipetwin::exec
