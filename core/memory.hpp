// Peak memory per device, read off a schedule.
//
// Every memory event is a compute action, and a device runs its compute actions in list order,
// so walking each device's list gives its exact memory curve without any timing: the simulator
// reports it, the planner refuses plans that exceed a device with it, and tests compare it with
// the executor's measured peak.
//
//   static       parameters + gradients + optimizer state (+ frozen layers, cost_model.hpp)
//   Forward      + the stage input kept for backward, + the saved activations unless the
//                micro-batch is recomputed later (then only the input is kept: checkpointing)
//   Recompute    + the saved activations
//   Backward     - input and saved activations of the micro-batch
//   stashing     + one copy of the stage's parameters per extra weight version still referenced
//                by a micro-batch in flight (PipeDream keeps K - k + 1 versions on stage k)
//
// The walk runs once per sweep point, so it keeps its counts in flat arrays (per stage of the
// device, per weight version 0..iterations) and updates the number of alive versions as
// micro-batches enter and leave, instead of recounting maps at every action.
//
// Thread-safety: pure function.
#pragma once

#include <vector>

#include "core/cost_model.hpp"
#include "core/schedule/compiled.hpp"

namespace pipetwin {

struct DeviceMemory {
  double peak_bytes = 0;
  double static_bytes = 0;      // parameters, gradients, optimizer state, frozen layers
  double activation_bytes = 0;  // activations alive at the peak
  double stash_bytes = 0;       // extra weight versions alive at the peak
  int max_in_flight = 0;        // most micro-batches forwarded but not yet backwarded
  int max_weight_versions = 1;  // most weight versions of one stage alive at once
};

struct MemoryWalk {
  std::vector<DeviceMemory> devices;
  std::vector<double> after_action;  // bytes in use on the action's device after it (by action id)
};

MemoryWalk walk_memory(const CompiledSchedule& schedule, const std::vector<StageCost>& stages);

}  // namespace pipetwin
