#include "sim/planner.hpp"

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/memory_pools.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
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

namespace {

Plan base_plan(const PlanRequest& r) {
  Plan p;
  p.model = r.model.empty() ? r.profile.model : r.model;
  p.profile = r.profile;
  p.cluster = r.cluster;
  p.schedule = r.schedule;
  p.partitioner = r.partitioner;
  p.batch_size = r.batch_size;
  p.dp = r.dp;
  p.checkpoint = r.checkpoint;
  p.frozen_layers = r.frozen_layers;
  p.iterations = r.iterations;
  p.compute_scale = resolve_compute_scale(r.profile, r.cluster, r.catalog);
  return p;
}

// The plan's stages from a partition: its stage -> device map, or stage s on device s.
void set_stages(Plan& p, const Partition& part) {
  p.stages.clear();
  for (int s = 0; s < part.num_stages(); ++s) {
    p.stages.push_back(
        {part.stages[static_cast<size_t>(s)], part.device.empty() ? s : part.device_of(s)});
  }
}

// Simulated iteration time of `plan` with the candidate's stages; +inf when it cannot run.
double simulated_time(const Plan& plan, const Partition& candidate) {
  if (!candidate.uniform_replicas() || candidate.replicas_of(0) != 1) {
    return std::numeric_limits<double>::infinity();
  }
  Plan trial = plan;
  set_stages(trial, candidate);
  try {
    const PlanContext ctx(trial, 0);
    return simulate_plan(ctx).metrics.iteration_time_s;
  } catch (const InputError&) {
    return std::numeric_limits<double>::infinity();
  }
}

void partition_into(Plan& p, const PlanRequest& r) {
  CostOptions o;
  o.compute_scale = p.compute_scale;
  o.frozen_layers = p.frozen_layers;
  o.lambda_frozen = p.lambda_frozen;
  const CostModel cost(p.profile, p.cluster, o);
  PartitionRequest pr;
  pr.cost = &cost;
  pr.num_stages = r.stages;
  pr.micro_batch = p.micro_batch_size();
  pr.micro_batches = p.chunks;
  // Partitioners that weigh candidates (mixed-pipe) get the simulator's iteration time.
  const Plan base = p;
  pr.evaluate = [&base](const Partition& candidate) { return simulated_time(base, candidate); };
  const Partition part = make_partitioner(r.partitioner)->partition(pr);
  if (!part.uniform_replicas()) {
    throw InputError(fmt::format(
        "partitioner {} replicates stages unevenly (replicas {}); the simulator and the executor "
        "need the same data-parallel width for every stage",
        r.partitioner, fmt::join(part.replicas, ", ")));
  }
  if (part.replicas_of(0) > 1) {  // every stage replicated alike: plain data parallelism
    p.dp = r.dp * part.replicas_of(0);
    if (p.batch_size % (p.dp * p.chunks) != 0) {
      throw InputError(
          fmt::format("partitioner {} replicates every stage {} times: --batch {} is "
                      "not divisible by dp x chunks = {} x {}",
                      r.partitioner, part.replicas_of(0), p.batch_size, p.dp, p.chunks));
    }
  }
  set_stages(p, part);
}

}  // namespace

void check_fits(const Plan& plan) {
  const PlanContext ctx(plan, 0);
  const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "schedule " + plan.schedule);
  const MemoryWalk walk = walk_memory(cs, ctx.stages);
  const auto pools = memory_pools(plan.cluster, ctx.placement, walk);
  const MemoryPool* worst = tightest_pool(pools);
  if (worst && worst->need_bytes > worst->capacity_bytes) {
    throw InputError(fmt::format(
        "plan does not fit: {} needs {:.2f} GiB, it has {:.2f} GiB "
        "(over by {:.2f} GiB); try more stages, checkpointing, or a smaller micro-batch",
        describe_pool(*worst, plan.cluster, ctx.placement), worst->need_bytes / kGiB,
        worst->capacity_bytes / kGiB, (worst->need_bytes - worst->capacity_bytes) / kGiB));
  }
}

Plan make_plan(const PlanRequest& r) {
  if (r.stages < 1) throw InputError(fmt::format("--stages must be positive ({} given)", r.stages));
  if (r.dp < 1) throw InputError(fmt::format("--dp must be positive ({} given)", r.dp));
  if (r.batch_size < 1)
    throw InputError(fmt::format("--batch must be positive ({} given)", r.batch_size));
  if (r.batch_size % r.dp != 0) {
    throw InputError(fmt::format("--batch {} is not divisible by --dp {}", r.batch_size, r.dp));
  }
  Plan plan = base_plan(r);
  if (r.chunks > 0) {
    plan.chunks = r.chunks;
    if (r.batch_size % (r.dp * r.chunks) != 0) {
      throw InputError(fmt::format("--batch {} is not divisible by dp x chunks = {} x {}",
                                   r.batch_size, r.dp, r.chunks));
    }
    partition_into(plan, r);
    plan.validate("plan");
    if (!r.allow_oom) check_fits(plan);
    return plan;
  }
  // Auto: the fastest M in [1, 6K] that divides the per-replica batch and fits.
  const int per_replica = r.batch_size / r.dp;
  double best_time = std::numeric_limits<double>::infinity();
  Plan best;
  std::string last_error;
  for (int m = 1; m <= std::min(per_replica, 6 * r.stages); ++m) {
    if (per_replica % m != 0) continue;
    Plan candidate = plan;
    candidate.chunks = m;
    try {
      partition_into(candidate, r);
      candidate.validate("plan");
      if (!r.allow_oom) check_fits(candidate);
    } catch (const InputError& e) {
      last_error = e.what();
      continue;
    }
    const PlanContext ctx(candidate, 0);
    const double t = simulate_plan(ctx).metrics.iteration_time_s;
    if (t < best_time - 1e-15) {
      best_time = t;
      best = candidate;
    }
  }
  if (best.stages.empty()) {
    throw InputError("--chunks auto: no chunk count fits" +
                     (last_error.empty() ? std::string() : ": " + last_error));
  }
  return best;
}

}  // namespace pipetwin::sim
