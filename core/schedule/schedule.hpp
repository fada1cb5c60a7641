// Schedule: for every device, the ordered list of actions it performs (see action.hpp).
//
// A schedule covers `iterations` mini-batches of `micro_batches` micro-batches each, on
// `replicas` data-parallel copies of a pipeline of `num_stages` stages placed on
// `devices_per_replica` devices. Global device g = replica * devices_per_replica + local device.
// Micro-batches are numbered globally, j = step * M + i, so asynchronous schedules (whose
// mini-batches overlap) and synchronous ones share one numbering.
//
// Generators (one per file in this folder) produce schedules from a PipelineShape; schedules can
// also be written to and read from JSON ("pipetwin.schedule" v1) so users can hand-edit one.
// `control` holds extra ordering a generator needs beyond data dependencies, always between two
// actions of the same device (the executor enforces them locally).
//
// Thread-safety: plain value types.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/schedule/action.hpp"

namespace pipetwin {

// torchgpipe's checkpoint modes: never, all micro-batches but the last, always.
enum class Checkpoint : uint8_t { kNone, kExceptLast, kAlways };
const char* checkpoint_name(Checkpoint c);  // "none", "except_last", "always"
bool parse_checkpoint(const std::string& s, Checkpoint& out);

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
  std::vector<int> stage_device;  // stage -> device within a replica; empty: stage s on device s
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
  int device_of(int stage) const { return stage_device[static_cast<size_t>(stage)]; }
  std::vector<int> stages_on(int device) const;
  bool one_stage_per_device() const;
};

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
