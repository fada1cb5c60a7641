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

  int num_stages() const { return static_cast<int>(stages.size()); }
  int devices_per_replica() const;  // devices of one pipeline replica, stage replicas included
  bool replicates_stages() const;   // some stage has replicas > 1
  int micro_batch_size() const { return batch_size / (dp * chunks); }
  // Checks the plan's internal consistency; throws InputError prefixed by `origin`.
  void validate(const std::string& origin) const;
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
  std::vector<int> placement;  // global schedule device -> cluster device
};

}  // namespace pipetwin
