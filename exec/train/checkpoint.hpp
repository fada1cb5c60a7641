// Checkpoint files: the complete training state of a run, crash-safe: written atomically so a
// killed run resumes where it was, and never left corrupt.
//
// A checkpoint folder holds, per checkpoint, one file per rank and one manifest:
//   step-00000012.rank0.pt, step-00000012.rank1.pt, ...   each rank's state
//   checkpoint.json                                       names the step and the rank files
// The protocol (the trainer drives it, exec/train/trainer.hpp):
//   1. every rank writes its file under a name no earlier checkpoint uses: temporary file in the
//      same folder, fsync, rename, fsync the folder (write_file_atomic);
//   2. the ranks agree that every file is durable (a collective), and rank 0 writes the manifest
//      the same atomic way, with each file's size and FNV-1a 64 hash;
//   3. only then are files that the new manifest does not name removed.
// A crash at any moment leaves checkpoint.json naming a complete, earlier checkpoint whose files
// are still there; a half-written rank file is a temporary file no manifest names.
//
// A rank file is a pickle (torch.save's payload format) of the tuple
//   ("pipetwin.checkpoint.rank", header JSON text, [tensors])
// whose header says, for every tensor, its name, role, shape and dtype:
//   {"format": "pipetwin.checkpoint.rank", "version": 1, "rank", "world", "step", "plan",
//    "progress": {...the trainer's record: epoch position, learning rate, freeze trace, log...},
//    "stages": [{"replica", "stage", "layers": [...], "optimizer_steps",
//                "loss_scaler": {"scale", "growth_tracker"} (only where training scales the loss),
//                "tensors": [{"name": "block0.mlp.fc1.weight", "role": "parameter",
//                             "shape": [64, 16], "dtype": "Float"}, ...]}],
//    "rng_state": i, "data_order": i or -1}
// Roles: parameter, buffer (BatchNorm statistics), momentum (SGD), exp_avg and exp_avg_sq (Adam).
// Tensor names are the model layer's name and the parameter's name inside it, so state is keyed
// by layer, not by stage: restore_stage() finds each tensor by name, which is also how an elastic
// re-plan moves state into a different partition (Trainer::apply).
//
// Loading validates everything with one-line errors naming the file and the field: format and
// version, size and hash against the manifest, rank, world, step and plan fingerprint, and each
// tensor's presence, shape and dtype.
//
// Thread-safety: pure functions over files; one writer per file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/json_io.hpp"
#include "core/plan.hpp"
#include "exec/runtime/optimizer.hpp"

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

class StageRuntime;

inline constexpr const char* kManifestName = "checkpoint.json";
inline constexpr int kCheckpointVersion = 1;

struct NamedTensor {
  std::string name;  // "<model layer>.<parameter>"
  std::string role;  // parameter, buffer, momentum, exp_avg, exp_avg_sq
  at::Tensor value;
};

struct StageState {
  int replica = 0, stage = 0;
  std::vector<int> layers;
  int64_t optimizer_steps = 0;
  // The stage's loss scaler (exec/runtime/loss_scaler.hpp); scale 0: training uses none.
  double loss_scale = 0;
  int loss_scale_growth_tracker = 0;
  std::vector<NamedTensor> tensors;
};

struct RankState {
  int rank = 0, world = 1;
  int64_t step = 0;
  std::string plan;  // plan_fingerprint
  Json progress;     // the trainer's record, the same on every rank
  std::vector<StageState> stages;
  at::Tensor rng_state;   // the default CPU generator's state
  at::Tensor data_order;  // int64 order of the current epoch; undefined: none (endless data)
};

struct ManifestFile {
  int rank = 0;
  std::string file;  // a name in the checkpoint folder
  uint64_t bytes = 0;
  uint64_t fnv1a64 = 0;
};

struct Manifest {
  int64_t step = 0;
  int world = 1;
  std::string plan;
  std::vector<ManifestFile> files;  // one per rank, in rank order
};

uint64_t fnv1a64(std::string_view bytes);
// What must not change for a run to resume bit for bit: model, partition, schedule, M, DP width,
// batch, recomputation, dtype (`precision`: exec/runtime/autocast.hpp precision_tag, "f32", "bf16"
// ...), frozen layers. 16 hex digits.
std::string plan_fingerprint(const Plan& plan, const std::string& precision);
std::string rank_file_name(int64_t step, int rank);  // "step-00000012.rank1.pt"

// Captures a runtime's current weights, buffers and optimizer state, named by model layer.
StageState capture_stage(int replica, const StageRuntime& rt, const models::LayeredModel& model);
// Loads `state` into `rt`, finding each tensor by name and role; InputError naming `origin` and
// the tensor on a missing tensor, a shape or a dtype that differ.
void restore_stage(const StageState& state, StageRuntime& rt, const models::LayeredModel& model,
                   const std::string& origin);

// Writes `state` to dir/rank_file_name(step, rank) atomically and returns its manifest entry;
// RunFailure naming the file when the disk refuses (full, read-only, ...).
ManifestFile write_rank_file(const std::string& dir, const RankState& state);
// Writes dir/checkpoint.json atomically; RunFailure naming it on failure.
void write_manifest(const std::string& dir, const Manifest& manifest);
// dir/checkpoint.json, or nullopt when there is none; InputError naming the file and field.
std::optional<Manifest> read_manifest(const std::string& dir);
// Reads and validates rank `rank`'s file of `manifest`: size and hash, format, header fields.
RankState read_rank_file(const std::string& dir, const Manifest& manifest, int rank);
// Removes checkpoint files of dir that `manifest` does not name (best effort).
void remove_unreferenced(const std::string& dir, const Manifest& manifest);

}  // namespace pipetwin::exec
