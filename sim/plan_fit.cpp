// The planner's memory verdicts (sim/planner.hpp): whether a finished plan fits its cluster, what
// the partition search may promise a stage, and the note when the fastest plan ignoring memory
// would not have fitted. Split from planner.cpp, which searches.
#include <algorithm>
#include <map>
#include <vector>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"

namespace pipetwin::sim {

void check_fits(const Plan& plan) {
  const PlanContext ctx(plan, 0);
  const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "schedule " + plan.schedule);
  const MemoryWalk walk = walk_memory(cs, ctx.stages);
  const auto pools = memory_pools(plan.cluster, ctx.placement, walk);
  const MemoryPool* worst = tightest_pool(pools);
  if (worst && worst->need_bytes > worst->capacity_bytes) {
    throw InputError(fmt::format(
        "plan does not fit: {} needs {}, it has {:.2f} GiB "
        "(over by {:.2f} GiB); try more stages, checkpointing, or a smaller micro-batch",
        describe_pool(*worst, plan.cluster, ctx.placement), describe_need(*worst),
        worst->capacity_bytes / kGiB, (worst->need_bytes - worst->capacity_bytes) / kGiB));
  }
}

double stage_memory_limit(const Plan& plan, int devices_per_replica) {
  const Cluster& c = plan.cluster;
  const double tensors = tensor_capacity_bytes(c);  // the memory less the framework's
  if (!c.device.shares_memory) return tensors;
  // Placed as PlanContext places a plan without a placement: replica devices in order.
  std::map<int, int> users;
  int most = 1;
  for (int d = 0; d < plan.dp * devices_per_replica; ++d)
    most = std::max(most, ++users[c.memory_of(d)]);
  return tensors / most;
}

namespace {

// "M=8, balance [6, 2]", with the data-parallel width and devices where they say more.
std::string describe_plan(const Plan& p) {
  std::vector<int> sizes;
  for (const auto& st : p.stages) sizes.push_back(static_cast<int>(st.layers.size()));
  std::string out = fmt::format("M={}, balance [{}]", p.chunks, fmt::join(sizes, ", "));
  if (p.dp > 1) out += fmt::format(", dp {}", p.dp);
  if (p.replicates_stages()) {
    std::vector<int> replicas;
    for (const auto& st : p.stages) replicas.push_back(st.replicas);
    out += fmt::format(", stage replicas [{}]", fmt::join(replicas, ", "));
  }
  if (p.devices_per_replica() != p.num_stages()) {
    out += fmt::format(" on {} devices", p.devices_per_replica());
  }
  return out;
}

// Whether two plans of one request cut and place the model alike (then the one that fits is the
// fastest).
bool same_partition(const Plan& a, const Plan& b) {
  if (a.chunks != b.chunks || a.dp != b.dp || a.stages.size() != b.stages.size()) return false;
  for (size_t i = 0; i < a.stages.size(); ++i) {
    if (a.stages[i].layers != b.stages[i].layers || a.stages[i].device != b.stages[i].device ||
        a.stages[i].replicas != b.stages[i].replicas)
      return false;
  }
  return true;
}

}  // namespace

Plan make_plan(const PlanRequest& r, std::string* memory_note) {
  Plan plan = make_plan(r);
  if (memory_note == nullptr) return plan;
  memory_note->clear();
  if (r.allow_oom) return plan;
  PlanRequest blind = r;
  blind.allow_oom = true;
  Plan fastest;
  try {
    fastest = make_plan(blind);
  } catch (const InputError&) {
    return plan;  // nothing to compare with
  }
  if (same_partition(fastest, plan)) return plan;  // the fastest fits: nothing to say
  const PlanContext ctx(fastest, 0);
  const SimResult sim = simulate_plan(ctx);
  const auto pools = memory_pools(fastest.cluster, ctx.placement, sim.memory);
  const MemoryPool* worst = tightest_pool(pools);
  if (worst == nullptr || worst->need_bytes <= worst->capacity_bytes) return plan;
  const double chosen_s = simulate_plan(PlanContext(plan, 0)).metrics.iteration_time_s;
  *memory_note = fmt::format(
      "the fastest partition ignoring memory ({}; {:.1f} ms/step) needs {:.2f} GiB on {} of "
      "{:.2f} GiB; chose {} ({:.1f} ms/step), which fits",
      describe_plan(fastest), sim.metrics.iteration_time_s * 1e3, worst->need_bytes / kGiB,
      describe_pool(*worst, fastest.cluster, ctx.placement), worst->capacity_bytes / kGiB,
      describe_plan(plan), chosen_s * 1e3);
  return plan;
}

std::vector<double> shared_stage_limits(const Plan& plan, int devices_per_replica, int v) {
  constexpr int kSharedLevels = 8;
  const double whole = tensor_capacity_bytes(plan.cluster);
  const double share = stage_memory_limit(plan, devices_per_replica) / v;
  std::vector<double> out;
  for (int i = 0; i <= kSharedLevels; ++i)
    out.push_back(whole - (whole - share) * i / kSharedLevels);
  return out;
}

}  // namespace pipetwin::sim
