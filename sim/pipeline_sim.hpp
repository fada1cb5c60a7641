// Pipeline simulation: a schedule interpreted against the cost model.
//
// Maps every action of a CompiledSchedule to a task of the discrete-event engine — on its
// device's compute, send, receive or collective stream, with the schedule's dependencies — and
// gives it the cost model's duration: stage forward / backward / recompute / optimizer time (the
// step in place, or into a new weight version where the old one is still read);
// latency + bytes / bandwidth for a transfer (both ends busy for its length); the all-reduce
// algorithm's time (core/collective.hpp) over the replicas of the stage, which may start once its
// bucket's last gradient is produced inside the backward. On a cluster with a topology
// (core/topology.hpp) transfers and all-reduces instead move as flows over the links they share,
// at max-min fair rates recomputed whenever one starts or ends (sim/network/flow_model.hpp). The
// engine's start and end times become a predicted Timeline; memory comes from walking the schedule
// (core/memory.hpp): the tensors, the bytes the executor measures (PyTorch's allocated bytes); on a
// GPU the framework's memory beside them (sim/memory_pools.hpp: caching-allocator reserve,
// workspaces, CUDA context) comes separately; metrics from core/metrics.hpp. On devices that share
// a core, a forward, recompute or backward that starts after its device waited costs the profile's
// cold-start extra for that wait (Profile::cold_pauses_s): the other stage evicted its weights and
// activations meanwhile (engine.hpp, cold starts).
//
// Tensor parallelism (core/tensor_parallel.hpp): a shard's passes include their group's
// collectives (core/cost_model.hpp); the timeline shows them as events on each device's tensor
// stream at the end of the pass that runs them. The distributed optimizer's reduce-scatter and
// all-gather: PlanContext::gradient_reduce_share and StageCost::parameter_gather_s.
//
// PipelineSimulator keeps the task graph, so re-running it (sweeps, benchmarks) only re-runs the
// engine.
//
// Thread-safety: a PipelineSimulator is not thread-safe; give each thread its own.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.hpp"
#include "core/metrics.hpp"
#include "core/plan.hpp"
#include "core/schedule/compiled.hpp"
#include "core/timeline.hpp"
#include "sim/engine.hpp"

namespace pipetwin::sim {

struct SimResult {
  Timeline timeline;
  Metrics metrics;
  // The tensors (the walk's upper bound, core/memory.hpp, which the planner and sweeps judge
  // plans by); the timeline's and metrics' peaks are these.
  MemoryWalk memory;
  // Per schedule device: the framework memory it needs beside memory.devices[d].peak_bytes
  // (framework_bytes_by_device, sim/memory_pools.hpp); 0 on CPU devices.
  std::vector<double> framework_bytes;

  // Schedule device d's peak with the framework's memory: what its GPU must hold for it.
  double peak_with_framework(size_t d) const {
    return memory.devices[d].peak_bytes + framework_bytes[d];
  }
};

// Which of a stage's compute times a run reads (pipeline_sim.cpp): alone, or shared.
struct ComputeTimes;

class PipelineSimulator {
 public:
  // `context` must outlive the simulator.
  PipelineSimulator(const PlanContext& context, CompiledSchedule schedule);

  const CompiledSchedule& schedule() const { return schedule_; }
  const TaskGraph& tasks() const { return tasks_; }

  // Runs the engine only: start/end per action id.
  void run_engine(std::vector<double>& start, std::vector<double>& end);
  SimResult run();
  // The memory walk of the simulated run: received tensors held from when their copies start
  // (core/memory.hpp), what this run holds rather than the upper bound SimResult::memory is.
  MemoryWalk memory_in_run();

 private:
  void share_compute();  // processor sharing of the compute streams, if the cluster has any
  void cold_starts();    // the profile's cold-start figures on the shared compute streams
  void serialize_backward();  // one backward at a time per sharing group (serial_backward)
  double duration(int id) const;
  double shared_duration(int id) const;  // while a device sharing the compute core works too
  // A compute action's time from `times` (alone or shared); none for a transfer or an all-reduce.
  std::optional<double> compute_duration(int id, const ComputeTimes& times) const;
  double slowdown(int id) const { return slowdown_[static_cast<size_t>(schedule_.device(id))]; }
  // An optimizer step that writes a new weight version (core/schedule/weight_versions.hpp).
  bool new_version_step(int id) const {
    return !new_version_step_.empty() && new_version_step_[static_cast<size_t>(id)] != 0;
  }
  std::vector<std::string> device_names() const;
  // Action `id`'s tensor-parallel collectives as an event on its device's tensor stream, at the
  // end of the pass (core/schedule/action.hpp Op::kTensorParallel); none without them.
  void add_tensor_parallel_event(Timeline& t, int id, double start, double end) const;

  const PlanContext& ctx_;
  std::vector<double> slowdown_;  // per schedule device: CostModel::device_slowdown
  CompiledSchedule schedule_;
  std::vector<char> new_version_step_;  // per action id; empty where both steps cost the same
  TaskGraph tasks_;
  Engine engine_;
};

// Generates the plan's schedule (or uses `custom`), compiles, simulates.
SimResult simulate_plan(const PlanContext& context);
SimResult simulate_plan(const PlanContext& context, const Schedule& custom,
                        const std::string& origin);
// `pipetwin simulate --plan`: the action limit checked up front (core/schedule/limits.hpp; its
// InputError names `origin`, the plan's file), then the plan's schedule, or the schedule JSON at
// `schedule_file` when one is given, simulated.
SimResult simulate_checked(const PlanContext& context, const std::string& origin,
                           const std::string& schedule_file);
// The plan's schedule simulated, its memory walked with the run's times (memory_in_run).
MemoryWalk simulate_memory_in_run(const PlanContext& context);

}  // namespace pipetwin::sim
