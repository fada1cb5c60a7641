// AsyncChain: the steady-state time per micro-batch of PipeDream's asynchronous 1F1B on a chain
// of stages, timed as the simulator times it, for pipedream-dp's as-planned pricing
// (pipedream_dp.hpp; docs/partition-memory.md says why a closed form does not do).
//
// Thread-safety: chain_period_s is a pure function.
#pragma once

#include <vector>

namespace pipetwin {

// A chain pipeline's costs for AsyncChain: per stage the forward and backward of one
// micro-batch and what its step adds once per M micro-batches (step_overhead_s); per border s
// the transfer between stages s and s + 1 (activations forward, gradients back).
struct ChainTimes {
  std::vector<double> forward, backward, step, hop;
  int micro_batches = 1;
};

// The time per micro-batch between the ends of stage 0's optimizer steps in the steady state.
double chain_period_s(const ChainTimes& c);

}  // namespace pipetwin
