// Plan: everything needed to simulate or run one training configuration.
//
// A plan names the model (zoo name or synthetic spec) and carries the profile and the cluster it
// was made for, so one plan file drives both `pipetwin simulate` and `pipetwin run` with nothing
// else (docs/design.md "Formats"). It states the partition (layer -> stage -> device), the
// schedule, the global batch size, the chunk count M, the data-parallel width, checkpointing,
// frozen layers and the DDP bucket sizes. A stage may be replicated within the pipeline
// (`replicas`, PipeDream's "15-1" plans). Format "pipetwin.plan" version 1 (JSON); every field is
// validated on load with an error naming the file and the field.
//
// PlanContext derives, once, what the engines need: the cost model, the pipeline shape, the
// per-stage costs and the placement of replica devices on cluster devices.
//
// Thread-safety: plain value types.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/framework.hpp"
#include "core/json_io.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"
#include "core/tensor_parallel.hpp"

namespace pipetwin {

struct StagePlan {
  std::vector<int> layers;  // model layer indices, in model order
  int device = 0;           // (first) device within a pipeline replica
  // Devices the stage is replicated on within a pipeline replica, from `device` on, each taking
  // every replicas-th micro-batch (PipeDream's hybrid plans; PipelineShape::stage_replicas).
  int replicas = 1;
};

struct Plan {
  std::string model;
  Profile profile;
  Cluster cluster;
  std::string schedule = "gpipe";
  std::string partitioner = "uniform";
  int batch_size = 1;   // samples per optimizer step, over all replicas
  int chunks = 1;       // M: micro-batches per mini-batch per replica
  int dp = 1;           // data-parallel width
  Checkpoint checkpoint = Checkpoint::kNone;
  std::vector<StagePlan> stages;
  std::vector<int> placement;  // (replica * devices_per_replica + device) -> cluster device
  int iterations = 0;          // default for simulate/run; 0: schedule_default_iterations
  double compute_scale = 1.0;
  double bucket_cap_bytes = 25 * kMiB;
  double first_bucket_bytes = 1 * kMiB;
  int frozen_layers = 0;
  double lambda_frozen = 1.0 / 6.0;
  bool cache = false;
  // The framework's overheads and efficiency scales the simulator applies (core/framework.hpp);
  // the identity (no "framework" in the file) changes nothing. `run` measures instead.
  Framework framework;
  // Tensor parallelism (core/tensor_parallel.hpp): every schedule device is a group of t =
  // tensor_parallel.size cluster devices, placement[d] .. placement[d] + t - 1 (`placement` holds
  // each group's first; by default group d starts at d x t), each running one shard of the
  // stage's layers; the profile is that shard's (profile.tensor_parallel equals this). A group
  // stays inside one node unless tp_across_nodes.
  TensorParallel tensor_parallel;
  bool tp_across_nodes = false;
  // ZeRO-1 (Rajbhandari et al., "ZeRO", SC 2020, stage P_os; Megatron-LM's
  // --use-distributed-optimizer): every stage's optimizer state, float32 master weights
  // included, sharded over its dp replicas; the gradients reduce-scattered and the updated
  // parameters all-gathered in place of one all-reduce, each rank stepping its 1/dp.
  bool distributed_optimizer = false;

  int tp() const { return tensor_parallel.size; }
  int num_stages() const { return static_cast<int>(stages.size()); }
  int devices_per_replica() const;  // devices of one pipeline replica, stage replicas included
  bool replicates_stages() const;   // some stage has replicas > 1
  int micro_batch_size() const { return batch_size / (dp * chunks); }
  // Checks the plan's internal consistency; throws InputError prefixed by `origin`.
  void validate(const std::string& origin) const;

 private:
  template <class Bad>
  void validate_placement(const Bad& bad) const;
};

Plan plan_from_json(const JsonView& doc);
Json plan_to_json(const Plan& plan);
Plan load_plan(const std::string& path);
void save_plan(const Plan& plan, const std::string& path);

// Iterations to simulate when none is asked for: enough for a steady state.
int schedule_default_iterations(const std::string& schedule, int num_stages);

struct PlanContext {
  PlanContext(const Plan& plan, int iterations);

  Plan plan;
  CostModel cost;
  PipelineShape shape;
  std::vector<StageCost> stages;
  std::vector<int> placement;  // global schedule device -> cluster device (a group's first)
  // With the distributed optimizer (Plan::distributed_optimizer, dp > 1): a gradient bucket's
  // collective is a reduce-scatter, half of the ring all-reduce it replaces (0.5; else 1), and
  // every stage's optimizer step ends with the all-gather of its updated parameters over its
  // replicas (the other half), added to the step's times (StageCost::parameter_gather_s): the
  // step in Megatron-LM's distributed optimizer without --overlap-param-gather.
  double gradient_reduce_share = 1.0;

 private:
  void add_parameter_gather();
  void add_transfer_host();
};

// The cluster devices of schedule device d's tensor-parallel group: placement[d] .. + t - 1.
std::vector<int> tp_group(const PlanContext& context, int device);

}  // namespace pipetwin
