// The flags of a plan request, declared once: the model and where it runs (--model, --profile,
// --cluster, --catalog, --dtype, --optimizer) and the plan's choices (-K, --schedule,
// --virtual-stages, -B, -M, --partitioner, --dp, --checkpoint-mode, --checkpoint, --frozen,
// --iterations), each with one help text and one default (PlanFlags' initial values), so that the
// verbs that take them read them alike: `plan` and `sweep` take all of them, `capacity` the
// model's, -B and --partitioner, `train` --dtype (add_dtype_flag). A verb with another default
// sets it in its PlanFlags before adding the flags (capacity: its --partitioner list).
//
// Thread-safety: CLI code runs on the main thread.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/cluster.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/model_source.hpp"
#include "sim/planner.hpp"

namespace pipetwin::cli {

enum class PlanFlag : uint8_t {
  kModel,
  kProfile,
  kCluster,
  kCatalog,
  kDtype,
  kOptimizer,
  kStages,
  kSchedule,
  kVirtualStages,
  kBatch,
  kChunks,
  kPartitioner,
  kDp,
  kCheckpointMode,
  kCheckpoint,
  kFrozen,
  kIterations,
};

struct PlanFlags {
  std::string model, profile, cluster = "local-cpu-2", catalog;
  std::string dtype, optimizer;  // "": the profile's
  int stages = 2;                // K: pipeline length in devices
  std::string schedule = "gpipe";
  bool schedule_auto = false;           // --schedule also takes auto (plan's schedule search)
  std::string virtual_stages = "auto";  // a count, or auto: the schedule's
  int batch = 8;
  std::string chunks = "auto";  // a count, or auto: the planner's fastest M that fits
  std::string partitioner = "uniform";
  int dp = 1;
  std::string checkpoint_mode;  // none, except_last or always; "": none, or --checkpoint's
  bool checkpoint = false;      // --checkpoint: except_last
  int frozen = 0;
  int iterations = 0;  // 0: the schedule's

  // The flags as values; each throws an InputError naming the flag and the value.
  int chunk_count() const;          // 0 for auto
  int virtual_stage_count() const;  // 0 for auto
  Checkpoint checkpoint_kind() const;
  void check_precision() const;      // --dtype and --optimizer name known ones
  ResolveOptions precision() const;  // --dtype and --optimizer
  // The request `plan` makes: the cluster loaded from `catalog`, the profile resolved for its
  // device (profiles/model_source.hpp), every choice as the flags say.
  sim::PlanRequest request(const Catalog& catalog) const;
};

// Every flag, in the order --help lists them.
std::vector<PlanFlag> all_plan_flags();

// Adds the flags `which` to `cmd`, bound to `flags`, whose values are the defaults --help shows.
void add_plan_flags(CLI::App* cmd, PlanFlags* flags, const std::vector<PlanFlag>& which);

// --dtype alone, bound to `dtype` (train and the analytic verbs say the same thing by it: the
// precision training runs in).
CLI::Option* add_dtype_flag(CLI::App* cmd, std::string* dtype);

// --checkpoint-mode's value; an InputError naming the flag when it is none of the three.
Checkpoint parse_checkpoint_mode(const std::string& text);

}  // namespace pipetwin::cli
