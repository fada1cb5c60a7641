// Trainer::Progress: where a training run stands, between windows — what a checkpoint records
// besides the stages' tensors (exec/trainer.hpp).
//
// Thread-safety: owned by the trainer's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/elastic/freeze_trace.hpp"
#include "exec/trainer.hpp"

namespace pipetwin::exec {

struct Trainer::Progress {
  int64_t step = 0;          // global optimizer steps done
  int64_t epoch = 0;         // the epoch under way (epochs finished)
  int64_t epoch_step = 0;    // steps of it done
  int64_t epoch_sample = 0;  // samples of it trained
  double lr = 0;             // the learning rate in effect
  int frozen_layers = 0;
  bool cache = false;                        // AutoCache in use
  int freeze_layers = 0;                     // L of the freeze trace
  std::vector<elastic::FreezeEvent> freeze;  // the freeze trace so far
  // The current epoch so far. loss_sum is this rank's share (its last stages' per-sample
  // losses); after a resume rank 0 holds the whole partial sum.
  double loss_sum = 0;
  int64_t samples = 0, steps = 0;
  double train_s = 0, wall_s = 0, transition_s = 0;
  std::chrono::steady_clock::time_point mark;  // wall clock counted up to here
  std::vector<EpochReport> log;                // finished epochs
  int64_t last_checkpoint = -1;
};

// The eight AutoCache counts of Trainer::take_cache_counts(), from `v` on.
elastic::CacheCounts cache_counts_from(const double* v);

}  // namespace pipetwin::exec
