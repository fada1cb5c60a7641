#include "cli/plan_flags.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/precision.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::cli {

namespace {

// --dtype's help: the analytic verbs resolve a profile for the precision, train runs in it.
constexpr const char* kDtypeHelp =
    "training precision: float32, bfloat16 or float16 (mixed precision: 2-byte weights and "
    "activations, float32 master weights; float16 trains on CUDA only, with loss scaling), "
    "float64 (default: the profile's, for train the plan's; analytic float32)";

using F = PlanFlags;

struct FlagSpec {
  PlanFlag flag;
  const char* names;
  std::string help;
  std::variant<std::string F::*, int F::*, bool F::*> value;
  bool show_default;  // --help shows the default
};

std::string schedule_names() {
  std::vector<std::string> names;
  for (const auto& info : schedule_catalog()) names.push_back(info.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// A count flag that takes "auto" (0) or a positive integer (-M, --virtual-stages); anything else
// is an InputError naming the flag and the value ("--chunks must be positive (0 < 1)").
int parse_count_or_auto(const std::string& text, const char* flag) {
  if (text == "auto") return 0;
  int count = 0;
  try {
    size_t used = 0;
    count = std::stoi(text, &used);
    if (used != text.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw InputError(
        fmt::format("{}: expected a positive integer or auto, got \"{}\"", flag, text));
  }
  if (count < 1) throw InputError(fmt::format("{} must be positive ({} < 1)", flag, count));
  return count;
}

// One entry a flag, in --help's order.
const std::vector<FlagSpec>& flag_specs() {
  static const std::vector<FlagSpec> specs = {
      {PlanFlag::kModel, "--model", "model name: zoo name or uniform:layers=L,fwd_ms=f,...",
       &F::model, false},
      {PlanFlag::kProfile, "--profile",
       "profile JSON (instead of the shipped or analytic one of --model)", &F::profile, false},
      {PlanFlag::kCluster, "--cluster", "cluster file or name in hardware/clusters", &F::cluster,
       true},
      {PlanFlag::kCatalog, "--catalog", "hardware catalog folder (default: hardware/)", &F::catalog,
       false},
      {PlanFlag::kDtype, "--dtype", kDtypeHelp, &F::dtype, false},
      {PlanFlag::kOptimizer, "--optimizer",
       "sgd, momentum or adam: the optimizer's state and step time (default: what the profile "
       "was measured with; analytic adam)",
       &F::optimizer, false},
      {PlanFlag::kStages, "-K,--stages", "pipeline length K in devices", &F::stages, true},
      {PlanFlag::kSchedule, "--schedule", schedule_names(), &F::schedule, true},
      {PlanFlag::kVirtualStages, "--virtual-stages",
       "model chunks per device: v x K stages in the schedule's layout, or auto: the schedule's "
       "(2 for zbv and dualpipev, else 1; interleaved-1f1b takes any v)",
       &F::virtual_stages, true},
      {PlanFlag::kBatch, "-B,--batch", "global batch size (samples per optimizer step)", &F::batch,
       true},
      {PlanFlag::kChunks, "-M,--chunks", "micro-batches per mini-batch, or auto", &F::chunks, true},
      {PlanFlag::kPartitioner, "--partitioner",
       fmt::format("{}", fmt::join(partitioner_names(), ", ")), &F::partitioner, true},
      {PlanFlag::kDp, "--dp", "data-parallel width (pipeline replicas)", &F::dp, true},
      {PlanFlag::kCheckpointMode, "--checkpoint-mode", "none (default), except_last or always",
       &F::checkpoint_mode, false},
      {PlanFlag::kCheckpoint, "--checkpoint",
       "checkpoint all micro-batches but the last (--checkpoint-mode except_last)", &F::checkpoint,
       false},
      {PlanFlag::kFrozen, "--frozen", "number of leading frozen layers", &F::frozen, true},
      {PlanFlag::kIterations, "--iterations",
       "mini-batches a simulation runs (default: the schedule's); plan writes it into the plan "
       "for simulate and run",
       &F::iterations, false},
  };
  return specs;
}

CLI::Option* add_flag(CLI::App* cmd, PlanFlags* flags, const FlagSpec& spec) {
  std::string help = spec.help;
  if (spec.flag == PlanFlag::kSchedule && flags->schedule_auto)
    help += ", or auto: the fastest synchronous schedule that fits";
  CLI::Option* option = std::visit(
      [&](auto member) {
        auto& value = flags->*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
          return cmd->add_flag(spec.names, value, help);
        } else {
          return cmd->add_option(spec.names, value, help);
        }
      },
      spec.value);
  return spec.show_default ? option->capture_default_str() : option;
}

}  // namespace

std::vector<PlanFlag> all_plan_flags() {
  std::vector<PlanFlag> out;
  for (const auto& spec : flag_specs()) out.push_back(spec.flag);
  return out;
}

void add_plan_flags(CLI::App* cmd, PlanFlags* flags, const std::vector<PlanFlag>& which) {
  for (const auto& spec : flag_specs()) {
    if (std::find(which.begin(), which.end(), spec.flag) != which.end()) add_flag(cmd, flags, spec);
  }
}

CLI::Option* add_dtype_flag(CLI::App* cmd, std::string* dtype) {
  return cmd->add_option("--dtype", *dtype, kDtypeHelp);
}

Checkpoint parse_checkpoint_mode(const std::string& text) {
  Checkpoint c = Checkpoint::kNone;
  if (!parse_checkpoint(text, c)) {
    throw InputError(
        fmt::format("--checkpoint-mode: expected none, except_last or always, got \"{}\"", text));
  }
  return c;
}

int PlanFlags::chunk_count() const {
  return parse_count_or_auto(chunks, "--chunks");
}

int PlanFlags::virtual_stage_count() const {
  return parse_count_or_auto(virtual_stages, "--virtual-stages");
}

Checkpoint PlanFlags::checkpoint_kind() const {
  if (!checkpoint_mode.empty()) return parse_checkpoint_mode(checkpoint_mode);
  return checkpoint ? Checkpoint::kExceptLast : Checkpoint::kNone;
}

void PlanFlags::check_precision() const {
  if (!dtype.empty()) dtype_bytes(dtype, "--dtype");
  if (!optimizer.empty()) parse_optimizer(optimizer, "--optimizer");
}

ResolveOptions PlanFlags::precision() const {
  ResolveOptions o;
  o.dtype = dtype;
  o.optimizer = optimizer;
  return o;
}

sim::PlanRequest PlanFlags::request(const Catalog& catalog) const {
  Cluster target = load_cluster(cluster, catalog);
  Profile resolved = resolve_profile(model, profile, target.device, precision());
  // The flags are checked in the order the initialisers run (member order).
  return {.model = model,  // "": the profile's (sim::base_plan)
          .profile = std::move(resolved),
          .cluster = std::move(target),
          .catalog = &catalog,
          .stages = stages,
          .schedule = schedule,
          .virtual_stages = virtual_stage_count(),
          .batch_size = batch,
          .chunks = chunk_count(),
          .partitioner = partitioner,
          .dp = dp,
          .checkpoint = checkpoint_kind(),
          .frozen_layers = frozen,
          .iterations = iterations};
}

}  // namespace pipetwin::cli
