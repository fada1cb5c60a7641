// Elastic simulator: a whole PipeTransformer training run replayed over the cost model
// (DESIGN "Elastic training"; issue 4, "Simulator (pipetwin simulate --elastic)").
//
// The run trains `epochs` epochs of `samples` samples, `batch` samples per pipeline replica per
// optimizer step (PipeTransformer keeps the per-pipeline batch, "around 400 (ViT) and 64
// (BERT)", as replicas are added). Layers freeze as a freeze trace says (a live run's, or any),
// or as the alpha bound alone dictates (Equation 3, every `interval` epochs or steps). At every
// change the simulator does what the system would:
//   AutoPipe   re-partition the active layers (Algorithm 1), halve K while Equation 2 holds,
//              pick M in [K, 6K] by simulating each candidate (the paper profiles them once per
//              K; we cache the choice per state);
//   AutoDP     widen data parallelism to nodes x (devices per node / K) replicas, pipelines kept
//              inside a node as in Figure 7, and time the state new replicas receive;
//   AutoCache  cache the frozen boundary's activations once reading them beats the frozen
//              forward pass, replaying the elastic sampler and the per-machine cache sample by
//              sample, so the epochs that fill or lazily replace the cache cost what they do;
// and adds the transition overheads (Table 4 by default, transition_overheads.hpp).
// Iterations are timed by the pipeline simulator (sim/pipeline_sim.hpp) on a plan per state:
// the frozen layers sit on stage 0 (F_frozen "in the first device of a pipeline") and run their
// forward pass per micro-batch there; with AutoCache that forward is replaced by reading the
// cached activation (host-to-device copy), plus, for samples whose entry is missing or stale,
// the frozen layers still to run and the write-back. Disk traffic of a spilled cache is hidden
// by prefetching unless the disk is slower than the step: a step lasts at least its disk bytes
// over the disk bandwidth.
//
// Reported: the epoch log, total time, speedup over the no-freeze baseline (Pipe + DDP on the
// same hardware: initial K, its replicas, its best M, the start-up overhead; partitioned as
// AutoPipe partitions at T = 0, since the paper does not say how its baseline was partitioned),
// and on request the Figure 9 breakdown: freeze only (frozen layers skip backward and gradient
// sync; same pipeline, same M, no transition cost), + AutoPipe (re-partition and compress, M
// chosen again; freed devices idle), + AutoDP, + AutoCache.
//
// Modelling choices the paper leaves open: F_frozen runs per micro-batch on stage 0 (the paper
// may run it on the whole batch before the pipeline; either way it costs stage 0 its forward
// time); every step of an epoch is timed as a full step (the last one may hold fewer samples);
// a step whose samples need different cache work (after a mid-epoch boundary move) is
// interpolated on a grid of 1/100 of the frozen forward pass; "freeze only" is not slowed by the
// allocator effect of Appendix F.2, which pipetwin does not model.
//
// Thread-safety: pure functions; each call owns its state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/elastic/autocache.hpp"
#include "core/elastic/epoch_log.hpp"
#include "core/elastic/freeze_policy.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "core/elastic/transition_overheads.hpp"
#include "core/json_io.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"

namespace pipetwin::sim {

struct ElasticConfig {
  std::string model;
  Profile profile;
  Cluster cluster;
  double compute_scale = 1.0;  // planner.hpp's resolve_compute_scale
  int stages = 0;              // initial K; 0: the devices of a node
  int batch = 1;               // samples per pipeline replica per step
  int epochs = 1;
  long samples = 0;  // per epoch
  std::string schedule = "gpipe";
  Checkpoint checkpoint = Checkpoint::kNone;
  double lambda_frozen = 1.0 / 6.0;
  // Freezing: the trace when set, else the alpha bound every `interval` epochs or steps.
  std::optional<elastic::FreezeTrace> trace;
  double alpha = 1.0 / 3.0;
  elastic::FreezeUnit unit = elastic::FreezeUnit::kEpoch;
  int interval = 1;
  // Components (Figure 9).
  bool freeze = true;
  bool autopipe = true;
  bool autodp = true;
  bool autocache = true;
  // AutoCache: host memory per machine, bandwidths (0: the intra-node link; disk 2 GB/s).
  elastic::CacheConfig cache;
  elastic::CacheCosts cache_costs;
  elastic::TransitionOverheads overheads = elastic::TransitionOverheads::table4();
  bool state_transfer = true;
  uint64_t seed = 0;

  // Checks the fields; throws InputError naming the first bad one.
  void validate() const;
};

struct TransitionRecord {
  int epoch = 0;
  long sample = 0;  // samples of the epoch trained before it
  long step = 0;    // global optimizer steps before it
  int frozen_layers = 0;
  int K = 1, dp = 1, chunks = 1;
  bool cache = false;
  double overhead_s = 0;        // Table 4 part
  double state_transfer_s = 0;  // AutoDP state to new replicas
};

struct ElasticRun {
  // Figure 9's bars: "no freeze", "freeze only", "freeze + AutoPipe", "freeze + AutoPipe +
  // AutoDP", "freeze + AutoPipe + AutoDP + AutoCache".
  std::string name;
  elastic::EpochLog log;
  std::vector<TransitionRecord> transitions;  // the first one is the start-up
  elastic::FreezeTrace trace;                 // what was replayed
  long samples = 0;
  double total_s = 0;
  double throughput() const { return total_s > 0 ? samples / total_s : 0; }
};

struct ElasticReport {
  ElasticRun elastic;
  ElasticRun baseline;
  double speedup = 0;                 // baseline.total_s / elastic.total_s
  std::vector<ElasticRun> breakdown;  // freeze only, + AutoPipe, + AutoDP, + AutoCache
};

// The report as JSON ("pipetwin.elastic_report" v1): totals, speedup, the breakdown, and each
// run's transitions; the epoch logs are written separately (epoch_log.hpp).
Json elastic_report_to_json(const ElasticReport& report);

// One run with the config's components.
ElasticRun simulate_elastic_run(const ElasticConfig& config);
// The run, the no-freeze baseline and (when `breakdown`) the Figure 9 ablation.
ElasticReport simulate_elastic(const ElasticConfig& config, bool breakdown = false);

}  // namespace pipetwin::sim
