// Peak memory per device, read off a schedule.
//
// What a device keeps alive at every action — inputs and graphs of the micro-batches in flight,
// tensors received ahead of their use, stashed weight versions — is the liveness walk's
// (core/schedule/liveness.hpp, the one rule the executor follows too); this module adds their
// bytes as the memory walk (core/memory_walk.hpp, which the partitioners' StageMemory walks in
// counts) steps through each device's list. Every memory event is a compute action, and a device
// runs its compute actions in list order, so walking each device's list gives its exact memory
// curve without any timing: the simulator reports it, the planner refuses plans that exceed a
// device with it, and tests compare it with the executor's measured peak.
//
//   static       parameters + gradients + optimizer state (+ frozen layers, cost_model.hpp)
//   Forward      + the stage input kept for backward, + the saved activations unless the
//                micro-batch is recomputed later (then only the input is kept: checkpointing);
//                while it runs, + its workspace (StageCost::forward_bytes, or
//                forward_nograd_bytes when it keeps nothing: the buffers a layer frees before it
//                returns, such as a convolution's im2col columns, oneDNN's scratchpad and
//                reordered weights, measured by the profiler on the machine it profiles)
//   Recompute    + the saved activations; while it runs, + its workspace (forward_bytes)
//   Backward     while it runs: + its working memory (StageCost::backward_bytes: the gradients
//                between layers and a layer's parameter gradients before accumulation, and the
//                layer's measured workspace (oneDNN's weight-gradient buffers: on an AVX2-only
//                CPU about 4x a convolution's weights, about 1x with AVX-512), less the saved
//                activations already released; cost_model.hpp); after it: - input and
//                saved activations of the micro-batch
//   stashing     + one copy of the stage's parameters per weight version alive besides the
//                current one (pinned by a micro-batch in flight: PipeDream keeps K - k + 1
//                versions on stage k)
//   received     + a tensor from another device from the earliest point it can arrive until the
//                compute that consumes it (the walk's one-hop estimate, an upper bound on what a
//                run holds: a fast next stage can hand a device all M output gradients of a GPipe
//                step before its first backward); given a run's times, from when its copy starts
//                (what that run holds: sim::simulate_memory_in_run). The planner, sweeps and the
//                simulator's report keep the bound.
//
// Checked against the executor's measured peak (tests/exec_memory_test.cpp, every schedule on
// mlp, vit:tiny and bert:tiny) within 10% on every device. Left out: the input gradient a backward
// produces while it waits for its Send (after the backward the device holds less anyway), the
// targets of the last stage, and the host-side data a loader keeps.
//
// The walk runs once per sweep point; the liveness cursor keeps its counts in flat arrays.
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
  double received_bytes = 0;    // tensors received ahead of their consumer, at the peak
  double working_bytes = 0;     // a running pass's working memory at the peak (0: none)
  int max_in_flight = 0;        // most micro-batches forwarded but not yet backwarded
  int max_weight_versions = 1;  // most weight versions of one stage alive at once
};

struct MemoryWalk {
  std::vector<DeviceMemory> devices;
  std::vector<double> after_action;  // bytes in use on the action's device after it (by action id)
};

MemoryWalk walk_memory(const CompiledSchedule& schedule, const std::vector<StageCost>& stages);
// The walk of one run (the simulator's): received tensors held from when their copies start
// (`start`, `end` by action id; core/schedule/liveness.hpp), not from the earliest point the lists
// allow. Never above the untimed walk.
MemoryWalk walk_memory(const CompiledSchedule& schedule, const std::vector<StageCost>& stages,
                       const std::vector<double>& start, const std::vector<double>& end);

}  // namespace pipetwin
