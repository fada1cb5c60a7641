// Schedule: for every device, the ordered list of actions it performs (see action.hpp).
//
// A schedule covers `iterations` mini-batches of `micro_batches` micro-batches each, on
// `replicas` data-parallel copies of a pipeline of `num_stages` stages placed on
// `devices_per_replica` devices. Global device g = replica * devices_per_replica + local device.
// Micro-batches are numbered globally, j = step * M + i, so asynchronous schedules (whose
// mini-batches overlap) and synchronous ones share one numbering.
//
// Within a pipeline replica a stage may itself be replicated (PipeDream's hybrid plans, SOSP'19
// Section 3.1: "15-1" puts stage 0 on 15 workers): stage s then occupies `stage_replicas[s]`
// consecutive devices from `stage_device[s]`, alone, and micro-batch j runs on the stage's device
// j mod stage_replicas[s] — PipeDream's deterministic round-robin (Section 3.3, "1F1B-RR"), so a
// micro-batch's forward and backward meet one replica. The replicas of a stage all-reduce their
// gradients among themselves before each optimizer step, and every stage steps once per
// mini-batch of M micro-batches. PipeDream's runtime instead all-reduces a replicated stage after
// each of its backwards, so there a stage on 15 workers updates once per 15 micro-batches and an
// unreplicated one after each; pipetwin keeps one mini-batch per step for all stages (M a multiple
// of every stage's replica count), so every stage updates on the same samples and single-process
// training stays the reference the executor is checked against.
//
// Generators (one per file in this folder) produce schedules from a PipelineShape; schedules can
// also be written to and read from JSON ("pipetwin.schedule" v1) so users can hand-edit one.
// `control` holds extra ordering a generator needs beyond data dependencies, always between two
// actions of the same device (the executor enforces them locally).
//
// Thread-safety: plain value types.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_io.hpp"
#include "core/schedule/action.hpp"

namespace pipetwin {

// torchgpipe's checkpoint modes: never, all micro-batches but the last, always.
enum class Checkpoint : uint8_t { kNone, kExceptLast, kAlways };
const char* checkpoint_name(Checkpoint c);  // "none", "except_last", "always"
bool parse_checkpoint(const std::string& s, Checkpoint& out);
// A checkpoint mode a user gave (--checkpoint-mode, `flag` in the message); an InputError
// "<flag>: expected none, except_last or always, got \"<text>\"" when it is none of the three.
Checkpoint parse_checkpoint_mode(const std::string& text,
                                 std::string_view flag = "--checkpoint-mode");

// A data edge between two stages: the sum of the model-graph edges crossing them.
struct StageEdge {
  int from = 0;
  int to = 0;
  double bytes_per_sample = 0;
};

// A DDP gradient bucket of one stage: the layers [first_layer, last_layer] (model indices; the
// bucket holds those of the stage's layers) and their gradient bytes. Buckets are numbered in
// reverse parameter order, as DDP fills them during backward.
struct Bucket {
  int first_layer = 0;
  int last_layer = 0;
  double bytes = 0;
};

struct PipelineShape {
  int num_stages = 1;
  std::vector<int> stage_device;    // stage -> (first) device within a replica; empty: s on s
  std::vector<int> stage_replicas;  // stage -> devices it is replicated on; empty: one each
  int devices_per_replica = 0;    // 0: max(stage_device) + 1
  int replicas = 1;               // data-parallel width
  int micro_batches = 1;          // M per mini-batch per replica
  int iterations = 1;             // mini-batches, i.e. optimizer steps per stage
  Checkpoint checkpoint = Checkpoint::kNone;
  std::vector<StageEdge> edges;              // empty: the chain s -> s+1
  std::vector<std::vector<Bucket>> buckets;  // per stage; used when replicas > 1

  // Fills defaults (stage_device, devices_per_replica, edges) and checks ranges; throws
  // InputError naming `origin` on a bad shape.
  void normalize(const std::string& origin);
  // The stage's (first) device within a replica.
  int device_of(int stage) const { return stage_device[static_cast<size_t>(stage)]; }
  // The device within a replica that runs micro-batch `mb` (global index) of `stage`.
  int device_of(int stage, int mb) const {
    const int r = replicas_of(stage);
    return stage_device[static_cast<size_t>(stage)] + (r == 1 ? 0 : mb % r);
  }
  // Devices `stage` is replicated on within a pipeline replica (1: not replicated).
  int replicas_of(int stage) const {
    return stage_replicas.empty() ? 1 : stage_replicas[static_cast<size_t>(stage)];
  }
  // Whether some stage is replicated within a pipeline replica.
  bool replicates_stages() const;
  // Which of its stage's replicas `device` (within a replica) is: device - device_of(stage).
  int stage_replica(int stage, int device) const { return device - device_of(stage); }
  // Whether `device` (within a replica) is one of `stage`'s devices.
  bool hosts(int device, int stage) const {
    const int first = device_of(stage);
    return device >= first && device < first + replicas_of(stage);
  }
  // Devices holding one copy of `stage`'s gradients: its replicas in every pipeline replica.
  int gradient_copies(int stage) const { return replicas * replicas_of(stage); }
  // Those copies' global devices (replica * devices_per_replica + device), replica by replica:
  // the devices that all-reduce the stage's gradients together.
  std::vector<int> gradient_copy_devices(int stage) const;
  std::vector<int> stages_on(int device) const;
  bool one_stage_per_device() const;

 private:
  template <class Bad>
  void check_stage_replicas(const Bad& bad) const;
};

// The first pair of stages (s < t) that share a device where one of them is replicated — a
// replicated stage needs its devices to itself — given each stage's first device and replica
// count; nullopt when there is none. PipelineShape::normalize and Plan::validate both ask.
std::optional<std::pair<int, int>> stages_sharing_a_replicated_device(
    const std::vector<int>& first_device, const std::vector<int>& replicas);

struct ActionRef {
  int32_t device = 0;
  int32_t index = 0;
};

struct ControlDep {
  ActionRef before;  // must finish ...
  ActionRef after;   // ... before this one starts; same device
};

struct Schedule {
  std::string kind;
  PipelineShape shape;
  std::vector<std::vector<Action>> devices;  // global device -> ordered actions
  std::vector<ControlDep> control;
  // Backward reads the weights its forward used (weight stashing) or the current ones.
  bool stashes_weights = true;

  int num_devices() const { return static_cast<int>(devices.size()); }
  size_t num_actions() const;
  const Action& at(ActionRef r) const {
    return devices[static_cast<size_t>(r.device)][static_cast<size_t>(r.index)];
  }
};

Json schedule_to_json(const Schedule& s);
Schedule schedule_from_json(const JsonView& doc);

}  // namespace pipetwin
