// The planner's memory verdicts (sim/planner.hpp): whether a finished plan fits its cluster, and
// what the partition search may promise a stage. Split from planner.cpp, which searches.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/memory_pools.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
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

}  // namespace pipetwin::sim
