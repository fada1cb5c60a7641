#include "studies/capacity_space.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/planner.hpp"
#include "studies/sweep/evaluate.hpp"

namespace pipetwin::sim {

namespace {

// The layouts of one (K, dp, schedule, v, partitioner, checkpoint): the M the schedule accepts.
void add_chunk_counts(const SpaceRequest& s, Layout x, std::vector<Layout>& out) {
  PlanRequest r;
  r.stages = x.stages;
  r.dp = x.dp;
  r.schedule = *x.schedule;
  r.virtual_stages = x.virtual_stages;
  r.partitioner = *x.partitioner;
  r.checkpoint = x.checkpoint;
  r.batch_size = s.batch;
  const ResolvedRequest q = resolve_request(r);
  if (!q.error.empty()) return;  // the layout cannot be planned at all (e.g. v and the layout)
  const int per_replica = s.batch / x.dp;
  for (int m = x.stages; m <= per_replica; ++m) {
    if (per_replica % m != 0 || !q.refusal(m).empty()) continue;
    x.chunks = m;
    out.push_back(x);
  }
}

}  // namespace

std::vector<Layout> capacity_layouts(const SpaceRequest& s) {
  std::vector<Layout> out;
  for (int k = 1; k <= std::min(s.devices, s.layers); ++k) {
    for (int dp = 1; k * dp <= s.devices; ++dp) {
      if (s.batch % dp != 0) continue;
      for (const auto& c : schedule_candidates(*s.schedules, k, s.layers, 0)) {
        if (c.virtual_stages * k > s.layers) continue;
        const auto named = std::find(s.schedules->begin(), s.schedules->end(), c.schedule);
        for (const auto& partitioner : *s.partitioners) {
          for (Checkpoint ck : s.checkpoints) {
            add_chunk_counts(s, {k, dp, c.virtual_stages, 1, &*named, &partitioner, ck}, out);
          }
        }
      }
    }
  }
  return out;
}

std::string plan_summary(const Plan& p) {
  const int k = p.devices_per_replica(), v = p.num_stages() / std::max(1, k);
  const std::string tp = p.tp() > 1 ? fmt::format(" t={}{}", p.tp(),
                                                  p.tensor_parallel.sequence_parallel ? " sp" : "")
                                    : std::string();
  return fmt::format("K={}{} dp={} M={} {}{}{} {}", k, tp, p.dp, p.chunks, p.schedule,
                     v > 1 ? fmt::format(" v={}", v) : "",
                     p.checkpoint == Checkpoint::kNone
                         ? ""
                         : fmt::format(" ckpt={}", checkpoint_name(p.checkpoint)),
                     p.partitioner);
}

}  // namespace pipetwin::sim
