#include "sim/planner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "sim/memory_pools.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "core/partition/stage_memory.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::sim {

double resolve_compute_scale(const Profile& profile, const Cluster& cluster,
                             const Catalog* catalog) {
  if (cluster.relative_speed > 0) return 1.0 / cluster.relative_speed;
  if (profile.device == cluster.device.name || catalog == nullptr) return 1.0;
  const DeviceSpec* measured = catalog->find_device(profile.device);
  if (measured == nullptr) return 1.0;
  const double a = measured->flops(profile.dtype), b = cluster.device.flops(profile.dtype);
  return (a > 0 && b > 0) ? a / b : 1.0;
}

Plan reprice(Plan plan, Profile p, const std::string& origin) {
  if (p.num_layers() != plan.profile.num_layers() || p.model != plan.profile.model) {
    throw InputError(fmt::format(
        "{}: model: a profile of {} ({} layers), but the plan's profile is of {} ({} layers)",
        origin, p.model, p.num_layers(), plan.profile.model, plan.profile.num_layers()));
  }
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  plan.compute_scale = resolve_compute_scale(p, plan.cluster, &catalog);
  plan.profile = std::move(p);
  return plan;
}

Plan base_plan(PlanRequest r) {
  const double scale = r.compute_scale > 0 ? r.compute_scale
                                           : resolve_compute_scale(r.profile, r.cluster, r.catalog);
  // The shard the profile describes (profiles/zoo/tensor_parallel.hpp); Plan::validate checks
  // that it is the one asked for.
  const TensorParallel tensor_parallel = r.tensor_parallel;
  // Initialised in member order, so the model's name is read before the profile moves.
  return Plan{.model = r.model.empty() ? r.profile.model : std::move(r.model),
              .profile = std::move(r.profile),
              .cluster = std::move(r.cluster),
              .schedule = std::move(r.schedule),
              .partitioner = std::move(r.partitioner),
              .batch_size = r.batch_size,
              .dp = r.dp,
              .checkpoint = r.checkpoint,
              .stages = {},
              .placement = {},
              .iterations = r.iterations,
              .compute_scale = scale,
              .frozen_layers = r.frozen_layers,
              .framework = std::move(r.framework),
              .tensor_parallel = tensor_parallel,
              .tp_across_nodes = r.tp_across_nodes,
              .distributed_optimizer = r.distributed_optimizer};
}

namespace {

// The plan's stages from a partition: placed by `layout` (stage -> device: virtual stages), else
// by its stage -> device map, else stage s on device s.
// A partition that replicates stages unevenly (PipeDream's hybrids) keeps its replica counts: stage
// s on devices part.device_of(s) .. + replicas (PipelineShape::stage_replicas); one replicated
// alike everywhere is data parallelism instead (partition_into).
void set_stages(Plan& p, const Partition& part, const std::vector<int>& layout = {}) {
  p.stages.clear();
  const bool uneven = !part.uniform_replicas();
  for (int s = 0; s < part.num_stages(); ++s) {
    const auto i = static_cast<size_t>(s);
    const int device = !layout.empty()                  ? layout[i]
                       : uneven || !part.device.empty() ? part.device_of(s)
                                                        : s;
    p.stages.push_back({part.stages[i], device, uneven ? part.replicas_of(s) : 1});
  }
}

// Partitioners that place stages on devices themselves (or choose their own stage count): they
// cannot cut a model into virtual stages for a layout.
bool places_stages(const std::string& partitioner) {
  return partitioner == "pipedream-dp" || partitioner == "mixed-pipe" || partitioner == "metis";
}

// Where a partition's stages go: the schedule's layout for virtual stages; for one stage per device
// none (a partitioner's own placement, else stage s on device s: set_stages).
const std::vector<int>& forced_layout(const ResolvedRequest& q) {
  static const std::vector<int> kNone;
  return q.v > 1 ? q.stage_device : kNone;
}

// The worst memory pool of a simulated plan is over its capacity.
bool over_memory(const PlanContext& ctx, const MemoryWalk& walk) {
  const auto pools = memory_pools(ctx.plan.cluster, ctx.placement, walk);
  const MemoryPool* worst = tightest_pool(pools);
  return worst != nullptr && worst->need_bytes > worst->capacity_bytes;
}

// `plan` with the candidate's stages (placed by `layout` when given), a replication alike for
// every stage taken as data parallelism, as partition_into() builds it.
Plan with_candidate(Plan plan, const Partition& candidate, const std::vector<int>& layout = {}) {
  if (candidate.uniform_replicas()) plan.dp *= candidate.replicas_of(0);
  set_stages(plan, candidate, layout);
  return plan;
}

// Simulated iteration time of `plan` with the candidate's stages; +inf when it cannot run (or,
// with `memory`, when its memory walk overflows a device: such a plan would be refused).
double simulated_time(const Plan& plan, const Partition& candidate, bool memory) {
  const Plan trial = with_candidate(plan, candidate);
  try {
    const PlanContext ctx(trial, 0);
    const SimResult sim = simulate_plan(ctx);
    if (memory && over_memory(ctx, sim.memory)) return std::numeric_limits<double>::infinity();
    return sim.metrics.iteration_time_s;
  } catch (const InputError&) {
    return std::numeric_limits<double>::infinity();
  }
}

// Partitioners that choose among partitions; uniform and autopipe have one and only check it.
bool searches(const std::string& partitioner) {
  return partitioner != "uniform" && partitioner != "autopipe";
}

// `p` with the candidate's stages (placed by `layout` when given; its replication as data
// parallelism) fits every memory.
bool fits_pools(const Plan& p, const Partition& candidate, const std::vector<int>& layout) {
  try {
    check_fits(with_candidate(p, candidate, layout));
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// Devices that share one memory, or a device hosting several virtual stages: the per-stage limits
// of shared_stage_limits(), loosest first; the first partition whose stages' peaks add up within
// every memory wins — the loosest limit that works, so the fastest partition found. When none
// does, the last partition found is returned for check_fits() to refuse.
Partition partition_shared(const Plan& p, PartitionRequest& pr, const Partitioner& partitioner,
                           const std::vector<double>& limits, const std::vector<int>& layout) {
  std::optional<Partition> last;
  for (double limit : limits) {
    pr.memory_limit_bytes = limit;
    try {
      Partition part = partitioner.partition(pr);
      if (fits_pools(p, part, layout)) return part;
      last = std::move(part);
    } catch (const NoFitError&) {
      if (!last) throw;  // tighter limits cannot fit either
      break;
    }
  }
  return *last;
}

// What every partitioner of `p` is asked: its cost model, `stages` stages, p's micro-batches.
PartitionRequest request_for(const Plan& p, const CostModel& cost, int stages) {
  PartitionRequest pr;
  pr.cost = &cost;
  pr.num_stages = stages;
  pr.micro_batch = p.micro_batch_size();
  pr.micro_batches = p.chunks;
  return pr;
}

// The partition into v x K stages, memory-aware unless allow_oom (docs/partition-memory.md): the
// partitioner gets the schedule's memory model and stage_memory_limit() (or, where devices share a
// memory or host several virtual stages, a series of limits, partition_shared).
Partition partition_for(const Plan& p, const ResolvedRequest& q, const CostModel& cost) {
  const PlanRequest& r = q.request;
  const int v = q.v;
  PartitionRequest pr = request_for(p, cost, q.num_stages());
  const bool aware = !r.allow_oom && searches(r.partitioner);
  // Partitioners that weigh candidates (mixed-pipe) get the simulator's iteration time.
  pr.evaluate = [&p, aware](const Partition& candidate) {
    return simulated_time(p, candidate, aware);
  };
  // pipedream-dp searches what this planner builds from its answer (PipeDreamPricing::kAsPlanned,
  // docs/partition-memory.md): uniform replication as data parallelism at micro-batch b / m.
  const auto partitioner = r.partitioner == "pipedream-dp"
                               ? make_pipedream_dp_partitioner({true, PipeDreamPricing::kAsPlanned})
                               : make_partitioner(r.partitioner);
  if (!aware) return partitioner->partition(pr);
  const StageMemory model({p.schedule, p.chunks, p.checkpoint, p.iterations, v});
  pr.memory = &model;
  pr.memory_limit_bytes = stage_memory_limit(p, r.stages);
  if (v == 1 && pr.memory_limit_bytes >= tensor_capacity_bytes(p.cluster)) {
    return partitioner->partition(pr);
  }
  return partition_shared(p, pr, *partitioner, shared_stage_limits(p, r.stages, v),
                          forced_layout(q));
}

// pipedream-dp's pick, refined by simulation (as mixed-pipe weighs its candidates). Simulated under
// the plan's own schedule, the fastest kept:
// - the as-planned search's pick (PipeDreamPricing::kAsPlanned: uniform replication, priced under
//   PipeDream's asynchronous steady state);
// - PipeDream's program as the paper prices it (kPaper, all-reduce hidden behind compute) and as
//   its released optimizer does (kReleased, all-reduce added): stages replicated unevenly, whole
//   micro-batches dealt round-robin (PipelineShape::stage_replicas), when M is a multiple of each
//   stage's replica count;
// - pure data parallelism over all P devices.
// Neither pricing sees a synchronous schedule's flush, nor how much of an all-reduce is really
// hidden: a straight 8-stage 1F1B pipeline priced faster than data parallelism simulates 19%
// slower; a 7-1 hybrid that the paper's pricing ranks behind data parallelism simulates 38% faster
// under PipeDream's schedule (tests/stage_replicas_test.cpp). Memory-aware, a candidate must fit.
Partition refine_pipedream(Partition planned, const Plan& p, const ResolvedRequest& q,
                           const CostModel& cost) {
  if (q.v != 1) return planned;
  const PlanRequest& r = q.request;
  const bool aware = !r.allow_oom;
  std::vector<Partition> candidates;
  const PartitionRequest pr = request_for(p, cost, r.stages);
  for (const auto pricing : {PipeDreamPricing::kPaper, PipeDreamPricing::kReleased}) {
    try {
      Partition hybrid = make_pipedream_dp_partitioner({aware, pricing})->partition(pr);
      bool dealt = true;
      for (int s = 0; s < hybrid.num_stages(); ++s)
        dealt = dealt && p.chunks % hybrid.replicas_of(s) == 0;
      if (dealt) candidates.push_back(std::move(hybrid));
    } catch (const InputError&) {
      // nothing of PipeDream's fits: the as-planned pick stands
    }
  }
  Partition dp;
  dp.stages.emplace_back();
  for (int l = 0; l < p.profile.num_layers(); ++l) dp.stages.back().push_back(l);
  dp.replicas = {r.stages};
  candidates.push_back(std::move(dp));
  double best = simulated_time(p, planned, aware);
  for (auto& c : candidates) {
    const double t = simulated_time(p, c, aware);
    if (t < best) {
      best = t;
      planned = std::move(c);
    }
  }
  return planned;
}

void partition_into(Plan& p, const ResolvedRequest& q) {
  const PlanRequest& r = q.request;
  CostOptions o;
  o.compute_scale = p.compute_scale;
  o.frozen_layers = p.frozen_layers;
  o.lambda_frozen = p.lambda_frozen;
  o.framework = p.framework;
  const CostModel cost(p.profile, p.cluster, o);
  Partition part = partition_for(p, q, cost);
  if (r.partitioner == "pipedream-dp") part = refine_pipedream(std::move(part), p, q, cost);
  p = with_candidate(std::move(p), part, forced_layout(q));  // replicated alike: data parallelism
  if (part.uniform_replicas() && part.replicas_of(0) > 1 && p.batch_size % (p.dp * p.chunks) != 0) {
    throw InputError(fmt::format(
        "partitioner {} replicates every stage {} times: --batch {} is not divisible by dp x "
        "chunks = {} x {}",
        r.partitioner, part.replicas_of(0), p.batch_size, p.dp, p.chunks));
  }
}

std::string checkpoint_note(Checkpoint c) {
  return c == Checkpoint::kNone ? "" : fmt::format(", checkpoint {}", checkpoint_name(c));
}

// "plan does not fit: partitioner optimal found no partition into 4 stages within 80.00 GiB a
// device (gpipe, M=8, micro-batch 4); the leanest needs 92.10 GiB on stage 0".
std::string no_fit_line(const Plan& p, const ResolvedRequest& q, const NoFitError& e) {
  const PlanRequest& r = q.request;
  const int v = q.v;
  const std::string stages =
      v == 1 ? fmt::format("{} stages", r.stages)
             : fmt::format("{} stages ({} on each of {} devices)", v * r.stages, v, r.stages);
  // On a GPU the framework holds part of the memory (core/framework_memory.hpp): say so.
  const double whole = p.cluster.device.memory_bytes;
  const std::string of =
      tensor_capacity_bytes(p.cluster) < whole
          ? fmt::format(" of tensors (of {:.2f} GiB, less the framework's memory)", whole / kGiB)
          : "";
  return fmt::format(
      "plan does not fit: partitioner {} found no partition into {} within {:.2f} GiB{} a "
      "{} ({}, M={}, micro-batch {}{}); the leanest needs {:.2f} GiB {}",
      r.partitioner, stages, e.limit_bytes / kGiB, of, v == 1 ? "device" : "stage", p.schedule,
      p.chunks, p.micro_batch_size(), checkpoint_note(p.checkpoint), e.need_bytes / kGiB, e.where);
}

}  // namespace

namespace {

// Why the request's tensor-parallel groups cannot be placed: more devices than the cluster has,
// or (groups placed one after another) a group across two nodes without leave.
std::string tensor_parallel_error(const PlanRequest& r) {
  const int t = r.tensor_parallel.size;
  if (t < 2) return "";
  const Cluster& c = r.cluster;
  if (r.dp * r.stages * t > c.num_devices()) {
    return fmt::format("--tp {}: dp x K x t = {} x {} x {} = {} devices, cluster \"{}\" has {}", t,
                       r.dp, r.stages, t, r.dp * r.stages * t, c.name, c.num_devices());
  }
  if (c.device.core_sharing >= 2) {
    return fmt::format("--tp {}: the devices of \"{}\" are stream sets, {} to a GPU; a "
                       "tensor-parallel group needs GPUs of its own",
                       t, c.name, c.device.core_sharing);
  }
  if (!r.tp_across_nodes && c.devices_per_node % t != 0) {
    return fmt::format("--tp {} does not divide the {} devices of a node of \"{}\": a group would "
                       "span nodes (--tp-across-nodes allows it)",
                       t, c.devices_per_node, c.name);
  }
  return "";
}

// Why `r` cannot be planned at all (ResolvedRequest::error), in the order a user fixes flags; sets
// q.v and q.stage_device on the way.
std::string request_error(const PlanRequest& r, ResolvedRequest& q) {
  if (r.stages < 1) return fmt::format("--stages must be positive ({} given)", r.stages);
  if (r.virtual_stages < 0) {
    return fmt::format("--virtual-stages must be positive ({} < 1)", r.virtual_stages);
  }
  q.v = r.virtual_stages > 0 ? r.virtual_stages : default_virtual_stages(r.schedule);
  std::string layout_error;  // v does not fit the schedule's layout
  try {
    q.stage_device = virtual_stage_layout(stage_layout_of(r.schedule), r.stages, q.v, r.schedule);
  } catch (const InputError& e) {
    layout_error = e.what();
  }
  if (q.v > 1 && places_stages(r.partitioner)) {
    return fmt::format(
        "partitioner {} places stages on devices itself and cannot cut {} virtual stages per "
        "device (--virtual-stages {}); use optimal, balance-time, balance-size, autopipe or "
        "uniform",
        r.partitioner, q.v, q.v);
  }
  if (!layout_error.empty()) return layout_error;
  if (r.dp < 1) return fmt::format("--dp must be positive ({} given)", r.dp);
  if (r.batch_size < 1) return fmt::format("--batch must be positive ({} given)", r.batch_size);
  if (r.batch_size % r.dp != 0) {
    return fmt::format("--batch {} is not divisible by --dp {}", r.batch_size, r.dp);
  }
  if (std::string why = tensor_parallel_error(r); !why.empty()) return why;
  if (r.chunks <= 0) return "";  // auto: each M is asked in turn
  if (r.batch_size % (r.dp * r.chunks) != 0) {
    return fmt::format("--batch {} is not divisible by dp x chunks = {} x {}", r.batch_size, r.dp,
                       r.chunks);
  }
  return q.refusal(r.chunks);
}

Plan plan_with_chunks(Plan plan, const ResolvedRequest& q) {
  try {
    partition_into(plan, q);
  } catch (const NoFitError& e) {
    throw InputError(no_fit_line(plan, q, e));
  }
  plan.validate("plan");
  if (!q.request.allow_oom) check_fits(plan);
  return plan;
}

// What the chunk counts tried found: the leanest memory need, for the one-line refusal.
struct AutoTrials {
  std::vector<int> tried;
  std::optional<NoFitError> leanest;
  int leanest_m = 0;
  std::string last_error;

  void failed(int m, const InputError& e) {
    last_error = e.what();
    const auto* no_fit = dynamic_cast<const NoFitError*>(&e);
    if (no_fit == nullptr) return;
    if (!leanest || no_fit->need_bytes < leanest->need_bytes) {
      leanest = *no_fit;
      leanest_m = m;
    }
  }

  std::string line(const ResolvedRequest& q) const {
    const PlanRequest& r = q.request;
    if (!leanest) {
      return "--chunks auto: no chunk count fits" +
             (last_error.empty() ? std::string() : ": " + last_error);
    }
    return fmt::format(
        "--chunks auto: no chunk count fits: partitioner {} tried M = {} ({}, K={}{}{}) within "
        "{:.2f} GiB a {}; the leanest, M={}, needs {:.2f} GiB {}",
        r.partitioner, fmt::join(tried, ", "), r.schedule, r.stages,
        q.v > 1 ? fmt::format(", v={}", q.v) : "", checkpoint_note(r.checkpoint),
        leanest->limit_bytes / kGiB, q.v > 1 ? "stage" : "device", leanest_m,
        leanest->need_bytes / kGiB, leanest->where);
  }
};

// Chunks auto: the fastest M in [1, 6K] that divides the per-replica batch, the schedule accepts
// and fits.
Plan plan_auto_chunks(const Plan& plan, const ResolvedRequest& q) {
  const PlanRequest& r = q.request;
  const int per_replica = r.batch_size / r.dp;
  double best_time = std::numeric_limits<double>::infinity();
  Plan best;
  AutoTrials trials;
  std::string refused;  // why the schedule refused the last M it refused
  for (int m = 1; m <= std::min(per_replica, 6 * r.stages); ++m) {
    if (per_replica % m != 0) continue;
    if (std::string why = q.refusal(m); !why.empty()) {
      refused = std::move(why);
      continue;
    }
    Plan candidate = plan;
    candidate.chunks = m;
    trials.tried.push_back(m);
    try {
      partition_into(candidate, q);
      candidate.validate("plan");
      if (!r.allow_oom) check_fits(candidate);
    } catch (const InputError& e) {
      trials.failed(m, e);
      continue;
    }
    const PlanContext ctx(candidate, 0);
    const double t = simulate_plan(ctx).metrics.iteration_time_s;
    if (t < best_time - 1e-15) {
      best_time = t;
      best = candidate;
    }
  }
  if (trials.tried.empty()) {
    throw InputError(fmt::format(
        "--chunks auto: no M in 1..{} dividing the per-replica batch {} that {} accepts ({})",
        std::min(per_replica, 6 * r.stages), per_replica, r.schedule, refused));
  }
  if (best.stages.empty()) throw InputError(trials.line(q));
  return best;
}

}  // namespace

ResolvedRequest resolve_request(const PlanRequest& request) {
  ResolvedRequest q{.request = request};
  q.error = request_error(request, q);
  return q;
}

std::string ResolvedRequest::refusal(int chunks) const {
  PipelineShape shape;
  shape.micro_batches = chunks;
  shape.replicas = request.dp;
  shape.checkpoint = request.checkpoint;
  shape.num_stages = num_stages();
  shape.stage_device = stage_device;
  shape.devices_per_replica = request.stages;
  return schedule_refusal(request.schedule, shape);
}

std::string request_refusal(const PlanRequest& request, int chunks) {
  const ResolvedRequest q = resolve_request(request);
  if (q.stage_device.empty()) throw InputError(q.error);  // no shape to ask the schedule about
  return q.refusal(chunks);
}

Plan make_plan(const PlanRequest& r) {
  const ResolvedRequest q = resolve_request(r);
  if (!q.error.empty()) throw InputError(q.error);
  Plan plan = base_plan(r);
  if (r.chunks <= 0) return plan_auto_chunks(plan, q);
  plan.chunks = r.chunks;
  return plan_with_chunks(std::move(plan), q);
}

}  // namespace pipetwin::sim
