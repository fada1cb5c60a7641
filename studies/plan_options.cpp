#include "studies/plan_options.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/precision.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::sim {

namespace {

using O = PlanOptions;
using K = OptionKind;

// --dtype's help: the analytic verbs resolve a profile for the precision, train runs in it.
constexpr const char* kDtypeHelp =
    "training precision: float32, bfloat16 or float16 (mixed precision: 2-byte weights and "
    "activations, float32 master weights; float16 trains on CUDA only, with loss scaling), "
    "float64 (default: the profile's, for train the plan's; analytic float32)";

std::string schedule_names() {
  std::vector<std::string> names;
  for (const auto& info : schedule_catalog()) names.push_back(info.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// A count option that takes "auto" (0) or a positive integer (-M, --virtual-stages); anything
// else is an InputError naming the flag and the value ("--chunks must be positive (0 < 1)").
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

std::vector<PlanOptionSpec> make_specs() {
  return {
      {"--model", "model name: zoo name or uniform:layers=L,fwd_ms=f,...", &O::model, K::kText,
       false},
      {"--profile", "profile JSON (instead of the shipped or analytic one of --model)", &O::profile,
       K::kPath, false},
      {"--cluster", "cluster file or name in hardware/clusters", &O::cluster, K::kText, true},
      {"--catalog", "hardware catalog folder (default: hardware/)", &O::catalog, K::kPath, false},
      {"--dtype", kDtypeHelp, &O::dtype, K::kText, false},
      {"--optimizer",
       "sgd, momentum or adam: the optimizer's state and step time (default: what the profile "
       "was measured with; analytic adam)",
       &O::optimizer, K::kText, false},
      {"-K,--stages", "pipeline length K in devices", &O::stages, K::kText, true},
      {"--schedule", schedule_names(), &O::schedule, K::kText, true},
      {"--virtual-stages",
       "model chunks per device: v x K stages in the schedule's layout, or auto: the schedule's "
       "(2 for zbv and dualpipev, else 1; interleaved-1f1b takes any v)",
       &O::virtual_stages, K::kCountOrAuto, true},
      {"-B,--batch", "global batch size (samples per optimizer step)", &O::batch, K::kText, true},
      {"-M,--chunks", "micro-batches per mini-batch, or auto", &O::chunks, K::kCountOrAuto, true},
      {"--partitioner", fmt::format("{}", fmt::join(partitioner_names(), ", ")), &O::partitioner,
       K::kText, true},
      {"--dp", "data-parallel width (pipeline replicas)", &O::dp, K::kText, true},
      {"--checkpoint-mode", "none (default), except_last or always", &O::checkpoint_mode, K::kText,
       false},
      {"--checkpoint", "checkpoint all micro-batches but the last (--checkpoint-mode except_last)",
       &O::checkpoint, K::kText, false},
      {"--frozen", "number of leading frozen layers", &O::frozen, K::kText, true},
      {"--iterations",
       "mini-batches a simulation runs (default: the schedule's); plan writes it into the plan "
       "for simulate and run",
       &O::iterations, K::kText, false},
      {"--framework",
       "framework file (pipetwin calibrate --runs): its per-iteration, per-micro-batch and "
       "per-layer overheads and compute / communication scales added to the profile's times "
       "(default: none)",
       &O::framework, K::kPath, false},
      {"--tp",
       "tensor-parallel size t: every stage spans t devices of a node, each holding a 1/t shard "
       "of its layers as Megatron-LM splits them (vit, bert, gpt2)",
       &O::tp, K::kText, true},
      {"--sequence-parallel",
       "with --tp: norms, dropout and residuals split over the sequence too (Korthikanti et al. "
       "2022); all-gather / reduce-scatter pairs in place of the all-reduces",
       &O::sequence_parallel, K::kText, false},
      {"--selective-recompute",
       "recompute the attention core in the backward instead of keeping it (Korthikanti et al. "
       "2022)",
       &O::selective_recompute, K::kText, false},
      {"--tp-across-nodes", "allow a tensor-parallel group to span nodes", &O::tp_across_nodes,
       K::kText, false},
      {"--distributed-optimizer",
       "ZeRO-1: optimizer state and its step sharded over the dp replicas; gradients "
       "reduce-scattered, parameters all-gathered",
       &O::distributed_optimizer, K::kText, false},
  };
}

}  // namespace

const std::vector<PlanOptionSpec>& plan_option_specs() {
  static const std::vector<PlanOptionSpec> specs = make_specs();
  return specs;
}

std::vector<PlanOption> all_plan_options() {
  std::vector<PlanOption> out;
  for (size_t i = 0; i < plan_option_specs().size(); ++i) out.push_back(PlanOption(i));
  return out;
}

int PlanOptions::chunk_count() const {
  return parse_count_or_auto(chunks, "--chunks");
}

int PlanOptions::virtual_stage_count() const {
  return parse_count_or_auto(virtual_stages, "--virtual-stages");
}

Checkpoint PlanOptions::checkpoint_kind() const {
  if (!checkpoint_mode.empty()) return parse_checkpoint_mode(checkpoint_mode);
  return checkpoint ? Checkpoint::kExceptLast : Checkpoint::kNone;
}

void PlanOptions::check_precision() const {
  if (!dtype.empty()) dtype_bytes(dtype, "--dtype");
  if (!optimizer.empty()) parse_optimizer(optimizer, "--optimizer");
}

ResolveOptions PlanOptions::precision() const {
  ResolveOptions o;
  o.dtype = dtype;
  o.optimizer = optimizer;
  o.tensor_parallel = tensor_parallel();
  return o;
}

TensorParallel PlanOptions::tensor_parallel() const {
  if (tp < 1) throw InputError(fmt::format("--tp must be positive ({} < 1)", tp));
  if (sequence_parallel && tp < 2) {
    throw InputError("--sequence-parallel needs --tp > 1: it splits the sequence over the "
                     "tensor-parallel group");
  }
  return {tp, sequence_parallel, selective_recompute};
}

PlanRequest PlanOptions::request(const Catalog& catalog) const {
  Cluster target = load_cluster(cluster, catalog);
  Profile resolved = resolve_profile(model, profile, target.device, precision());
  // The options are checked in the order the initialisers run (member order).
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
          .iterations = iterations,
          .framework = framework_terms(),
          .tensor_parallel = tensor_parallel(),
          .tp_across_nodes = tp_across_nodes,
          .distributed_optimizer = distributed_optimizer};
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Framework PlanOptions::framework_terms() const {
  return framework.empty() ? Framework{} : load_framework(framework);
}

PointConfig PlanOptions::point_config(int micro_batch, double alpha) const {
  const int m = chunk_count();  // the options checked in the order a user reads them
  const int v = virtual_stage_count();
  check_precision();
  return {.model = model,
          .cluster = cluster,
          .stages = stages,
          .chunks = m,
          .schedule = schedule,
          .virtual_stages = v,
          .partitioner = partitioner,
          .batch = batch,
          .micro_batch = micro_batch,
          .dp = dp,
          .checkpoint = checkpoint_kind(),
          .frozen = frozen,
          .dtype = dtype,
          .optimizer = optimizer,
          .alpha = alpha,
          .p2p = {},
          .tp = tensor_parallel().size,
          .sequence_parallel = sequence_parallel,
          .selective_recompute = selective_recompute,
          .distributed_optimizer = distributed_optimizer};
}

PlannedRequest plan_with_options(
    const PlanOptions& o, const std::vector<std::string>& schedules, bool allow_oom,
    const std::function<void(const ScheduleSearch&, const PlanRequest&)>& on_search) {
  o.check_precision();
  if (!schedules.empty() && o.schedule != "auto") {
    throw InputError(fmt::format("--schedules {} needs --schedule auto (--schedule {} given)",
                                 fmt::join(schedules, ","), o.schedule));
  }
  if (o.schedule != "auto") schedule_info(o.schedule);
  const Catalog catalog = Catalog::load(o.catalog.empty() ? Catalog::default_dir() : o.catalog);
  PlanRequest r = o.request(catalog);
  r.allow_oom = allow_oom;
  PlannedRequest out;
  if (o.schedule != "auto") {
    out.plan = make_plan(r, &out.memory_note);
    return out;
  }
  const auto candidates =
      schedule_candidates(schedules, r.stages, r.profile.num_layers(), r.virtual_stages);
  const ScheduleSearch search = search_schedules(r, candidates);
  if (on_search) on_search(search, r);
  if (search.chosen < 0) throw InputError(search_refusal(search));
  out.trials = search.trials;
  try {
    out.plan = make_plan(search.request, &out.memory_note);  // the same plan, with its note
  } catch (const InputError&) {
    out.memory_note.clear();
    out.plan = search.trials[static_cast<size_t>(search.chosen)].evaluation.plan;
  }
  return out;
}

ElasticConfig elastic_config(const ElasticOptions& a) {
  const Catalog catalog = Catalog::load(a.catalog.empty() ? Catalog::default_dir() : a.catalog);
  Cluster cluster = load_cluster(a.cluster, catalog);
  Profile profile = resolve_profile(a.model, a.profile, cluster.device.name);
  return a.config(std::move(cluster), std::move(profile), catalog);
}

}  // namespace pipetwin::sim
