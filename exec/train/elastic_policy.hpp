// ElasticPolicy: PipeTransformer's decisions, live — when layers freeze and what pipeline the
// active layers get then (`pipetwin train --elastic`; PipeTransformer Sections 3.1-3.3).
//
// At every freeze step (every `interval` epochs or optimizer steps; step T at the end of interval
// T, as core/elastic/freeze_policy.hpp counts them) the policy does what the paper's Figure 3
// shows, in order:
//   1. Freeze algorithm, Equation 1: L_frozen(T) = min(L_frozen(T-1) + alpha (L - L_frozen(T-1)),
//      argmin over the active layers of ||g_l(T)||), on reals as freeze_policy.hpp explains, from
//      the mean per-step gradient norm of each transformer layer since the last freeze step. The
//      trainer measures the norms in the stage runtimes (the gradient each optimizer step
//      applies, after the all-reduce) and sums them over the ranks, so every rank decides the
//      same; a layer's norm is the root of the summed squares of its sub-layers' norms.
//   2. AutoPipe, Algorithm 1 (elastic::AutoPipe, core/elastic/autopipe.hpp, which the policy
//      owns and notifies, as the replay does): the frozen layers (and the embedding below them,
//      transformer_layers.hpp) become F_frozen on the first device of the pipeline; the active
//      attention and MLP sub-layers are balanced by parameter size with F_frozen weighing
//      lambda_frozen; K is halved while Equation 2 holds against the memory of the T = 0
//      partition; a freeze that would leave no active layer is refused (InputError); "Pipe(F_pipe,
//      chunks = get_optimal_chunks(K))": M from [K, 6K] (dividing the per-replica batch) with the
//      shortest iteration the simulator predicts for the plan's profile and cluster.
//   3. AutoDP: dp = devices / K pipeline replicas, each with the per-replica batch of the start
//      (PipeTransformer keeps the per-pipeline batch), replica j on devices j K .. j K + K - 1 as
//      in Figure 7.
//   4. AutoCache (Section 3.4: "it only employs cached activations when the profiler suggests
//      caching can speed up the forward pass"): on when reading one sample's activation at the
//      new boundary (host memory, plus the disk for the share beyond the memory budget) beats
//      its F_frozen forward pass at the per-replica batch.
// Steps 2-4 past the partition are core/elastic/decision.hpp, which the replay
// (sim/elastic_sim.hpp) uses too: the plan of a state, its placement, F_frozen outside the Pipe,
// AutoCache's test; so the live run and its replay decide alike.
// The result is a Transition (a new plan and the frozen count) that Trainer::apply carries out.
// The plan is the one sim/elastic_sim.hpp builds for the same state (the same partition, K, dp,
// and M chosen the same way: F_frozen's forward runs outside the Pipe, so the M candidates are
// timed with it left out), so `pipetwin simulate --elastic --freeze-trace` replays a live run's
// pipeline changes exactly.
//
// Choices the paper leaves open, and ours:
//  - The plan at T = 0 is the one the user gives (`pipetwin plan --partitioner autopipe` makes
//    AutoPipe's); the policy re-plans from the first freeze step on. Equation 2's M_GPU(0) is the
//    AutoPipe partition of the start K, as in the simulator.
//  - A freeze step that leaves the frozen count as it was changes nothing (no re-partition).
//  - With `gradient_norms` off, Equation 1's bound alone decides (Equation 3): a what-if knob,
//    and a deterministic schedule for tests.
//  - The policy's state (T, the real L_frozen, K, the norms since the last freeze step) goes
//    into checkpoints, so a resumed run freezes at the same steps as an uninterrupted one;
//    AutoPipe resumes from the checkpoint's frozen count and K (AutoPipe::restore).
//
// Thread-safety: not thread-safe; the trainer's thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/elastic/autocache.hpp"
#include "core/elastic/autopipe.hpp"
#include "core/elastic/freeze_policy.hpp"
#include "core/elastic/transformer_layers.hpp"
#include "core/json_io.hpp"
#include "core/plan.hpp"

namespace pipetwin::exec {

// A re-plan: the new plan and the transformer layers frozen from now on (the plan's
// frozen_layers counts profile layers; Trainer::apply sets it from this count).
struct Transition {
  Plan plan;
  int frozen_layers = 0;
  // AutoCache from now on (the policy sets it when reading the cache pays off; the trainer's
  // --autocache on/off overrides it).
  bool cache = false;
};

struct ElasticOptions {
  double alpha = 1.0 / 3.0;
  elastic::FreezeUnit unit = elastic::FreezeUnit::kEpoch;
  int interval = 1;
  double lambda_frozen = 1.0 / 6.0;
  bool gradient_norms = true;  // false: Equation 1's bound alone (Equation 3)

  // InputError naming the flag: 0 < alpha < 1, interval >= 1, 0 <= lambda_frozen <= 1.
  void validate() const;
};

class ElasticPolicy {
 public:
  // InputError when the plan cannot be trained elastically: no transformer layers in its
  // profile, several stages on one device, a per-replica batch that does not split.
  ElasticPolicy(const Plan& initial, ElasticOptions options);

  const ElasticOptions& options() const { return options_; }
  int layers() const { return transformer_layers().layers(); }  // L
  const elastic::TransformerLayers& transformer_layers() const {
    return autopipe_.transformer_layers();
  }
  int devices() const { return devices_; }
  int batch_per_replica() const { return batch_; }

  // The gradient norm of each transformer layer, from the squared norms of the profile layers.
  std::vector<double> transformer_norms(const std::vector<double>& squared_by_layer) const;
  // One optimizer step's transformer-layer norms (GradNormAccumulator).
  void observe(const std::vector<double>& norms);
  // Whether a freeze step falls here: after `step` global optimizer steps; `epoch_end`: at the
  // end of epoch `epochs_done` - 1.
  bool due(int64_t step, bool epoch_end, int64_t epochs_done) const;
  // Freeze step T + 1: Equation 1 with the norms observed since the last one; the new frozen
  // count (never smaller than before).
  int freeze_step();
  // AutoPipe and AutoDP for `frozen` transformer layers from the current K (compressing it).
  // InputError when `frozen` is outside 0..L or leaves no layer active (AutoPipe's guard); the
  // policy's pipeline is then unchanged.
  Transition transition(int frozen);
  // The plan of a state: `frozen` transformer layers, pipeline length K (no compression).
  Plan plan_for(int frozen, int K) const;
  // AutoDP after the job lost devices (a rank that died, `train --on-rank-loss continue`): the
  // job has `devices` from now on, fewer than before; K becomes the largest pipeline length not
  // above K that divides them, so every device drives a stage (the paper's K is a power of two
  // and shrinks by halving; a divisor keeps the same property on, e.g., 3 devices), and dp =
  // devices / K. Returns the transition to the current frozen count on them. InputError when
  // `devices` is not in [1, devices()).
  Transition fewer_devices(int devices);
  // AutoCache's inputs: the samples the machine caches, its memory budget, and the read
  // bandwidths (0: host reads at the plan's intra-node link, disk at 2 GB/s, as the simulator).
  void configure_cache(long samples, elastic::CacheConfig config, elastic::CacheCosts costs);
  // Whether caching pays off with `frozen` transformer layers frozen (step 4 above).
  bool cache_pays_off(int frozen) const;

  int T() const { return T_; }
  int frozen_layers() const { return frozen_; }
  int K() const { return autopipe_.layout().K; }
  double initial_memory() const { return autopipe_.initial_memory(); }

  // Checkpointable state, and its inverse (InputError naming `origin` and the field).
  Json state() const;
  void restore(const JsonView& v);

 private:
  // The plan of an AutoPipe layout on the job's devices (AutoDP: dp = devices / K).
  Plan plan_of(const elastic::PipelineLayout& layout) const;
  int choose_chunks(const Plan& base) const;

  Plan initial_;
  ElasticOptions options_;
  elastic::AutoPipe autopipe_;  // the partition, K and M_GPU(0) (Equation 2)
  int devices_ = 1;             // devices of the job (initial K x dp)
  int batch_ = 1;               // samples per pipeline replica per step
  elastic::GradNormAccumulator accumulator_;
  std::vector<std::vector<double>> pending_;  // the norms observed since the last freeze step
  double real_ = 0;                           // L_frozen(T) on reals
  int frozen_ = 0;
  int T_ = 0;
  long cache_samples_ = 0;  // 0: the samples are unknown (no spill share)
  elastic::CacheConfig cache_config_;
  elastic::CacheCosts cache_costs_;
};

}  // namespace pipetwin::exec
