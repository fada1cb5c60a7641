// `pipetwin reproduce ftpipe`: FTPipe (Eliad et al., USENIX ATC'21) on its server, T5-3B on
// 8 x RTX 2080 Ti 11 GB over PCIe 3.0.
//
//   ftpipe.cpp        the entry and its tables
//   ftpipe_plans.cpp  the four pipelines (GPipe / FTPipe x Seq-pipe / Mixed-pipe) and PipeDream's
//                     planner with and without memory limits
//
// FTPipe's two kinds of stage (Section 4.3): "(A) the last stage, which does not recompute (B)
// other stages, which do recompute ... When a block is assigned to the last stage, it uses its
// profile without recomputations". Our simulator prices each action on its own (pipeline_sim.hpp:
// a Recompute action costs the stage's recompute time, and a stage without Recompute actions
// keeps its saved activations in the memory walk), so the last stage's no-recompute profile
// follows from the schedule: `ftpipe-async` emits no Recompute on the last stage, and FTPipe's
// synchronous GPipe below strips them from GPipe's. Candidates of Mixed-pipe are compared by
// simulating exactly that schedule, so the partitioner sees the right profile of every stage.
//
// The cluster, the model, the datasets, the pipelines' rows of Table 4, the partitioners and the
// text are in experiments/reference/ftpipe-entry.json (Data below).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/partition/partitioner.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"
#include "sim/pipeline_sim.hpp"
#include "studies/reproduce/entry_data.hpp"
#include "studies/reproduce/text.hpp"

namespace pipetwin::sim::ftpipe {

// FTPipe's own Seq-pipe partitioner (its two profiles, Section 4.3), named among the data's
// Seq-pipe partitioners beside those of make_partitioner.
inline constexpr const char* kFtpipeSeq = "seq-pipe (FTPipe profiles)";

// One of the four pipelines: its name in the tables, its row of Table 4, the paper's speed-up.
struct PipelineText {
  std::string name, hparams;
  double paper = 0;  // NaN: the paper gives none per task
  Text note;
};

// experiments/reference/ftpipe-entry.json (see its "about").
struct Data {
  Text title;
  std::string hparams_reference, figures_reference;
  Text citation;
  std::string cluster, model;
  bool optimizer_state = false;                               // false: counted as none (Adafactor)
  std::vector<std::pair<std::string, std::string>> datasets;  // Table 4's name, the task's
  PipelineText gpipe_seq, gpipe_mixed, ftpipe_seq, ftpipe_mixed;
  std::vector<std::string> seq_partitioners, mixed_partitioners;
  std::vector<double> memory_fractions;  // of the GPU, tried in order until the walk fits
  struct {
    Text title, run, run_does_not_fit, stages, compute_imbalance, memory_imbalance;
  } speedup;
  struct {
    TableText table;
    int micro_batch = 0;
    std::string communication_dataset;
    Text communication, volume, best_task, encoder_decoder, recompute;
  } figures;
  struct {
    TableText table;
    int micro_batch = 0;
    Text over, last_stage, enforced, refused, simple;
  } pipedream;
  std::vector<Text> assumptions;
};
Data load_data(const ReproContext& context);

// FTPipe's synchronous pipeline: GPipe with every micro-batch checkpointed on every stage but
// the last, which keeps its activations and does not recompute (shape.checkpoint is ignored).
Schedule gpipe_last_stage_no_recompute(PipelineShape shape);

struct Setup {
  const Catalog* catalog = nullptr;
  const Data* data = nullptr;
  Cluster cluster;
  std::string model;
  Profile profile;  // the model on the cluster's GPU, Adafactor (no optimizer state)
  int gpus() const { return cluster.num_devices(); }
};
Setup make_setup(const Catalog& catalog, const Data& data);

// One pipeline: Seq-pipe (contiguous stages, one per GPU) or Mixed-pipe, synchronous (GPipe) or
// asynchronous (FTPipe), `batch` samples per step in `chunks` micro-batches.
struct Run {
  std::string partitioner;  // the one whose partition won
  bool mixed = false;
  bool async = false;
  int batch = 0, chunks = 0;
  Partition partition;
  SimResult sim;
  std::vector<double> peaks;  // per GPU
  bool fits = false;
  double throughput = 0;  // samples/s
  std::string error;      // when no plan fits
};
Run run_pipeline(const Setup& setup, bool mixed, bool async, int batch, int chunks);

// Bytes per sample that cross GPUs, forward (activations; gradients travel the same edges back).
double cross_gpu_bytes_per_sample(const Setup& setup, const Partition& p);

// PipeDream's planner (pipedream-dp) for micro-batch `micro_batch`, memory limits ignored or
// enforced; memory per GPU as PipeDream would run it (weight stashing, no recomputation).
// Memory per GPU of partition `p` run as PipeDream runs it: weight stashing, no recomputation.
std::vector<double> pipedream_memory(const Setup& setup, const Partition& p, int micro_batch);

struct PipeDreamPlan {
  Partition partition;
  std::vector<double> need;  // per GPU
  std::vector<int> stage_of_gpu;
  std::string error;  // the planner found nothing that fits
};
PipeDreamPlan pipedream_plan(const Setup& setup, int micro_batch, bool enforce_memory);

}  // namespace pipetwin::sim::ftpipe
