// Planner: from a model's profile, a cluster and a few choices, a Plan that fits.
//
// It partitions the layers into K stages with the chosen partitioner, sets the compute scale of
// the cluster's device relative to the profiled one, picks the chunk count M when asked for
// "auto" — the M in [1, 6K] dividing the per-replica batch that the simulator says is fastest,
// as PipeTransformer's AutoPipe chooses M from [K, 6K] by cost — and refuses a plan whose
// predicted peak memory exceeds a device, naming the device and the bytes. The planner lives in
// sim/ because it evaluates candidates with the simulator.
//
// Virtual stages (core/schedule/virtual_stages.hpp): K stays the pipeline length in devices; with
// v model chunks per device (PlanRequest::virtual_stages, by default the schedule's: 2 for zbv and
// dualpipev, else 1) the partitioner cuts the model into v x K contiguous stages and the stages are
// placed as the schedule's layout needs (virtual_stage_layout: interleaved for interleaved-1f1b, a
// V for zbv and dualpipev). Partitioners that place stages themselves (pipedream-dp, mixed-pipe,
// metis) refuse v > 1 in one line. A schedule that cannot run the request (schedule_refusal: its
// layout, too few micro-batches) is refused with its reason before anything is partitioned, and
// chunks=auto tries only the M the schedule accepts. The memory of a device hosting v stages is the
// walk's over all of them: the search bounds each stage by a share of the device (from the whole
// memory down to 1/v of it, the loosest that fits, as for devices sharing one memory below) and
// check_fits() walks the finished plan.
//
// Memory is a constraint inside the search, not only a check at the end (docs/partition-memory.md):
// the searching partitioners (all but uniform and autopipe) get the memory walk's model of the
// schedule being planned (core/partition/stage_memory.hpp: what a stage holds at its position
// under the schedule, M and checkpointing) and stage_memory_limit() as the limit of every stage,
// so they return a partition that fits where one exists; mixed-pipe's candidates are judged by
// a simulation that counts an overflowing plan as unable to run. The finished plan is still
// checked against the walk itself (check_fits). When no partition fits the refusal is one line:
// the partitioner, what was tried, and the leanest need against the limit. With allow_oom the
// planner plans as if memory were unlimited (the partitioners' memory-blind choice).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"

namespace pipetwin::sim {

struct PlanRequest {
  std::string model;  // "": the profile's
  Profile profile;
  Cluster cluster;
  const Catalog* catalog = nullptr;  // for the compute scale; may be null
  double compute_scale = 0;          // > 0: given; 0: resolve_compute_scale()
  int stages = 1;                    // K: pipeline length in devices
  std::string schedule = "gpipe";
  int virtual_stages = 0;  // model chunks per device; 0: default_virtual_stages(schedule)
  int batch_size = 1;
  int chunks = 0;  // 0: auto
  std::string partitioner = "uniform";
  int dp = 1;
  Checkpoint checkpoint = Checkpoint::kNone;
  int frozen_layers = 0;
  int iterations = 0;
  bool allow_oom = false;  // keep a plan that does not fit (for what-if studies)
  // The framework's overheads and efficiency scales (core/framework.hpp), carried into the plan;
  // the identity: none.
  Framework framework{};
  // Tensor parallelism (core/plan.hpp): `profile` must be the shard's (ResolveOptions::
  // tensor_parallel, profiles/model_source.hpp); the plan needs dp x K x t devices.
  TensorParallel tensor_parallel{};
  bool tp_across_nodes = false;
  bool distributed_optimizer = false;  // ZeRO-1 over the dp replicas (core/plan.hpp)
};

// Speed of the cluster's devices relative to the profiled device, as a multiplier on profiled
// times: the cluster's relative_speed if set; the same device: 1; both in the catalog: the ratio
// of peak FLOP/s for the profile's dtype; otherwise 1.
double resolve_compute_scale(const Profile& profile, const Cluster& cluster,
                             const Catalog* catalog);

// The plan with its layers priced by `profile`, the same model measured again (`simulate --plan P
// --profile F`, F read from `origin`): the compute scale resolved again against the default
// catalog. An InputError naming `origin` when the profile is of another model or another number
// of layers than the plan's.
Plan reprice(Plan plan, Profile profile, const std::string& origin);

// A request read once: what the planner decides from the request alone, before anything is
// partitioned. make_plan() resolves its request first and reads this from then on.
struct ResolvedRequest {
  const PlanRequest& request;  // must outlive the resolved request
  int v = 1;                   // model chunks per device: virtual_stages, or the schedule's default
  // stage -> device of the v x K stages in the schedule's layout (virtual_stage_layout; for v = 1
  // stage s on device s, though a partitioner that places stages itself keeps its placement);
  // empty when the request has no layout (see `error`).
  std::vector<int> stage_device{};
  // Why the request cannot be planned at all (one line naming the flag and the value: K, v and the
  // schedule's layout, the partitioner, dp, the batch; with a given chunk count, its divisibility
  // and the schedule's refusal); "" when it can.
  std::string error{};

  int num_stages() const { return v * request.stages; }
  // Why the schedule cannot run the request with M = `chunks` micro-batches (schedule_refusal() of
  // its shape: v x K stages in the schedule's layout on K devices); "" when it can.
  std::string refusal(int chunks) const;
};
ResolvedRequest resolve_request(const PlanRequest& request);

// resolve_request(request).refusal(chunks); InputError when the request cannot be planned at all
// (e.g. the virtual stages do not fit the schedule's layout). A loop over M resolves once instead.
std::string request_refusal(const PlanRequest& request, int chunks);

// The fields of a plan the request fixes before anything is partitioned: the model (the profile's
// when the request names none), profile, cluster, schedule, partitioner, batch, dp, checkpointing,
// frozen layers, iterations and the compute scale (the request's, else resolve_compute_scale());
// no stages yet, M = 1. Every plan starts from it: the planner's candidates, the elastic
// simulator's per-state plans (core/elastic/decision.hpp state_plan) and, through make_plan, the
// capacity search's.
Plan base_plan(PlanRequest request);

Plan make_plan(const PlanRequest& request);
// The same; `memory_note` (when not null) is set to one line when the fastest plan ignoring memory
// (allow_oom's) would not fit: "the fastest partition ignoring memory (M=8, balance [6, 2];
// 120.3 ms/step) needs 92.10 GiB on device 0 (h100-sxm #0) of 80.00 GiB; chose M=4, balance
// [5, 3] (130.2 ms/step), which fits"; else emptied. It plans twice.
Plan make_plan(const PlanRequest& request, std::string* memory_note);

// The memory every stage of `plan` may use for tensors: the cluster device's, less the
// framework's memory on a GPU (tensor_capacity_bytes, sim/memory_pools.hpp); where devices share
// one memory (Cluster::memory_of), an equal share for every schedule device placed on it (dp x
// devices_per_replica devices, placed in order) — what the planner can promise each stage without
// timing the others. There the planner tries looser per-stage limits first, down to this share, and
// keeps the first partition whose stages' peaks add up within the memory.
double stage_memory_limit(const Plan& plan, int devices_per_replica);

// The per-stage limits the planner asks a partitioner for, loosest first, where devices share one
// memory or a device hosts v > 1 stages: from the whole memory (less the framework's) down to
// stage_memory_limit() / v in eight steps. The planner keeps the first partition that fits every
// memory; the capacity search (studies/capacity_screen.hpp) bounds the plan over all of them.
std::vector<double> shared_stage_limits(const Plan& plan, int devices_per_replica, int v);

// Throws InputError naming the first device whose predicted peak memory (tensors plus, on a GPU,
// the framework's memory: sim/memory_pools.hpp) exceeds its capacity.
void check_fits(const Plan& plan);

}  // namespace pipetwin::sim
