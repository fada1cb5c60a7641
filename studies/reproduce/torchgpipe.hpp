// `pipetwin reproduce torchgpipe`: torchgpipe (Kim et al. 2020, arXiv 2004.09910), Section 4,
// on its server of 8 x Tesla P40 (22 GiB usable each) on PCIe 3.0.
//
//   torchgpipe.cpp         the entry; Table 1 (ablation of the optimization components)
//   torchgpipe_memory.cpp  Table 3 (U-Net memory benchmark: which (B, C) fit on 1, 2, 4, 8 GPUs)
//   torchgpipe_speed.cpp   Section 4.2.1 (AmoebaNet-D speed) and 4.2.3 (U-Net speed)
//
// The grid (models, batches, M, partitions, schedules, partitioners, the cluster) and the text
// are in experiments/reference/torchgpipe-entry.json (Data below). Common setting, as the paper
// states it: models from the analytic zoo (U-Net(B, C) and
// AmoebaNet-D(L, F) descriptors, profiles/zoo/), float32, plain SGD ("trained by plain SGD",
// Section 4.2.1; "parameters consumes 8 bytes each for itself and its gradients", Section 4.2.2),
// so no optimizer state; GPipe in torchgpipe's clock-cycle order with checkpointing of every
// micro-batch but the last (Section 2), skip tensors carried by portals straight from producer
// to consumer (Section 3.3.1).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework_memory.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "sim/planner.hpp"
#include "studies/reproduce/entry_data.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/reproduce/text.hpp"

namespace pipetwin::sim::torchgpipe {

// How a plan runs: schedule, checkpointing, partitioner.
struct RunSetting {
  std::string schedule;
  Checkpoint checkpoint = Checkpoint::kNone;
  std::string partitioner;
};

// experiments/reference/torchgpipe-entry.json: the grid and the text (see its "about").
struct Data {
  Text title;
  std::string ablation_reference, memory_reference;
  Text citation;
  std::string cluster;
  double explain_above = 0;  // a Table 3 row further off than this (relative) gets a note
  struct Ablation {
    TableText table;
    std::string model;
    int stages = 0, batch = 0, chunks = 0;
    RunSetting run;
    Text not_modelled, utilization, memory, speedup;
  } ablation;
  struct Memory {
    TableText table;
    int batch = 0;
    std::vector<int> chunks, gpu_counts;
    RunSetting pipeline, naive;
    std::vector<int> widths, search_chunks;  // the search for the largest U-Net
    int min_depth = 0;
    Text usage, naive_fits, fits, naive_on_one, largest, deepest;
    Text missing_head, missing_naive, missing_over, missing_under, missing_depth;
  } memory;
  struct Speed {
    std::string partitioner;
    Text no_batch, best_batch;
    struct Model {
      TableText table;
      std::string model, schedule;
      Checkpoint checkpoint = Checkpoint::kNone, checkpoint_one_micro_batch = Checkpoint::kNone;
      std::vector<int> batches, naive_batches, partitions, micro_batches;
      Text naive_note, pipeline_note;
    } amoebanet, unet;
  } speed;
  std::vector<Text> assumptions, closing_notes;
};
Data load_data(const ReproContext& context);

struct Setup {
  const Catalog* catalog = nullptr;
  Cluster cluster;
  // PyTorch's memory on the cluster's GPU (hardware/frameworks.json); none: the walk's bytes.
  std::optional<FrameworkMemory> framework;
  const Data* data = nullptr;
  // What every template may name: the cluster's facts, fragmentation and the data's settings.
  TextArgs args() const;
};

// What torchgpipe's benchmarks report per GPU: torch.cuda.max_memory_cached, the caching
// allocator's reserved peak (core/framework_memory.hpp), without the CUDA context.
double measured_bytes(const Setup& setup, double allocated);

// The zoo model's analytic profile on the cluster's GPU, with plain SGD (no optimizer state).
Profile sgd_profile(const Setup& setup, const std::string& model);

// A plan request for `model` (profile from sgd_profile) on `stages` GPUs of the cluster.
PlanRequest request(const Setup& setup, const std::string& model, const Profile& profile,
                    int stages, const std::string& schedule, int batch, int chunks,
                    Checkpoint checkpoint, const std::string& partitioner);

// Peak tensor bytes per device of a plan (allocated): the memory walk of its simulated run.
std::vector<double> allocated_peaks(const Plan& plan);
// Whether a GPU peak of `allocated` tensor bytes fits the cluster's GPU under the setup's
// framework (FrameworkMemory::fits_after_release).
bool fits(const Setup& setup, double allocated);

ReproTable memory_table(const Setup& setup, const ReferenceTable& ref);
// For every Table 3 memory row more than 10% off the paper: what our model lacks, with the
// row's own numbers.
std::vector<std::string> memory_notes(const Setup& setup, const ReferenceTable& ref,
                                      const ReproTable& table3);
std::vector<ReproTable> speed_tables(const Setup& setup);

}  // namespace pipetwin::sim::torchgpipe
