// Lower bounds of the capacity search (studies/capacity_search.hpp): what any plan of a layout
// needs at least, in memory and in time, before (and after) it is partitioned, so that the search
// skips whole branches without planning or simulating them.
//
// A layout is K devices per pipeline replica, dp replicas, v model chunks per device (v x K
// stages), M micro-batches of b = batch / (dp x M) samples and a checkpoint mode. For the layers
// l of the model (CostModel: f_l, b_l, r_l the forward, backward and recompute at micro-batch b,
// o_l the optimizer step; s_l the parameters, gradients and optimizer state; a_l the activations
// a micro-batch saves for the backward):
//
//   memory   Every stage holds its static bytes all the time and, once per micro-batch, the
//            activations its layers saved (after the forward; with checkpointing, after the
//            recompute that precedes the backward). A device hosting v stages holds its stages'
//            static bytes and at least the largest of their saved sets, >= their mean. Summed over
//            the dp x K devices: >= dp x (sum s_l + sum a_l / v); the fullest of the P memories
//            they use (P = dp x K, fewer where stream sets of one GPU share its memory,
//            sim/memory_pools.hpp) holds at least that over P, and the device hosting layer l
//            at least s_l + a_l. A layout whose bound exceeds the tensor capacity of a memory
//            (tensor_capacity_bytes: the memory less the framework's) fits under no partition and
//            no schedule.
//   time     A synchronous schedule runs, per device and mini-batch, M forwards and M backwards
//            of its stages, the recomputes (M with checkpoint always, M - 1 with except_last, as
//            core/schedule/builder.cpp recomputes) and one optimizer step, one after another on
//            its compute stream; the simulator charges each at least the cost model's figure
//            (contention and cold starts only add, sim/pipeline_sim.cpp). So the steady iteration
//            is at least the busiest device's work, >= the mean over the K devices of a replica
//            and >= the work of the heaviest layer. After partitioning, plan_time_bound() takes
//            the busiest device of the plan itself. Asynchronous schedules (no flush: an
//            iteration is not a mini-batch of work per device) get no bound (0).
//
// Thread-safety: a LayoutBounds is immutable after construction; concurrent reads are safe.
#pragma once

#include <map>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/framework.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"

namespace pipetwin::sim {

// The shape of a layout, what the bounds depend on (not the schedule's order, not the partition).
struct LayoutShape {
  int stages = 1;          // K: devices per pipeline replica
  int dp = 1;              // pipeline replicas
  int virtual_stages = 1;  // v: model chunks per device
  int chunks = 1;          // M
  Checkpoint checkpoint = Checkpoint::kNone;
  bool asynchronous = false;  // the schedule updates weights without a flush
};

class LayoutBounds {
 public:
  // `batch` is the global batch; the micro-batch sizes batch / (dp x M) it is asked for must
  // divide it. `compute_scale` as the plan's (resolve_compute_scale); `framework` the plans'
  // (core/framework.hpp: its terms only add time or scale it, so the bounds stay lower bounds).
  LayoutBounds(const Profile& profile, const Cluster& cluster, double compute_scale, int batch,
               const Framework& framework = {});

  // Lower bound on the tensor bytes the fullest memory holds.
  double memory_bytes(const LayoutShape& shape) const;
  // Lower bound on the tensor bytes of the fullest stage of a split into contiguous stages, stage
  // k holding `saved_sets[k]` micro-batches of saved activations at once at its peak (the schedule
  // model's most, core/partition/stage_memory.hpp): min over splits of max over stages of
  // s(stage) + saved_sets[k] x a(stage), by bisection on the answer with a greedy split (a stage
  // takes layers while it stays under; optimal, as every stage's bytes grow with its layers). A
  // device, or a memory, holds at least its fullest stage.
  double split_memory_bytes(const LayoutShape& shape, const std::vector<int>& saved_sets) const;
  // What one memory holds for tensors: memory_bytes() above it cannot fit.
  double tensor_capacity_bytes() const { return tensor_capacity_; }
  // Lower bound on the steady iteration time (seconds); 0 for an asynchronous schedule.
  double time_s(const LayoutShape& shape) const;
  // Lower bound on the steady iteration time of a plan whose K stages are contiguous layer ranges,
  // one per device (v = 1; 0 otherwise, and for an asynchronous schedule): its busiest device
  // does at least the work of the fullest stage of the split into K contiguous ranges whose
  // fullest is least (each layer's m (f_l + b_l) + r_l x recomputes + o_l, by bisection on the
  // answer with a greedy split, as split_memory_bytes), at the least slow-down. For the
  // partitioners that cut contiguous stages (optimal, balance-time, balance-size); a device
  // holding few layers then works well above the mean time_s() takes.
  double split_time_s(const LayoutShape& shape) const;

 private:
  // Sums over the layers at one micro-batch size.
  struct Sums {
    double compute = 0;           // sum of f_l + b_l
    double recompute = 0;         // sum of r_l
    double saved = 0;             // sum of a_l
    double layer_memory = 0;      // max of s_l + a_l
    double backward = 0;          // sum of b_l
    double least_contention = 1;  // least slow-down of a layer beside a co-runner
    std::vector<double> f_b;      // f_l + b_l per layer
    std::vector<double> r;        // r_l per layer
  };
  const Sums& sums(int micro_batch) const;

  const Cluster cluster_;
  int batch_ = 1;
  double static_bytes_ = 0;                         // sum of s_l
  std::vector<double> layer_static_, layer_saved_;  // s_l, and a_l per sample
  std::vector<double> optimizer_;  // o_l (the lesser of in place and into a new version)
  double optimizer_sum_ = 0;
  double slowdown_ = 1;  // the least device_slowdown over the cluster's devices
  double tensor_capacity_ = 0;
  std::map<int, Sums> by_micro_batch_;  // every divisor of the batch
};

// Recomputed micro-batches per stage and mini-batch of M.
int recomputes_per_step(Checkpoint checkpoint, int chunks);

// The least slow-down (core/cost_model.hpp contention, forward or backward, >= 1) of any layer at
// this micro-batch while a device sharing its compute core works too.
double least_contention(const CostModel& cost, double micro_batch);
// The most work per second n tasks sharing one compute core get through together, each slowed
// by at least `contention` per co-runner (sim/engine.hpp: with j running a task takes
// 1 + (j - 1)(contention - 1) times its time): max over j <= n of j / (1 + (j - 1)(contention -
// 1)).
double shared_throughput(int n, double contention);

// Per schedule device of one replica, its compute per mini-batch and the backward part of it.
struct DeviceWork {
  std::vector<double> work, backward;
};
DeviceWork device_work(const std::vector<StageCost>& stages, const std::vector<int>& stage_device,
                       int devices, int chunks, Checkpoint checkpoint);
// Lower bound on the iteration from each device's work, the schedule devices placed by
// `placement` (replica r's device d at r x K + d): the busiest device's; where devices share a
// compute core (Cluster::sharing_group), each group's work at its best throughput; with
// serial_backward (one backward at a time per group), each group's backwards in a row.
double work_bound(const CostModel& cost, const std::vector<int>& placement, const DeviceWork& work,
                  double micro_batch);

// Lower bound on the steady iteration time of a planned plan: work_bound() of its own stages (the
// same terms as LayoutBounds::time_s); 0 for an asynchronous schedule or stages replicated within
// the pipeline.
double plan_time_bound(const PlanContext& context);

}  // namespace pipetwin::sim
