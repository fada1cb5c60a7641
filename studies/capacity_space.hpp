// The search space of `pipetwin capacity` (studies/capacity.hpp): every layout `pipetwin plan`
// accepts for a cluster of D devices and a model of L layers, within the request's schedules,
// partitioners and checkpoint modes.
//
//   K    pipeline length in devices, 1..min(D, L / v);
//   dp   data-parallel width dividing the global batch B, K x dp <= D;
//   v    model chunks per device: the schedule's (2 for zbv and dualpipev), for interleaved-1f1b
//        2 and, where the model has 4K layers, 4 (schedule_candidates, studies/sweep/evaluate.hpp,
//        as `plan --schedule auto`);
//   M    every divisor of the per-replica batch B / dp from K up to B / dp (micro-batch 1) that
//        the schedule accepts (schedule_refusal: zbv M >= 2K - 1, dualpipev M >= 2K, interleaved
//        M a multiple of K); fewer than K micro-batches leave a stage idle for the whole fill;
//   the checkpoint modes and the partitioners asked for (a partitioner that places stages itself
//   takes no virtual stages: those pairs are not in the space).
//
// The order is fixed (K, dp, schedule, v, partitioner, checkpoint, M, each ascending in the
// request's order): the search breaks ties between equally fast plans by it, so its answer does
// not depend on which thread finished first.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/schedule/schedule.hpp"

namespace pipetwin::sim {

struct Layout {
  int stages = 1;  // K
  int dp = 1;
  int virtual_stages = 1;                    // v
  int chunks = 1;                            // M
  const std::string* schedule = nullptr;     // into the request's schedules
  const std::string* partitioner = nullptr;  // into the request's partitioners
  Checkpoint checkpoint = Checkpoint::kNone;
};

struct SpaceRequest {
  int devices = 1;  // D: schedule devices of the cluster
  int layers = 1;   // L
  int batch = 1;    // B
  const std::vector<std::string>* schedules = nullptr;
  const std::vector<std::string>* partitioners = nullptr;
  std::vector<Checkpoint> checkpoints;
};

std::vector<Layout> capacity_layouts(const SpaceRequest& request);

// "K=8 dp=1 M=128 1f1b ckpt=always optimal", "K=4 dp=2 M=16 interleaved-1f1b v=2 balance-time":
// a plan in the search's terms (K counts devices; v where a device hosts several stages).
std::string plan_summary(const Plan& plan);

}  // namespace pipetwin::sim
