// Planner: from a model's profile, a cluster and a few choices, a Plan that fits.
//
// It partitions the layers into K stages with the chosen partitioner, sets the compute scale of
// the cluster's device relative to the profiled one, picks the chunk count M when asked for
// "auto" — the M in [1, 6K] dividing the per-replica batch that the simulator says is fastest,
// as PipeTransformer's AutoPipe chooses M from [K, 6K] by cost — and refuses a plan whose
// predicted peak memory exceeds a device, naming the device and the bytes. The planner lives in
// sim/ because it evaluates candidates with the simulator.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "core/cluster.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"

namespace pipetwin::sim {

struct PlanRequest {
  std::string model;
  Profile profile;
  Cluster cluster;
  const Catalog* catalog = nullptr;  // for the compute scale; may be null
  int stages = 1;
  std::string schedule = "gpipe";
  int batch_size = 1;
  int chunks = 0;  // 0: auto
  std::string partitioner = "uniform";
  int dp = 1;
  Checkpoint checkpoint = Checkpoint::kNone;
  int frozen_layers = 0;
  int iterations = 0;
  bool allow_oom = false;  // keep a plan that does not fit (for what-if studies)
};

// Speed of the cluster's devices relative to the profiled device, as a multiplier on profiled
// times: the cluster's relative_speed if set; the same device: 1; both in the catalog: the ratio
// of peak FLOP/s for the profile's dtype; otherwise 1.
double resolve_compute_scale(const Profile& profile, const Cluster& cluster, const Catalog* catalog);

Plan make_plan(const PlanRequest& request);

// Throws InputError naming the first device whose predicted peak memory exceeds its capacity.
void check_fits(const Plan& plan);

}  // namespace pipetwin::sim
