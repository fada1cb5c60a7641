// Evaluating one configuration: the numbers a sweep row and a capacity candidate report.
//
// A plan is judged in two steps. First its memory: the schedule is walked (core/memory.hpp) and
// each memory's need (sim/memory_pools.hpp: one per device, or one per GPU whose stream sets
// share it) is compared with its capacity: which device runs out, by how much. Then, unless the caller skips plans that do not fit, a full
// discrete-event simulation (sim/pipeline_sim.hpp) gives iteration time, throughput and bubble.
// The compiled schedule is built once and shared by both steps. Its deadlock check is left to
// the simulation (a stalled engine run and the compiler's timeless run stall on the same
// schedules; the error is then the compiler's, word for word), or run alone when a plan that does
// not fit is not simulated: it would cost a tenth of a sweep point otherwise.
//
// The simulation runs the engine only and reads iteration time, throughput and bubble straight
// off its start and end times (steady_metrics), with core/metrics.hpp's definitions: a sweep
// needs three numbers, not a Timeline and every metric (staleness, overlap), which would cost
// about as much again as the simulation. tests/sweep_test.cpp checks the numbers equal
// simulate_plan()'s to the last bit, for every schedule.
//
// evaluate_request() plans first (sim/planner.hpp). A fixed M is planned with allow_oom so that
// a point that does not fit still reports its memory and time; with M = auto the planner's
// fastest fitting M is taken, and when no M fits, the fastest M ignoring memory, so the row can
// still say which device runs out. A request the planner refuses for any other reason (more
// stages than layers, a batch not divisible by dp x M, more devices than the cluster has) is an
// infeasible point: its error text is kept, nothing is thrown.
//
// search_schedules() is `pipetwin plan --schedule auto`: the same request under each candidate
// schedule (with its virtual stages and its own M, auto or given), each planned memory-aware and
// simulated, the fastest steady iteration among those that fit kept. A candidate that fits
// nowhere is planned again ignoring memory, so its line can say which device runs out by how
// much; one the schedule cannot run says why (schedule_refusal's reason, more stages than layers).
// Ties (within 1e-9 relative) go to the lower peak memory, then to the earlier candidate.
//
// Thread-safety: pure functions; safe to call concurrently with distinct arguments.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/plan.hpp"
#include "core/schedule/compiled.hpp"
#include "sim/planner.hpp"

namespace pipetwin::sim {

struct Evaluation {
  std::string error;  // non-empty: infeasible point; nothing below is set
  Plan plan;          // the plan evaluated
  bool simulated = false;
  double iteration_time_s = 0;
  double throughput_samples_per_s = 0;
  double bubble_fraction = 0;
  double peak_memory_max_bytes = 0;  // largest peak over the devices
  double capacity_bytes = 0;         // memory of one device (one GPU) of the cluster
  int physical_units = 0;            // GPUs (CPU cores) the plan occupies (memory_pools.hpp)
  bool fits = false;
  // "device 1 (l4 #1)", or "devices 0, 1 (h100-sxm #0, #1, one memory)": the memory most over
  // its capacity (memory_pools.hpp), if any is
  std::string oom_device;
  double over_bytes = 0;  // what it needs minus its capacity, when it does not fit

  // An infeasible point, and why.
  static Evaluation failure(std::string why) {
    Evaluation e;
    e.error = std::move(why);
    return e;
  }

  bool ok() const { return error.empty(); }
};

struct SteadyMetrics {
  double iteration_time_s = 0;
  double throughput_samples_per_s = 0;
  double bubble_fraction = 0;
};

// compute_metrics()'s iteration time, throughput and bubble fraction from the engine's start and
// end time per action of `schedule`.
SteadyMetrics steady_metrics(const CompiledSchedule& schedule, const std::vector<double>& start,
                             const std::vector<double>& end, bool async, double samples_per_step);

// Memory walk and, if the plan fits or `simulate_unfit`, a simulation of `iterations`
// mini-batches (0: the plan's default). InputErrors from the plan become `error`.
Evaluation evaluate_plan(const Plan& plan, int iterations, bool simulate_unfit);

// Plans `request` (see above) and evaluates the plan. `request.allow_oom` is ignored.
Evaluation evaluate_request(const PlanRequest& request, int iterations, bool simulate_unfit);

// A schedule and the model chunks per device it runs with.
struct ScheduleCandidate {
  std::string schedule;
  int virtual_stages = 1;
  // "zbv", or "interleaved-1f1b v=2" for a schedule of a settable v (interleaved-1f1b).
  std::string label() const;
};

// The candidates of --schedule auto on `devices` devices of a model of `layers` layers. `names`
// empty: the synchronous schedules users pick (gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv,
// dualpipev: the asynchronous ones change what is trained, naive is never faster than gpipe at
// the same M); else those, in that order (unknown names are InputErrors). interleaved-1f1b is
// tried with v = `virtual_stages` when given (> 0), else v = 2, and v = 4 when the model has
// 4 x devices layers; the other schedules with their layout's v.
std::vector<ScheduleCandidate> schedule_candidates(const std::vector<std::string>& names,
                                                   int devices, int layers, int virtual_stages);

// One candidate tried and its outcome.
struct ScheduleTrial {
  ScheduleCandidate candidate;
  // error: it cannot run; fits: the plan it fits with; else the plan ignoring memory (what it
  // needs)
  Evaluation evaluation;
  // "chosen", "slower: 412.30 ms vs 398.10 ms", "as fast, more memory: 60.1 GiB vs 52.0 GiB",
  // "does not fit: needs 92.10 GiB of 80.00 GiB on device 0 (h100-sxm #0)", "cannot run:
  // schedule zbv: needs at least 2D - 1 = 7 ..."
  std::string verdict;
};

struct ScheduleSearch {
  std::vector<ScheduleTrial> trials;  // in candidate order
  int chosen = -1;                    // index of the winner; -1: none fits (and not allow_oom)
  // The winner's request (schedule and virtual stages set), when there is one.
  PlanRequest request;
};

// Tries every candidate on `request` (its schedule and virtual_stages are replaced). With
// request.allow_oom and nothing fitting, the fastest that runs is chosen.
ScheduleSearch search_schedules(const PlanRequest& request,
                                const std::vector<ScheduleCandidate>& candidates);

// Why a search chose nothing, as `plan --schedule auto` refuses: "--schedule auto: no schedule
// fits (tried gpipe, 1f1b, ...); the leanest, zbv, needs 92.10 GiB of 80.00 GiB on device 0 (...);
// try more stages, checkpointing, or a smaller micro-batch", or, when no candidate could run at
// all, the first candidate's reason.
std::string search_refusal(const ScheduleSearch& search);

}  // namespace pipetwin::sim
