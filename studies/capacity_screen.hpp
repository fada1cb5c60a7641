// The capacity search's look at a layout before the planner plans it (studies/capacity_search.hpp).
//
// Planning a layout memory-aware (sim/planner.cpp, docs/partition-memory.md) walks the schedule
// once for the partitioner's memory model (core/partition/stage_memory.hpp) and once more to check
// the finished plan, and where a device hosts several stages or shares its memory, partitions and
// checks again at up to eight tighter limits. The model depends on the schedule, M, the checkpoint
// mode and v only — not on the cluster, the partitioner, dp or the model — so the screen keeps one
// per (schedule, M, checkpoint mode, v) for every layout that shares it, and asks the partitioner
// what the planner asks it first:
//
//   - one stage per device, each device its own memory: the planner's one call (the memory limit
//     is the device's tensor capacity). A NoFitError is the planner's refusal; otherwise the
//     partition is the planner's, and the busiest device of the plan it makes bounds the plan's
//     iteration from below (the terms of plan_time_bound, studies/capacity_bounds.hpp) before the
//     plan is made.
//   - otherwise: the planner's first call, each stage limited to the whole memory. A NoFitError
//     there is the planner's refusal (it throws at its loosest limit); a partition tells nothing
//     about the planner's answer, which may come from a tighter limit or be refused by the walk.
//
// Only for the partitioners whose answer depends on the request alone (optimal, balance-time,
// balance-size); the others are left to the planner.
//
// Thread-safety: screen() may be called concurrently; the models are made once, under a mutex.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/stage_memory.hpp"
#include "studies/capacity_space.hpp"

namespace pipetwin::sim {

struct Screened {
  enum class Verdict { kNoFit, kPartitioned, kUnknown };
  Verdict verdict = Verdict::kUnknown;
  double bound_s = 0;  // kPartitioned: lower bound on the plan's iteration time
  // kPartitioned and known to be the planner's: its partition, stage -> device.
  bool exact = false;
  Partition partition;
  std::vector<int> stage_device;
};

class PartitionScreen {
 public:
  // `cost`: the cluster's cost model at the plan's compute scale; `batch`: the global batch.
  Screened screen(const Layout& layout, const Cluster& cluster, const CostModel& cost, int batch);
  // Per stage of the layout's v x K, at least the most micro-batches of saved activations it holds
  // at once (the most `graphs` at its position in one mini-batch of the schedule model,
  // core/partition/stage_memory.hpp).
  std::vector<int> saved_sets(const Layout& layout);

 private:
  // schedule, M, checkpoint, v, mini-batches walked
  using Key = std::tuple<std::string, int, Checkpoint, int, int>;
  const StageMemory& model(const Layout& layout, int iterations);

  std::mutex mutex_;
  std::map<Key, std::unique_ptr<StageMemory>> models_;
};

}  // namespace pipetwin::sim
