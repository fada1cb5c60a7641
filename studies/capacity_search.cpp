#include "studies/capacity_search.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>

#include "core/error.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"
#include "studies/capacity.hpp"
#include "studies/capacity_bounds.hpp"
#include "studies/capacity_screen.hpp"

namespace pipetwin::sim {

namespace {

// The planner's refusals of a plan that does not fit (no_fit_line, check_fits) start so.
bool is_no_fit(const std::string& why) {
  return why.rfind("plan does not fit", 0) == 0;
}

// GPUs the first `devices` schedule devices occupy (placed in order, as PlanContext places them).
int gpus_of(const Cluster& cluster, int devices) {
  std::vector<int> placement(static_cast<size_t>(devices));
  std::iota(placement.begin(), placement.end(), 0);
  return physical_units(cluster, placement);
}

// A layout of one cluster waiting for its turn.
struct Pending {
  size_t target = 0, layout = 0;  // layout: index into the cluster's space (the tie order)
  double bound_s = 0;             // lower bound on its iteration time
  int gpus = 1;                   // fewest GPUs it can occupy
};

// One cluster's incumbents and counts, under its mutex.
struct ClusterState {
  std::mutex mu;
  std::vector<Layout> layouts;
  std::unique_ptr<CostModel> cost;  // at the plans' compute scale, for the screen
  std::unique_ptr<LayoutBounds> bounds;
  double seconds_to_cost = 0;  // cost of one second of iteration time per GPU
  ClusterSearch result;
  size_t fastest_at = 0, cheapest_at = 0;  // layout indices of the incumbents
};

double cost_of(const ClusterState& c, double iteration_s, int gpus) {
  return iteration_s * c.seconds_to_cost * gpus;
}

}  // namespace

// -1, 0 or 1 as a is less than, about equal to (within 1e-9, the rounding of sums taken in
// another order) or more than b: plans that tie are told apart by the next key.
int capacity_compare(double a, double b) {
  const double tolerance = 1e-9 * std::max(std::abs(a), std::abs(b));
  return a < b - tolerance ? -1 : a > b + tolerance ? 1 : 0;
}

// The fastest's order: time, then fewer GPUs, then the space's order.
bool capacity_faster(double t, int gpus, size_t at, double t0, int gpus0, size_t at0) {
  const int c = capacity_compare(t, t0);
  return c < 0 || (c == 0 && std::tie(gpus, at) < std::tie(gpus0, at0));
}

// The cheapest's order: cost, then fewer GPUs, then time, then the space's order.
bool capacity_cheaper(double cost, int gpus, double t, size_t at, double cost0, int gpus0, double t0,
             size_t at0) {
  const int c = capacity_compare(cost, cost0), d = capacity_compare(t, t0);
  return c < 0 || (c == 0 && (gpus < gpus0 || (gpus == gpus0 && (d < 0 || (d == 0 && at < at0)))));
}

namespace {

// Whether a layout whose iteration takes at least `bound_s` on at least `gpus` GPUs could replace
// an incumbent (under c.mu).
bool may_win(const ClusterState& c, const CapacityRequest& r, double bound_s, int gpus, size_t at) {
  const ClusterSearch& s = c.result;
  const double cost = cost_of(c, bound_s, gpus);
  const bool fast = (r.budget <= 0 || cost <= r.budget) &&
                    (!s.fastest_found || capacity_faster(bound_s, gpus, at, s.fastest.iteration_time_s,
                                                s.fastest.physical_units, c.fastest_at));
  const bool cheap = !s.cheapest_found ||
                     capacity_cheaper(cost, gpus, bound_s, at,
                             cost_of(c, s.cheapest.iteration_time_s, s.cheapest.physical_units),
                             s.cheapest.physical_units, s.cheapest.iteration_time_s, c.cheapest_at);
  return fast || cheap;
}

// Takes a simulated plan that fits as an incumbent where it beats one (under c.mu).
void offer(ClusterState& c, const CapacityRequest& r, const Evaluation& e, size_t at) {
  ClusterSearch& s = c.result;
  const double t = e.iteration_time_s, cost = cost_of(c, t, e.physical_units);
  if ((r.budget <= 0 || cost <= r.budget) &&
      (!s.fastest_found || capacity_faster(t, e.physical_units, at, s.fastest.iteration_time_s,
                                  s.fastest.physical_units, c.fastest_at))) {
    s.fastest = e;
    s.fastest_found = true;
    c.fastest_at = at;
  }
  if (!s.cheapest_found ||
      capacity_cheaper(cost, e.physical_units, t, at,
              cost_of(c, s.cheapest.iteration_time_s, s.cheapest.physical_units),
              s.cheapest.physical_units, s.cheapest.iteration_time_s, c.cheapest_at)) {
    s.cheapest = e;
    s.cheapest_found = true;
    c.cheapest_at = at;
  }
}

void refused(ClusterState& c, const std::string& why) {
  std::lock_guard<std::mutex> lock(c.mu);
  if (is_no_fit(why)) {
    ++c.result.counts.no_fit;
  } else {
    ++c.result.counts.refused;
    if (c.result.first_error.empty()) c.result.first_error = why;
  }
}

// The plan the planner makes of a layout whose partition the screen knows (sim/planner.cpp
// partition_into: the partition's stages placed as the screen placed them; the walk of
// evaluate_plan() judges its memory, as check_fits() would).
Plan plan_of(const Screened& seen, const PlanRequest& request) {
  Plan plan = base_plan(request);
  plan.chunks = request.chunks;
  for (int s = 0; s < seen.partition.num_stages(); ++s) {
    const auto i = static_cast<size_t>(s);
    plan.stages.push_back({seen.partition.stages[i], seen.stage_device[i], 1});
  }
  plan.validate("plan");
  return plan;
}

// The partitioners whose stages are contiguous layer ranges, one per device
// (LayoutBounds::split_time_s).
bool cuts_contiguous(const std::string& partitioner) {
  return partitioner == "optimal" || partitioner == "balance-time" || partitioner == "balance-size";
}

// Plans, bounds again and simulates one layout.
void try_layout(const Pending& p, const CapacityTarget& t, ClusterState& c,
                const CapacityRequest& r, PartitionScreen& screen) {
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!may_win(c, r, p.bound_s, p.gpus, p.layout)) {
      ++c.result.counts.time_bound;
      return;
    }
  }
  const Layout& x = c.layouts[p.layout];
  const LayoutShape shape{x.stages, x.dp, x.virtual_stages, x.chunks, x.checkpoint, false};
  if (cuts_contiguous(*x.partitioner) && !schedule_info(*x.schedule).asynchronous) {
    const double split_s = c.bounds->split_time_s(shape);
    std::lock_guard<std::mutex> lock(c.mu);
    if (split_s > p.bound_s && !may_win(c, r, split_s, p.gpus, p.layout)) {
      ++c.result.counts.time_bound;
      return;
    }
  }
  if (c.bounds->split_memory_bytes(shape, screen.saved_sets(x)) >
      c.bounds->tensor_capacity_bytes()) {
    std::lock_guard<std::mutex> lock(c.mu);
    ++c.result.counts.memory_bound;
    return;
  }
  const Screened seen = screen.screen(x, t.cluster, *c.cost, r.batch);
  if (seen.verdict == Screened::Verdict::kNoFit) {
    std::lock_guard<std::mutex> lock(c.mu);
    ++c.result.counts.no_fit;
    return;
  }
  if (seen.verdict == Screened::Verdict::kPartitioned) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!may_win(c, r, seen.bound_s, p.gpus, p.layout)) {
      ++c.result.counts.time_bound;
      return;
    }
  }
  Plan plan;
  try {
    plan = seen.exact ? plan_of(seen, layout_request(x, t, r)) : make_plan(layout_request(x, t, r));
  } catch (const InputError& e) {
    refused(c, e.what());
    return;
  }
  {
    const PlanContext ctx(plan, 0);
    const double bound = plan_time_bound(ctx);
    std::lock_guard<std::mutex> lock(c.mu);
    if (!may_win(c, r, bound, physical_units(plan.cluster, ctx.placement), p.layout)) {
      ++c.result.counts.time_bound;
      return;
    }
  }
  const Evaluation e = evaluate_plan(plan, 0, false);
  if (!e.ok()) return refused(c, e.error);
  std::lock_guard<std::mutex> lock(c.mu);
  ++c.result.counts.simulated;
  if (!e.fits) {
    ++c.result.counts.no_fit;  // the planner checked it; kept for safety
    return;
  }
  offer(c, r, e, p.layout);
}

// The profile the bounds read: with the distributed optimizer, optimizer state and step divided by
// the widest dp the target allows, so that the bounds stay below every layout's figures.
Profile bound_profile(const CapacityTarget& t, const CapacityRequest& r) {
  Profile p = t.profile;
  if (!r.distributed_optimizer) return p;
  const double widest = std::max(1, t.cluster.num_devices() / t.tensor_parallel.size);
  for (auto& l : p.layers) {
    l.optimizer_bytes /= widest;
    l.optimizer_step_s /= widest;
    l.optimizer_new_version_s /= widest;
  }
  return p;
}

// The layouts of every cluster that pass the memory bound, best time bound first.
std::vector<Pending> bound_layouts(const std::vector<CapacityTarget>& targets,
                                   std::vector<std::unique_ptr<ClusterState>>& clusters,
                                   const CapacityRequest& r) {
  std::vector<Pending> pending;
  for (size_t i = 0; i < targets.size(); ++i) {
    const CapacityTarget& t = targets[i];
    ClusterState& c = *clusters[i];
    const double scale = base_plan(layout_request(Layout{}, t, r)).compute_scale;
    c.bounds = std::make_unique<LayoutBounds>(bound_profile(t, r), t.cluster, scale, r.batch,
                                              r.framework);
    const LayoutBounds& bounds = *c.bounds;
    CostOptions o;
    o.compute_scale = scale;
    o.framework = r.framework;
    c.cost = std::make_unique<CostModel>(t.profile, t.cluster, o);
    c.result.counts.layouts = static_cast<long>(c.layouts.size());
    for (size_t l = 0; l < c.layouts.size(); ++l) {
      const Layout& x = c.layouts[l];
      const LayoutShape shape{x.stages, x.dp,         x.virtual_stages,
                              x.chunks, x.checkpoint, schedule_info(*x.schedule).asynchronous};
      if (bounds.memory_bytes(shape) > bounds.tensor_capacity_bytes()) {
        ++c.result.counts.memory_bound;
        continue;
      }
      // A partitioner that places stages itself may leave devices unused: count one GPU.
      const bool own_placement = *x.partitioner == "pipedream-dp" ||
                                 *x.partitioner == "mixed-pipe" || *x.partitioner == "metis";
      pending.push_back({i, l, bounds.time_s(shape),
                         own_placement ? 1
                                       : gpus_of(t.cluster, x.stages * x.dp * t.tensor_parallel.size)});
    }
  }
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.bound_s < b.bound_s; });
  return pending;
}

void run_pool(const std::vector<Pending>& pending, const std::vector<CapacityTarget>& targets,
              std::vector<std::unique_ptr<ClusterState>>& clusters, const CapacityRequest& r) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  PartitionScreen screen;
  auto work = [&] {
    try {
      for (size_t i = next++; i < pending.size(); i = next++) {
        const Pending& p = pending[i];
        try_layout(p, targets[p.target], *clusters[p.target], r, screen);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      next = pending.size();
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t jobs = std::min<size_t>(r.jobs > 0 ? static_cast<size_t>(r.jobs) : hw,
                                       std::max<size_t>(pending.size(), 1));
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

SpaceRequest space_of(const CapacityTarget& t, const CapacityRequest& r) {
  return {t.cluster.num_devices() / t.tensor_parallel.size, t.profile.num_layers(), r.batch,
          &r.schedules, &r.partitioners, r.checkpoints};
}

}  // namespace

std::vector<ClusterSearch> search_capacity(const std::vector<CapacityTarget>& targets,
                                           const CapacityRequest& r) {
  std::vector<std::unique_ptr<ClusterState>> clusters;
  for (const CapacityTarget& t : targets) {
    auto c = std::make_unique<ClusterState>();
    c->layouts = capacity_layouts(space_of(t, r));
    c->seconds_to_cost = r.epochs * std::ceil(r.samples / r.batch) / 3600.0 * t.price;
    clusters.push_back(std::move(c));
  }
  run_pool(bound_layouts(targets, clusters, r), targets, clusters, r);
  std::vector<ClusterSearch> out;
  for (auto& c : clusters) out.push_back(std::move(c->result));
  return out;
}

namespace {

// The leanest corner of the space: per schedule, v and partitioner, the longest pipeline with
// dp = 1, the leanest checkpoint mode asked, the most micro-batches.
std::vector<Layout> lean_corner(const std::vector<Layout>& layouts,
                                const std::vector<Checkpoint>& checkpoints) {
  Checkpoint leanest = checkpoints.front();
  for (Checkpoint c : checkpoints) leanest = std::max(leanest, c);  // none < except_last < always
  std::vector<Layout> out;
  for (const Layout& x : layouts) {
    if (x.dp != 1 || x.checkpoint != leanest) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const Layout& y) {
      return y.schedule == x.schedule && y.virtual_stages == x.virtual_stages &&
             y.partitioner == x.partitioner;
    });
    if (same == out.end()) {
      out.push_back(x);
    } else if (std::tie(x.stages, x.chunks) > std::tie(same->stages, same->chunks)) {
      *same = x;
    }
  }
  return out;
}

// Whether the memory-aware planner fits `request` on devices of `memory` bytes; the plan if so.
bool fits_on(PlanRequest request, double memory, Plan& plan) {
  request.cluster.device.memory_bytes = memory;
  try {
    plan = make_plan(request);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace

Leanest leanest_layout(const CapacityTarget& t, const CapacityRequest& r) {
  const std::vector<Layout> all = capacity_layouts(space_of(t, r));
  Leanest out;
  if (all.empty()) return out;
  // The leanest memory-blind plan of the corner.
  PlanRequest best;
  double best_need = 0;
  for (const Layout& x : lean_corner(all, r.checkpoints)) {
    PlanRequest q = layout_request(x, t, r);
    q.allow_oom = true;
    const Evaluation e = [&] {
      try {
        return evaluate_plan(make_plan(q), 0, false);
      } catch (const InputError& err) {
        return Evaluation::failure(err.what());
      }
    }();
    if (!e.ok()) continue;
    const double need = e.capacity_bytes + e.over_bytes;
    if (!out.found || need < best_need) {
      out = {true, e};
      best = layout_request(x, t, r);
      best_need = need;
    }
  }
  if (!out.found || out.evaluation.fits) return out;
  // The least memory the memory-aware planner fits it on, bisected.
  const double has = t.cluster.device.memory_bytes;
  double lo = has, hi = (has + out.evaluation.over_bytes) * 1.001;
  Plan plan;
  if (!fits_on(best, hi, plan)) return out;  // keep the memory-blind plan's need
  Plan lean = plan;
  while (hi - lo > 0.005 * hi) {
    const double mid = (lo + hi) / 2;
    if (fits_on(best, mid, plan)) {
      hi = mid;
      lean = plan;
    } else {
      lo = mid;
    }
  }
  lean.cluster = t.cluster;
  const Evaluation e = evaluate_plan(lean, 0, false);
  if (e.ok()) out.evaluation = e;
  return out;
}

}  // namespace pipetwin::sim
