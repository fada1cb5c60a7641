// CostModel: task times, transfer times, collective times and memory terms for one profile on
// one cluster — the single source of costs for the planner, the simulator and the comparison
// (docs/design.md "Cost model terms").
//
//   compute(layer, b)  the profile's t(b) = a + c*b fit (Eigen least squares, linear_fit.hpp),
//                      times compute_scale (the target device's speed relative to the profiled
//                      one). Frozen layers (the first `frozen_layers`) have no backward and no
//                      optimizer step.
//   transfer(bytes)    latency + bytes / bandwidth of the link between the two devices; on a
//                      cluster with a topology, of the slowest resource on its route
//                      (core/topology.hpp), and the route's latency.
//   all-reduce(bytes)  core/collective.hpp: ring: 2(n-1)/n * bytes / bw + 2(n-1) * latency over
//                      the slowest link of the ring (inter-node as soon as the ring spans nodes);
//                      with a topology the fastest of ring, tree and hierarchical at the rates
//                      the shared links leave.
//   buckets            DDP's: gradients in reverse layer order, first bucket capped at 1 MiB, the
//                      rest at 25 MiB (PyTorch defaults), a bucket closing once it reaches its cap.
//   memory terms       per stage: parameters + gradients + optimizer state of active layers,
//                      frozen layers at lambda_frozen times that (PipeTransformer Section 3.1:
//                      "the memory footprint ratio of a frozen layer over the same active layer",
//                      1/6), activations saved per micro-batch and the stage input kept for it,
//                      and the working memory of a backward (backward_working_bytes below).
//                      How many micro-batches are alive at once is the schedule's business:
//                      memory.hpp walks the schedule.
//   tensor parallel    a shard's profile (Profile::tensor_parallel, core/tensor_parallel.hpp):
//                      each layer's collectives, priced over the group's devices
//                      (CostOptions::tp_group) by the all-reduce model below, a reduce-scatter or
//                      an all-gather as half of an all-reduce of the same bytes (the two halves of
//                      the ring), are added to its forward (and its recompute: a full recompute
//                      runs them again) and its backward. In the backward Megatron-LM overlaps
//                      the input-gradient all-reduce with the weight-gradient GEMM of the
//                      column-parallel linear (Shoeybi et al. 2019; Narayanan et al. 2021,
//                      Section 4.2): exposed is what exceeds half the layer's weight-gradient
//                      time (the column-parallel linear's share of it in an MLP block, less than
//                      that in attention's). StageCost::tp_*_s say how much of each pass is the
//                      group's.
//   distributed opt.   CostOptions::optimizer_shards = dp (ZeRO-1): optimizer state and its step
//                      divided over the replicas.
//   framework          CostOptions::framework (core/framework.hpp): its compute scale multiplies
//                      every compute time, its layer launch is added to each layer's forward,
//                      backward and recompute, its per-micro-batch term to each stage pass, its
//                      per-iteration term to each stage's optimizer step, and its communication
//                      scale multiplies transfers and all-reduces. The identity changes nothing.
//
// Thread-safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "core/linear_fit.hpp"
#include "core/model_graph.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"
#include "core/tensor_parallel.hpp"

namespace pipetwin {

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

struct CostOptions {
  double compute_scale = 1.0;            // multiply profiled times by this
  double bucket_cap_bytes = 25 * kMiB;   // DDP bucket_cap_mb
  double first_bucket_bytes = 1 * kMiB;  // DDP's smaller first bucket
  int frozen_layers = 0;                 // layers [0, frozen_layers) are frozen
  double lambda_frozen = 1.0 / 6.0;
  Framework framework;  // the framework's overheads and efficiency scales (identity: none)
  // The distributed optimizer's shards (ZeRO-1, core/plan.hpp): optimizer state and step divided
  // by this; 1: every replica keeps and steps all of it.
  int optimizer_shards = 1;
  // Cluster devices of a tensor-parallel group, for a shard's profile; empty: 0 .. t - 1.
  std::vector<int> tp_group{};
};

struct LayerFits {
  LinearFit forward, backward, recompute;
  LinearFit backward_weight;     // the weight-gradient half of backward (see backward_weight_s)
  LinearFit contended;           // contention factor vs micro-batch size (forward)
  LinearFit contended_backward;  // the backward's
  std::vector<LinearFit> cold_forward, cold_backward;  // per cold pause, vs micro-batch size
};

// Everything the engines need to know about one stage at one micro-batch size.
struct StageCost {
  std::vector<int> layers;
  double micro_batch = 0;  // samples per micro-batch these figures are for
  double forward_s = 0;
  double backward_s = 0;
  // The weight-gradient half of backward_s (W of a split backward; the input half I is the rest).
  double backward_weight_s = 0;
  double recompute_s = 0;
  double optimizer_s = 0;
  // The step that writes a new weight version while the old one is still read (Profile).
  double optimizer_new_version_s = 0;
  // The same while a device sharing the compute core works too (equal without contention).
  double forward_shared_s = 0;
  double backward_shared_s = 0;
  double backward_weight_shared_s = 0;
  double recompute_shared_s = 0;
  double optimizer_shared_s = 0;
  double optimizer_new_version_shared_s = 0;
  // Cold starts: per wait of the profile's cold_pauses_s, what a forward (and a recompute) and a
  // backward cost more when they start after their device waited that long, at the unshared
  // speed (the profile's figures over the contention factor); empty: not measured.
  std::vector<double> cold_forward_s, cold_backward_s;
  double input_bytes = 0;  // per micro-batch: activations received (or the model input)
  double saved_bytes = 0;  // per micro-batch: activations kept for backward
  // Per micro-batch: the most a backward holds on top of the saved activations (gradients in
  // flight between layers and a layer's parameter gradients before accumulation; memory.hpp).
  double backward_bytes = 0;
  // Per micro-batch: the most a running forward holds above what it leaves behind (a layer's
  // workspace on top of the activations the layers before it saved; Profile's
  // forward_workspace_bytes_per_sample): with the activations saved (forward, recompute), and
  // without (a forward whose micro-batch is recomputed later keeps only its input).
  double forward_bytes = 0;
  double forward_nograd_bytes = 0;
  double param_bytes = 0;  // active layers
  double grad_bytes = 0;   // active layers
  double optimizer_bytes = 0;
  double frozen_bytes = 0;  // frozen layers' footprint (lambda_frozen of their active footprint)
  // The parts of forward_s, backward_s and recompute_s the tensor-parallel group's collectives
  // take (0 without tensor parallelism).
  double tp_forward_s = 0, tp_backward_s = 0, tp_recompute_s = 0;
  // The distributed optimizer's all-gather of the updated parameters, part of optimizer_s (set by
  // PlanContext, which knows the replicas' devices; 0 otherwise).
  double parameter_gather_s = 0;
  std::vector<Bucket> buckets;                // DDP buckets, reverse layer order
  std::vector<double> bucket_ready_s;         // offset into the backward at which bucket b is ready
  std::vector<double> bucket_weight_ready_s;  // the same into a BackwardWeight (split backward)
  double static_bytes() const { return param_bytes + grad_bytes + optimizer_bytes + frozen_bytes; }
};

// The share of a layer's backward that a split backward's weight half (W) takes, where a profile
// did not measure it (LayerTiming::backward_weight_s): half for a layer with parameters — a
// linear layer's input and weight gradients are two matrix products of equal FLOPs (dX = dY W^T,
// dW = X^T dY; Qi et al. 2024, Section 2, take T_B = T_W likewise; attention products and
// normalisation add a little to the input half, which the estimate leaves out) — and none for a
// layer without parameters or one whose weight gradients the executor computes with its input
// gradient: it defers the weight gradients of linear layers only, as Qi et al.'s implementation
// does, so embeddings, convolutions (kind "conv", ResNet's "residual" blocks) and normalisation
// layers have no W (exec/runtime/weight_grad_store.hpp).
double estimated_weight_share(const LayerProfile& layer);

class CostModel {
 public:
  CostModel(Profile profile, const Cluster& cluster, CostOptions options = {});

  const Profile& profile() const { return profile_; }
  const Cluster& cluster() const { return cluster_; }
  const ModelGraph& graph() const { return graph_; }
  const CostOptions& options() const { return options_; }
  int num_layers() const { return profile_.num_layers(); }
  bool frozen(int layer) const { return layer < options_.frozen_layers; }

  double forward_s(int layer, double b) const;
  double backward_s(int layer, double b) const;
  // The weight-gradient part of backward_s: the profile's backward_weight_s where it was
  // measured, else estimated_weight_share() of it.
  double backward_weight_s(int layer, double b) const;
  double recompute_s(int layer, double b) const;
  double optimizer_s(int layer) const;              // in place (its shard's, distributed)
  // The tensor-parallel group's collectives inside layer's forward and, exposed, its backward
  // (included in forward_s, recompute_s and backward_s); 0 without tensor parallelism.
  double tp_forward_s(int layer, double b) const;
  double tp_backward_s(int layer, double b) const;
  // One collective of the group, `bytes` per rank.
  double tp_collective_s(CollectiveKind kind, double bytes) const;
  const std::vector<int>& tp_group() const { return tp_group_; }
  double optimizer_new_version_s(int layer) const;  // into a new weight version
  // Slow-down of a layer's forward (and recompute) while a device sharing its compute core works
  // too (>= 1), with the framework's contention_scale; of its backward (and optimizer step).
  double contention(int layer, double b) const;
  double contention_backward(int layer, double b) const;
  // What the layer's forward / backward costs more after its device waited cold_pauses()[i],
  // at the unshared speed (StageCost::cold_forward_s); 0 where the profile has no cold figures.
  double cold_forward_s(int layer, double b, size_t pause) const;
  double cold_backward_s(int layer, double b, size_t pause) const;
  const std::vector<double>& cold_pauses() const { return profile_.cold_pauses_s; }
  // Compute-time multiplier of cluster device d: the profile's core_slowdown of the core a CPU
  // device runs on (the executor pins device d to core d mod cores); 1 for other devices.
  double device_slowdown(int device) const;
  const LayerFits& fits(int layer) const { return fits_[static_cast<size_t>(layer)]; }

  double transfer_s(double bytes, int device_a, int device_b) const;
  double allreduce_s(double bytes, const std::vector<int>& devices) const;

  std::vector<Bucket> ddp_buckets(const std::vector<int>& layers) const;
  StageCost stage_cost(const std::vector<int>& layers, double micro_batch) const;
  // What a backward of one micro-batch of these layers holds besides their saved activations, at
  // its most: while autograd differentiates layer l it holds the gradient of l's output (for the
  // stage's last layer: the gradient received from the next stage), the gradient of l's input
  // it is producing (none for the model input or a frozen producer), and the gradients of l's
  // parameters before they are added into the step's gradient buffers; the layers after l in the
  // stage have released their saved activations by then (autograd frees a node's saved tensors
  // as soon as it has run), and l its output unless it is the stage's. The maximum over the
  // stage's active layers, in backward order.
  double backward_working_bytes(const std::vector<int>& layers, double micro_batch) const;
  // The most layer l's backward holds above what was alive before the stage's backward began,
  // before the saved activations released by the layers after it (backward_working_bytes).
  double layer_backward_peak(int l, double micro_batch, bool stage_output, double input_grad,
                             bool reads_skip) const;
  // StageCost::forward_bytes and forward_nograd_bytes of `layers` at `micro_batch`.
  std::pair<double, double> forward_working_bytes(const std::vector<int>& layers,
                                                  double micro_batch) const;
  // Bytes per sample crossing between stages, given each layer's stage.
  std::vector<StageEdge> stage_edges(const std::vector<int>& stage_of_layer) const;

 private:
  // The profile's contention (>= 1), as its co-runner measured it; and the framework's scale on it.
  double measured_contention(int layer, double b) const;
  double measured_contention_backward(int layer, double b) const;
  double with_framework_contention(double measured) const;
  void fit_cold(const LayerProfile& layer, const std::vector<double>& b);  // into fits_.back()
  // The framework's per-micro-batch and per-iteration terms on a stage's passes and step.
  void add_framework_passes(StageCost& c) const;
  void fit_tensor_parallel();  // tp_forward_ and tp_backward_ from the profile's collectives

  Profile profile_;
  Cluster cluster_;
  CostOptions options_;
  ModelGraph graph_;
  std::vector<LayerFits> fits_;
  std::vector<double> links_;  // the topology's link resources (empty without one)
  double scale_ = 1;           // compute_scale x the framework's compute scale
  double launch_s_ = 0;        // the framework's layer launch
  double comm_scale_ = 1;      // the framework's communication scale
  std::vector<int> tp_group_;  // a tensor-parallel group's cluster devices (size t)
  // Per layer: its collectives' time, forward and backward, as a + c b (exact: each is latency
  // plus bytes over a rate, bytes proportional to b); empty without tensor parallelism.
  std::vector<LinearFit> tp_forward_, tp_backward_;
};

}  // namespace pipetwin
