#include "studies/sweep/evaluate.hpp"

#include <algorithm>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::sim {

namespace {

// A device's peak counts the framework's memory on its GPU (sim/memory_pools.hpp), as the fit
// does.
void judge_memory(const PlanContext& ctx, const MemoryWalk& walk, Evaluation& e) {
  std::vector<double> peaks;
  for (const auto& dm : walk.devices) peaks.push_back(dm.peak_bytes);
  const auto framework = framework_bytes_by_device(ctx.plan.cluster, ctx.placement, peaks);
  for (size_t d = 0; d < peaks.size(); ++d)
    e.peak_memory_max_bytes = std::max(e.peak_memory_max_bytes, peaks[d] + framework[d]);
  const auto pools = memory_pools(ctx.plan.cluster, ctx.placement, peaks);
  // Every GPU of every tensor-parallel group (placement holds each group's first).
  std::vector<int> gpus;
  for (int first : ctx.placement) {
    for (int i = 0; i < ctx.plan.tp(); ++i) gpus.push_back(first + i);
  }
  e.physical_units = physical_units(ctx.plan.cluster, gpus);
  const MemoryPool* worst = tightest_pool(pools);
  e.capacity_bytes = worst ? worst->capacity_bytes : ctx.plan.cluster.device.memory_bytes;
  e.fits = !worst || worst->need_bytes <= worst->capacity_bytes;
  if (!e.fits) {
    e.oom_device = describe_pool(*worst, ctx.plan.cluster, ctx.placement);
    e.over_bytes = worst->need_bytes - worst->capacity_bytes;
  }
}

// Time in [from, to] during which one compute stream is busy. A stream runs its tasks one at a
// time in stream order, so their intervals come sorted by start and apart (touching at most):
// merging neighbours and clipping gives compute_metrics()'s union of busy intervals.
double busy_within(std::span<const int32_t> tasks, const std::vector<double>& start,
                   const std::vector<double>& end, double from, double to) {
  if (tasks.empty() || to <= from) return 0;
  double sum = 0;
  auto add = [&](double a, double b) {
    if (b > from && a < to) sum += std::min(to, b) - std::max(from, a);
  };
  double a = start[static_cast<size_t>(tasks[0])], b = end[static_cast<size_t>(tasks[0])];
  for (size_t k = 1; k < tasks.size(); ++k) {
    const auto t = static_cast<size_t>(tasks[k]);
    if (start[t] <= b) {
      b = std::max(b, end[t]);
    } else {
      add(a, b);
      a = start[t];
      b = end[t];
    }
  }
  add(a, b);
  return sum;
}

}  // namespace

SteadyMetrics steady_metrics(const CompiledSchedule& cs, const std::vector<double>& start,
                             const std::vector<double>& end, bool async, double samples_per_step) {
  const auto D = static_cast<size_t>(cs.num_devices());
  std::vector<double> step_end;
  double makespan = 0;
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    const auto i = static_cast<size_t>(id);
    makespan = std::max(makespan, end[i]);
    if (a.op == Op::kOptimizerStep) {
      const auto step = static_cast<size_t>(a.step);
      if (step_end.size() <= step) step_end.resize(step + 1, 0);
      step_end[step] = std::max(step_end[step], end[i]);
    }
  }
  const int steps = static_cast<int>(step_end.size());
  const int K = cs.shape().num_stages;
  const int w0 = async ? K : 0, w1 = async ? steps - 1 - K : steps - 1;
  SteadyMetrics m;
  double from = 0, to = makespan;
  if (steps >= 2 && w1 > w0) {
    from = step_end[static_cast<size_t>(w0)];
    to = step_end[static_cast<size_t>(w1)];
    m.iteration_time_s = (to - from) / (w1 - w0);
  } else {
    m.iteration_time_s = steps > 0 ? makespan / steps : makespan;
  }
  if (m.iteration_time_s > 0) m.throughput_samples_per_s = samples_per_step / m.iteration_time_s;
  double busy_total = 0;
  for (size_t d = 0; d < D; ++d) {
    const int compute =
        static_cast<int>(d) * kStreamsPerDevice + static_cast<int>(StreamKind::kCompute);
    busy_total += busy_within(cs.stream_actions(compute), start, end, from, to);
  }
  m.bubble_fraction =
      (to > from && D > 0) ? 1 - busy_total / (static_cast<double>(D) * (to - from)) : 0;
  return m;
}

Evaluation evaluate_plan(const Plan& plan, int iterations, bool simulate_unfit) {
  Evaluation e;
  e.plan = plan;
  try {
    const PlanContext ctx(plan, iterations);
    const std::string origin = "schedule " + plan.schedule;
    // The engine run below is the deadlock check; without a run, the compiler's.
    CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), origin, false);
    judge_memory(ctx, walk_memory(cs, ctx.stages), e);
    if (!e.fits && !simulate_unfit) {
      cs.check_progress(origin);
      return e;
    }
    PipelineSimulator simulator(ctx, std::move(cs));
    std::vector<double> start, end;
    try {
      simulator.run_engine(start, end);
    } catch (const DeadlockError& stuck) {
      simulator.schedule().check_progress(origin);  // the compiler's message, as without the skip
      throw InputError(origin + ": " + stuck.what());
    }
    const SteadyMetrics m =
        steady_metrics(simulator.schedule(), start, end, schedule_info(plan.schedule).asynchronous,
                       plan.batch_size);
    e.simulated = true;
    e.iteration_time_s = m.iteration_time_s;
    e.throughput_samples_per_s = m.throughput_samples_per_s;
    e.bubble_fraction = m.bubble_fraction;
  } catch (const InputError& err) {
    return Evaluation::failure(err.what());
  }
  return e;
}

Evaluation evaluate_request(const PlanRequest& request, int iterations, bool simulate_unfit) {
  PlanRequest r = request;
  r.allow_oom = r.chunks > 0;
  Plan plan;
  try {
    plan = make_plan(r);
  } catch (const InputError& first) {
    if (r.allow_oom) {
      return Evaluation::failure(first.what());
    }
    // Auto M and nothing fits (or the request is infeasible): plan ignoring memory, so the
    // evaluation names the device that runs out; an infeasible request fails again here.
    r.allow_oom = true;
    try {
      plan = make_plan(r);
    } catch (const InputError& again) {
      return Evaluation::failure(again.what());
    }
  }
  return evaluate_plan(plan, iterations, simulate_unfit);
}

// ---- --schedule auto ----

std::string ScheduleCandidate::label() const {
  if (stage_layout_of(schedule) != StageLayout::kInterleaved) return schedule;
  return fmt::format("{} v={}", schedule, virtual_stages);
}

std::vector<ScheduleCandidate> schedule_candidates(const std::vector<std::string>& names,
                                                   int devices, int layers, int virtual_stages) {
  static const std::vector<std::string> kUsersPick = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                                      "zb-h2", "zbv",  "dualpipev"};
  std::vector<ScheduleCandidate> out;
  auto add = [&out](const std::string& schedule, int v) {
    for (const auto& c : out) {
      if (c.schedule == schedule && c.virtual_stages == v) return;
    }
    out.push_back({schedule, v});
  };
  for (const auto& name : names.empty() ? kUsersPick : names) {
    schedule_info(name);  // InputError naming an unknown schedule
    if (stage_layout_of(name) != StageLayout::kInterleaved) {
      add(name, default_virtual_stages(name));
    } else if (virtual_stages > 0) {
      add(name, virtual_stages);
    } else {
      add(name, 2);
      if (4 * devices <= layers) add(name, 4);
    }
  }
  return out;
}

namespace {

std::string time_text(double s) {
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

// The plan that fits (memory-aware), else the plan ignoring memory (what it would need), else an
// Evaluation whose error says why the schedule cannot run the request.
Evaluation try_schedule(PlanRequest q) {
  q.allow_oom = false;
  try {
    return evaluate_plan(make_plan(q), 0, true);
  } catch (const InputError&) {
    q.allow_oom = true;
    try {
      return evaluate_plan(make_plan(q), 0, true);
    } catch (const InputError& again) {
      return Evaluation::failure(again.what());
    }
  }
}

// `a` beats `b`: faster beyond 1e-9 relative, or as fast with less peak memory.
bool faster(const Evaluation& a, const Evaluation& b) {
  const double tol = 1e-9 * std::max(a.iteration_time_s, b.iteration_time_s);
  if (a.iteration_time_s < b.iteration_time_s - tol) return true;
  if (a.iteration_time_s > b.iteration_time_s + tol) return false;
  return a.peak_memory_max_bytes < b.peak_memory_max_bytes;
}

// The fastest trial that ran and (unless `any`) fits; -1 when none.
int fastest(const std::vector<ScheduleTrial>& trials, bool any) {
  int best = -1;
  for (size_t i = 0; i < trials.size(); ++i) {
    const Evaluation& e = trials[i].evaluation;
    if (!e.ok() || !e.simulated || (!any && !e.fits)) continue;
    if (best < 0 || faster(e, trials[static_cast<size_t>(best)].evaluation)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

std::string bytes_text(double b) {
  if (b < kMiB) return fmt::format("{:.1f} KiB", b / 1024);
  if (b < kGiB) return fmt::format("{:.1f} MiB", b / kMiB);
  return fmt::format("{:.2f} GiB", b / kGiB);
}

std::string over_text(const Evaluation& e) {
  return fmt::format("needs {:.2f} GiB of {:.2f} GiB on {}",
                     (e.capacity_bytes + e.over_bytes) / kGiB, e.capacity_bytes / kGiB,
                     e.oom_device);
}

std::string verdict(const ScheduleTrial& t, const ScheduleTrial* winner, bool is_winner) {
  const Evaluation& e = t.evaluation;
  if (!e.ok()) return "cannot run: " + e.error;
  if (is_winner) return e.fits ? "chosen" : "chosen, does not fit: " + over_text(e);
  if (!e.fits) return "does not fit: " + over_text(e);
  if (winner == nullptr) return "fits";  // not reached: a fitting trial makes a winner
  const Evaluation& w = winner->evaluation;
  if (e.iteration_time_s <= w.iteration_time_s * (1 + 1e-9)) {  // a tie
    if (e.peak_memory_max_bytes > w.peak_memory_max_bytes) {
      return fmt::format("as fast, more memory: {} vs {}", bytes_text(e.peak_memory_max_bytes),
                         bytes_text(w.peak_memory_max_bytes));
    }
    return fmt::format("as fast and as lean: the tie goes to {}, tried first",
                       winner->candidate.label());
  }
  return fmt::format("slower: {} vs {}", time_text(e.iteration_time_s),
                     time_text(w.iteration_time_s));
}

}  // namespace

ScheduleSearch search_schedules(const PlanRequest& request,
                                const std::vector<ScheduleCandidate>& candidates) {
  ScheduleSearch out;
  for (const auto& c : candidates) {
    PlanRequest q = request;
    q.schedule = c.schedule;
    q.virtual_stages = c.virtual_stages;
    out.trials.push_back({c, try_schedule(q), ""});
  }
  out.chosen = fastest(out.trials, false);
  if (out.chosen < 0 && request.allow_oom) out.chosen = fastest(out.trials, true);
  const ScheduleTrial* winner =
      out.chosen >= 0 ? &out.trials[static_cast<size_t>(out.chosen)] : nullptr;
  for (size_t i = 0; i < out.trials.size(); ++i) {
    out.trials[i].verdict = verdict(out.trials[i], winner, static_cast<int>(i) == out.chosen);
  }
  if (winner != nullptr) {
    out.request = request;
    out.request.schedule = winner->candidate.schedule;
    out.request.virtual_stages = winner->candidate.virtual_stages;
  }
  return out;
}

std::string search_refusal(const ScheduleSearch& search) {
  const ScheduleTrial* leanest = nullptr;
  std::vector<std::string> tried;
  for (const auto& t : search.trials) {
    tried.push_back(t.candidate.label());
    const auto& e = t.evaluation;
    if (!e.ok() || !e.simulated) continue;
    if (!leanest || e.over_bytes < leanest->evaluation.over_bytes) leanest = &t;
  }
  if (leanest == nullptr) {
    return fmt::format("--schedule auto: no schedule can run the request (tried {}); {}: {}",
                       fmt::join(tried, ", "), search.trials.front().candidate.label(),
                       search.trials.front().evaluation.error);
  }
  const auto& e = leanest->evaluation;
  return fmt::format(
      "--schedule auto: no schedule fits (tried {}); the leanest, {}, needs {:.2f} GiB of "
      "{:.2f} GiB on {}; try more stages, checkpointing, or a smaller micro-batch",
      fmt::join(tried, ", "), leanest->candidate.label(), (e.capacity_bytes + e.over_bytes) / kGiB,
      e.capacity_bytes / kGiB, e.oom_device);
}

}  // namespace pipetwin::sim
