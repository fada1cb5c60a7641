// Profiler: measures a model's Profile (core/profile.hpp) on this machine.
//
// For each micro-batch size and each layer, in isolation on the layer's real input (the previous
// layers' output): forward time with autograd (what a stage runs), backward time (the last layer
// through the loss), recompute time (the forward again, as checkpointing replays it), each the
// median of `repeats` runs after `warmup` runs; bytes per sample of the output and of everything
// the forward keeps alive for backward (measured by the counting allocator, memory_tracker.hpp);
// parameter and optimizer-state bytes; and the time of the layer's optimizer step. The compute
// thread is pinned and runs `threads` intra-op threads, as the executor's stage threads do.
//
// Thread-safety: call from one thread at a time (it uses the process-wide memory counters).
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"
#include "exec/optimizer.hpp"

namespace pipetwin::exec {

struct ProfileOptions {
  std::vector<int> micro_batches{1, 2, 4, 8};
  int warmup = 2;
  int repeats = 7;
  bool float64 = false;
  int threads = 1;
  bool pin = true;
  uint64_t seed = 1;
  OptimizerConfig optimizer;
  std::string device = "cpu-core";  // catalog name recorded in the profile
};

Profile profile_model(const std::string& model, const ProfileOptions& options);

}  // namespace pipetwin::exec
