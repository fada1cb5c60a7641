// Elastic decision: what PipeTransformer's controller makes of a state — the plan a pipeline
// state runs (partition, data-parallel width, placement, frozen prefix), F_frozen taken out of
// the Pipe for timing, and AutoCache on or off. One implementation, used by the replay
// (sim/elastic_sim.hpp) and by the live run (exec/train/elastic_policy.hpp), so that they differ
// only in the times they see (docs/design.md "Elastic training").
//
//   placement  AutoDP, Figure 7: a pipeline stays inside a node; with dp / N replicas on each of
//              the N nodes of I devices, replica j of node n runs stage s on cluster device
//              n I + j K + s (elastic::DataParallelLayout::device). Replicas that do not split
//              evenly over the nodes (a job that lost devices) keep the default placement.
//   F_frozen   Section 3.2: the frozen layers' forward runs outside the Pipe ("Pipe(F_pipe, ...)"),
//              so a plan timed for choosing M or replaying an iteration has their forward (and
//              recompute) at zero; the layers stay in the plan (their parameters, lambda_frozen).
//   AutoCache  Section 3.4 ("it only employs cached activations when the profiler suggests
//              caching can speed up the forward pass"): on when reading one sample's activation
//              at the frozen boundary — from host memory, or from disk for the share of a node's
//              samples beyond the memory budget — beats F_frozen's forward per sample at the
//              per-replica batch. Reads default to the cluster's intra-node link (host memory)
//              and 2 GB/s (disk) when not measured.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/elastic/autocache.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"

namespace pipetwin::elastic {

// A pipeline state between two freeze steps.
struct PipelineState {
  int frozen_profile = 0;                // profile layers frozen (F_frozen)
  int K = 1;                             // pipeline length
  int dp = 1;                            // replicas
  int chunks = 1;                        // M
  bool cache = false;                    // AutoCache serves F_frozen's outputs
  std::vector<std::vector<int>> stages;  // profile layers of each stage, K of them
};

// The plan of `s`: `base` (model, profile, cluster, schedule, checkpointing, compute scale) with
// the state's partition ("autopipe"), dp and the per-replica batch, frozen prefix at
// `lambda_frozen`, AutoCache flag and placement (above).
Plan state_plan(const Plan& base, const PipelineState& s, int batch_per_replica,
                double lambda_frozen);

// `profile` with the forward and recompute of its first `frozen_profile` layers at zero.
Profile outside_pipe(const Profile& profile, int frozen_profile);

// Bytes per sample crossing the boundary after `frozen_profile` layers (what AutoCache keeps).
double boundary_bytes(const Profile& profile, int frozen_profile);

// AutoCache's inputs: the samples the job trains on (0: unknown, nothing spills), the cache's
// configuration and read bandwidths (0: the defaults above), the per-replica batch.
struct CacheInputs {
  long samples = 0;
  CacheConfig config;
  CacheCosts costs;
  int batch = 1;
};
CacheCosts resolved_costs(const CacheCosts& costs, const Cluster& cluster);
// Whether AutoCache pays off with `frozen_profile` layers frozen, on `base`'s profile, cluster and
// compute scale.
bool cache_on(const Plan& base, int frozen_profile, const CacheInputs& in);

}  // namespace pipetwin::elastic
