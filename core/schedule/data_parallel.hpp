// Hybrid pipeline + data parallelism: D replicas of the pipeline, each stage's gradients
// summed across its copies by a bucketed ring all-reduce before every optimizer step. A stage's
// copies are its devices in every replica: D of them, or D x r where the stage is itself
// replicated r times within the pipeline (PipelineShape::stage_replicas, PipeDream's hybrid
// plans); each copy holds the gradients of its own micro-batches, each scaled by 1 / batch, so
// the sum is the mini-batch gradient.
//
// As PyTorch DDP does, gradients fill buckets in reverse parameter order (default cap 25 MiB,
// first bucket 1 MiB) and a bucket's all-reduce is launched the moment its last gradient is ready
// during the step's last backward, on its own stream, so communication overlaps the rest of the
// backward (docs/design.md "Cost model terms"). The bucket contents come from the cost model
// (PipelineShape::buckets); this pass only places the AllReduce actions.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

struct ReplicatedLists {
  // devices_per_replica * replicas lists: replica 0's lists with AllReduce actions inserted
  // before each OptimizerStep of a stage with several gradient copies, copied to every replica.
  std::vector<std::vector<Action>> devices;
  // index_map[d][i]: where action i of replica 0's list of device d landed (same in every replica).
  std::vector<std::vector<int32_t>> index_map;
};

ReplicatedLists replicate_data_parallel(const std::vector<std::vector<Action>>& replica0,
                                        const PipelineShape& shape);

}  // namespace pipetwin
