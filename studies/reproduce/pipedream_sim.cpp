// PipeDream's configurations simulated (see pipedream.hpp): a partition run as PipeDream runs it
// (SOSP'19 Section 3.3: asynchronous 1F1B with weight stashing, a replicated stage's mini-batches
// dealt round-robin over its replicas, the replicas synchronising their weights), priced by the
// discrete-event simulator; and our planner's pick for the same model and cluster.
#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "sim/memory_pools.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim::pipedream {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "device 15 (v100-16gb #15) needs 17.20 GiB of 16.00 GiB" when the plan's worst memory overflows,
// else "".
std::string overflow(const PlanContext& ctx, const MemoryWalk& walk) {
  const auto pools = memory_pools(ctx.plan.cluster, ctx.placement, walk);
  const MemoryPool* worst = tightest_pool(pools);
  if (worst == nullptr || worst->need_bytes <= worst->capacity_bytes) return "";
  return fmt::format("{} needs {:.2f} GiB of {:.2f} GiB",
                     describe_pool(*worst, ctx.plan.cluster, ctx.placement),
                     worst->need_bytes / kGiB, worst->capacity_bytes / kGiB);
}

// The replica counts of a plan's stages: its stage replicas, or dp for every stage.
std::vector<int> plan_replicas(const Plan& plan) {
  std::vector<int> out;
  for (const auto& st : plan.stages)
    out.push_back(plan.replicates_stages() ? st.replicas : plan.dp);
  return out;
}

std::string plan_stages(const Plan& plan) {
  Partition p;
  for (const auto& st : plan.stages) p.stages.push_back(st.layers);
  return describe_stages(CostModel(plan.profile, plan.cluster), p);
}

}  // namespace

int lcm_of(const std::vector<int>& counts) {
  int out = 1;
  for (int m : counts) out = std::lcm(out, m);
  return out;
}

Plan pipedream_run_plan(const PartitionRequest& r, const Partition& p) {
  Plan plan;
  plan.profile = r.cost->profile();
  plan.cluster = r.cost->cluster();
  plan.model = plan.profile.model;
  plan.schedule = kSchedule;
  plan.partitioner = "pipedream-dp";
  const bool uneven = !p.uniform_replicas();
  plan.dp = uneven ? 1 : p.replicas_of(0);
  plan.chunks = uneven ? lcm_of(replica_counts(p)) : 1;
  plan.batch_size = plan.dp * plan.chunks * r.micro_batch;
  for (int s = 0; s < p.num_stages(); ++s) {
    plan.stages.push_back({p.stages[static_cast<size_t>(s)], uneven ? p.device_of(s) : s,
                           uneven ? p.replicas_of(s) : 1});
  }
  plan.validate("reproduce pipedream");
  return plan;
}

int sim_iterations(const Plan& plan) {
  return 2 * plan.num_stages() + 4;
}

Price simulate_per_mini_batch(const Plan& plan, int mini_batch) {
  const PlanContext ctx(plan, sim_iterations(plan));
  const SimResult sim = simulate_plan(ctx);
  Price out;
  out.seconds = sim.metrics.iteration_time_s * mini_batch / plan.batch_size;
  const std::string over = overflow(ctx, sim.memory);
  if (!over.empty()) {
    out.refused = "does not fit: " + over;
    out.seconds = kNaN;
  }
  return out;
}

Price simulated_price(const PartitionRequest& r, const Partition& p) {
  return simulate_per_mini_batch(pipedream_run_plan(r, p), r.micro_batch);
}

std::string PlannerPick::setting() const {
  return fmt::format("M={}, batch {}", chunks, batch);
}

namespace {

// The planner's data-parallel candidate for `pick`'s request: every layer on P replicas, the same
// batch and M (refine_pipedream in sim/planner.cpp).
Plan data_parallel_like(const Plan& pick, int P) {
  Plan dp = pick;
  dp.dp = P;
  dp.stages = {StagePlan{{}, 0, 1}};
  for (int l = 0; l < dp.profile.num_layers(); ++l) dp.stages.front().layers.push_back(l);
  return dp;
}

}  // namespace

PlannerPick planner_pick(const Workload& w, int chunks, int batch) {
  PlanRequest req;
  req.profile = w.cost().profile();
  req.model = req.profile.model;
  req.cluster = w.cost().cluster();
  req.stages = w.request().num_stages;
  req.schedule = kSchedule;
  req.partitioner = "pipedream-dp";
  req.chunks = chunks;
  req.batch_size = batch;
  req.iterations = 2 * req.stages + 4;  // sim_iterations of the longest pipeline it may build
  PlannerPick out;
  out.chunks = chunks;
  out.batch = batch;
  out.seconds = out.dp_seconds = kNaN;
  try {
    out.plan = make_plan(req);
  } catch (const InputError& e) {
    out.refused = e.what();
    return out;
  }
  out.config = format_config(plan_replicas(out.plan));
  out.stages = plan_stages(out.plan);
  const int b = w.request().micro_batch;
  const Price price = simulate_per_mini_batch(out.plan, b);
  out.seconds = price.seconds;
  out.refused = price.refused;
  if (batch % (req.stages * chunks) == 0) {
    out.dp_seconds = simulate_per_mini_batch(data_parallel_like(out.plan, req.stages), b).seconds;
  }
  return out;
}

}  // namespace pipetwin::sim::pipedream
