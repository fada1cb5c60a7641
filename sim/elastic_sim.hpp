// Elastic simulator: a whole PipeTransformer training run replayed over the cost model
// (docs/design.md "Elastic training"; `pipetwin simulate --elastic`).
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
//
// Where the frozen layers run. With AutoPipe, "the frozen layers are extracted from the original
// model and kept in a separate model instance F_frozen in the first device of a pipeline"
// (Section 3.2.1); Algorithm 1 line 35 wraps only F_pipe in Pipe ("Pipe(F_pipe, chunks = ...)")
// and AutoDP wraps only F_pipe in DDP (Appendix D.2). So F_frozen is not pipelined: each replica
// runs it on its whole per-step batch on its first device, under no_grad, before handing the
// result to the Pipe, and the device's stream runs the two one after the other. A step therefore
// lasts the slowest replica's F_frozen work plus the Pipe's iteration (DDP waits for every
// replica). The F_frozen work is the frozen layers' forward at the batch size or, with
// AutoCache, per sample: reading the cached activation (host-to-device copy), running the
// frozen layers still between the entry's boundary and the current one for stale or missing
// entries (Figure 8's lazy replacement), and writing the new entry back. Disk traffic of a
// spilled cache is hidden by prefetching unless the disk is slower than the step: a step lasts
// at least its disk bytes over the disk bandwidth. Without AutoPipe ("freeze only") there is no
// F_frozen: the frozen layers stay in their stages, run forward per micro-batch and skip
// backward (cost_model.hpp), and AutoCache has no F_frozen output to cache, so it stays off.
// The Pipe's iteration comes from the pipeline simulator (sim/pipeline_sim.hpp) on a plan per
// state (F_frozen's layers present on stage 0 with no cost, for their memory).
//
// Communication (Table 2): per step, the time the first replica's all-reduces are in flight,
// gaps between buckets removed (the union of their intervals), as Appendix F.4 measures DDP
// communication; summed over the run's steps.
//
// Reported: the epoch log, total time, communication time, speedup over the no-freeze baseline
// (Pipe + DDP on the same hardware: initial K, its replicas, its best M, the start-up overhead;
// partitioned as AutoPipe partitions at T = 0, since the paper does not say how its baseline was
// partitioned), and on request the Figure 9 breakdown: freeze only (frozen layers skip backward
// and gradient sync; same pipeline, same M, no transition cost), + AutoPipe (F_frozen split off,
// re-partition and compress, M chosen again; freed devices idle), + AutoDP, + AutoCache.
//
// Modelling choices the paper leaves open: every step of an epoch is timed as a full step (the
// last one may hold fewer samples); the F_frozen work of a group of samples is the profile's
// forward time at that group's size; "freeze only" is not slowed by the allocator effect of
// Appendix F.2, which pipetwin does not model; the all-reduces of the K stages each get the
// inter-node link to themselves (the pipeline simulator does not share a node's network card
// between concurrent rings).
//
// Thread-safety: pure functions; each call owns its state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/elastic/autocache.hpp"
#include "core/elastic/epoch_log.hpp"
#include "core/elastic/freeze_policy.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "sim/transition_overheads.hpp"
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
  // get_optimal_chunks' profile of the new state: (M, Pipe iteration in s) for every candidate
  // M in [K, 6K]; empty when M was kept (no AutoPipe).
  std::vector<std::pair<int, double>> chunk_times;
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
  double comm_s = 0;  // DDP communication of the first replica (Appendix F.4), summed over steps
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

// Figure 10(b), "Profiling Optimal Chunk Number": the Pipe's iteration for every candidate M at
// the state AutoPipe and AutoDP reach with `frozen` transformer layers frozen (its K, partition
// and replicas), as get_optimal_chunks profiles it; `best` marks the M the simulator picks.
struct ChunkPoint {
  int frozen = 0, K = 1, dp = 1, chunks = 1;
  double iteration_s = 0;
  double throughput = 0;  // samples/s over all replicas
  bool best = false;
};
std::vector<ChunkPoint> profile_chunks(const ElasticConfig& config, int frozen);

// Section 4.3.5: the fewest frozen transformer layers at which AutoCache turns on (reading a
// sample's cached activation beats its F_frozen forward pass); 0 when it never does.
int cache_threshold_layers(const ElasticConfig& config);

}  // namespace pipetwin::sim
