// The options of a plan request, declared once for the command line (cli/plan_flags.hpp) and the
// Python API (python/bindings/plan_options.hpp): the model and where it runs (--model, --profile,
// --cluster, --catalog, --dtype, --optimizer) and the plan's choices (-K, --schedule,
// --virtual-stages, -B, -M, --partitioner, --dp, --checkpoint-mode, --checkpoint, --frozen,
// --iterations), the framework whose overheads the simulator adds (--framework), and tensor
// parallelism and the distributed optimizer (--tp, --sequence-parallel, --selective-recompute,
// --tp-across-nodes, --distributed-optimizer; core/tensor_parallel.hpp, core/plan.hpp).
//
// Each option has one entry in plan_option_specs() (sim/option_table.hpp): its names, its help
// text, the kind of value it takes and the field of PlanOptions it sets, whose initial value is
// its one default. The CLI binds the table to CLI11 flags, the Python API to keyword arguments of
// the long names (dashes as underscores). PlanOptions turns the values into what the verbs run: the
// PlanRequest `plan` makes (request()), the fixed point of a sweep's grid (point_config()) and
// `plan`'s whole run (plan_with_options()), so that both front ends check the same values in the
// same order and refuse with the same one-line InputError naming the flag. elastic_config() does
// the same for `simulate --elastic`'s options (sim/elastic_options.hpp).
//
// Thread-safety: PlanOptions is a value; the table is built once (a function-local static) and
// read-only afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/model_source.hpp"
#include "sim/elastic_options.hpp"
#include "sim/option_table.hpp"
#include "sim/planner.hpp"
#include "studies/sweep/evaluate.hpp"
#include "studies/sweep/grid.hpp"

namespace pipetwin::sim {

enum class PlanOption : uint8_t {
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
  kFramework,
  kTp,
  kSequenceParallel,
  kSelectiveRecompute,
  kTpAcrossNodes,
  kDistributedOptimizer,
};

struct PlanOptions {
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
  int iterations = 0;     // 0: the schedule's
  std::string framework;  // a framework file (core/framework.hpp); "": none
  int tp = 1;             // tensor-parallel size t (core/tensor_parallel.hpp)
  bool sequence_parallel = false;
  bool selective_recompute = false;
  bool tp_across_nodes = false;
  bool distributed_optimizer = false;

  // The options as values; each throws an InputError naming the flag and the value.
  int chunk_count() const;          // 0 for auto
  int virtual_stage_count() const;  // 0 for auto
  Checkpoint checkpoint_kind() const;
  void check_precision() const;       // --dtype and --optimizer name known ones
  ResolveOptions precision() const;   // --dtype and --optimizer
  Framework framework_terms() const;  // --framework's file; the identity without one
  // --tp, --sequence-parallel, --selective-recompute, checked (--sequence-parallel needs --tp > 1).
  TensorParallel tensor_parallel() const;
  // The request `plan` makes: the cluster loaded from `catalog`, the profile resolved for its
  // device (profiles/model_source.hpp), every choice as the options say.
  PlanRequest request(const Catalog& catalog) const;
  // The point a sweep's grid varies (studies/sweep/grid.hpp): these values, with the sweep's own
  // --micro-batch and --alpha.
  PointConfig point_config(int micro_batch, double alpha) const;
};

// A list option's text split at commas, empty parts dropped ("1f1b,zbv" -> {"1f1b", "zbv"}).
std::vector<std::string> split_commas(const std::string& text);

// The table (sim/option_table.hpp): one entry per PlanOption, in its order.
using PlanOptionSpec = OptionSpec<PlanOptions>;

// Every option, in the order --help lists them.
const std::vector<PlanOptionSpec>& plan_option_specs();
inline const PlanOptionSpec& plan_option_spec(PlanOption option) {
  return spec_of(plan_option_specs(), option);
}
std::vector<PlanOption> all_plan_options();

// What `pipetwin plan` makes of its options: the plan, make_plan's memory note (sim/planner.hpp)
// and, for --schedule auto, every candidate tried (in candidate order).
struct PlannedRequest {
  Plan plan;
  std::string memory_note;
  std::vector<ScheduleTrial> trials;
};

// `pipetwin plan`: checks the options (--dtype, --optimizer, --schedules only with --schedule
// auto, the schedule's name), loads the catalog (--catalog, else the default one), makes the
// request and plans it; with --schedule auto the fastest of `schedules` (empty: the default
// candidates) that fits. `on_search` sees the search and the request before a refusal is thrown
// (the CLI prints them); a search that finds nothing is search_refusal()'s InputError.
PlannedRequest plan_with_options(
    const PlanOptions& options, const std::vector<std::string>& schedules, bool allow_oom,
    const std::function<void(const ScheduleSearch&, const PlanRequest&)>& on_search = {});

// `simulate --elastic`'s run: the catalog (--catalog, else the default one) and the cluster
// loaded, the profile resolved for its device (--model or --profile), then
// ElasticOptions::config().
ElasticConfig elastic_config(const ElasticOptions& options);

}  // namespace pipetwin::sim
