// The branch-and-bound behind `pipetwin capacity` (studies/capacity.hpp): over the layouts of
// studies/capacity_space.hpp, every cluster's fastest plan (within the budget) and its cheapest.
//
// Each layout gets its lower bounds first (studies/capacity_bounds.hpp). A layout whose memory
// bound exceeds a memory is skipped: no partition and no schedule fits it. The others are taken
// in the order of their time bound, best first, by a pool of threads; a cluster keeps the best
// plans found so far (its incumbents). A layout is skipped when its time bound can beat neither:
// slower than the fastest (or, at equal time, behind it in the tie order) and dearer than the
// cheapest (time x GPUs x price, the GPUs counted from its K x dp devices); for the partitioners
// that cut contiguous stages, one per device, the bound is first tightened to the least fullest
// contiguous split (LayoutBounds::split_time_s), which needs no memory walk. The rest are planned
// as `pipetwin plan` plans them, memory-aware (sim/planner.hpp: the partitioner gets the
// schedule's memory model and the device's limit, so a partition that fits is found where one
// exists); a layout with no partition that fits is counted as such. A planned layout's bound is
// tightened to its busiest device (plan_time_bound) and checked again before it is simulated.
// Since a bound never exceeds what it bounds, a skipped layout could not have been chosen: the
// answer is the exhaustive enumeration's, at a fraction of the simulations. Ties are broken by
// the space's order (fastest: time, then fewer GPUs, then the order; cheapest: cost, then time,
// then the order), so the answer does not depend on the threads.
//
// Where nothing fits, leanest_layout() says what would: among the leanest corner of the space
// (the longest pipeline with dp = 1, the most micro-batches, the leanest checkpoint mode asked,
// for every schedule and partitioner), the layout that needs the least memory planned
// memory-blind, and the smallest memory on which the memory-aware planner fits it (bisected
// to 0.5%), evaluated on the real cluster: which memory runs out, by how much.
//
// Thread-safety: search_capacity() runs its own threads over read-only inputs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "sim/planner.hpp"
#include "studies/capacity_space.hpp"
#include "studies/sweep/evaluate.hpp"

namespace pipetwin::sim {

struct CapacityRequest;  // studies/capacity.hpp

// One cluster to search, with the model's profile on its device and its price per GPU-hour; with
// tensor parallelism (t > 1) the profile is one shard's and every layout's device is a group of t
// GPUs (the search's D is the cluster's devices over t).
struct CapacityTarget {
  Cluster cluster;
  Profile profile;
  double price = 0;
  TensorParallel tensor_parallel{};
};

// What became of a cluster's layouts.
struct SearchCounts {
  long layouts = 0;       // points of the space
  long memory_bound = 0;  // skipped: the memory bound exceeds a memory
  long time_bound = 0;    // skipped: the time bound beats no incumbent
  long no_fit = 0;        // planned memory-aware: no partition fits
  long refused = 0;       // the planner or the simulator refused (first_error says why)
  long simulated = 0;
};

struct ClusterSearch {
  SearchCounts counts;
  bool fastest_found = false, cheapest_found = false;
  Evaluation fastest, cheapest;  // within the budget / regardless of it
  std::string first_error;
};

// The search's orders, `at` breaking ties (the earlier wins): the fastest by time, then fewer
// GPUs; the cheapest by cost, then fewer GPUs, then time. Times and costs within 1e-9 of each
// other tie (`compare`: -1, 0 or 1).
int capacity_compare(double a, double b);
bool capacity_faster(double t, int gpus, size_t at, double t0, int gpus0, size_t at0);
bool capacity_cheaper(double cost, int gpus, double t, size_t at, double cost0, int gpus0, double t0,
             size_t at0);

// The request for one layout on one target: a fixed M, memory-aware (allow_oom false).
PlanRequest layout_request(const Layout& layout, const CapacityTarget& target,
                           const CapacityRequest& request);

// Searches every target; one result per target, in order.
std::vector<ClusterSearch> search_capacity(const std::vector<CapacityTarget>& targets,
                                           const CapacityRequest& request);

// The leanest layout of `target` (see above); !found when the space is empty. `evaluation` is
// on the real cluster (fits false where nothing fits).
struct Leanest {
  bool found = false;
  Evaluation evaluation;
};
Leanest leanest_layout(const CapacityTarget& target, const CapacityRequest& request);

}  // namespace pipetwin::sim
