// Schedule choice by micro-batch count: which pipeline schedule to pick at each M.
//
// A sweep that runs two or more schedules (1f1b, zb-h1, zb-h2, interleaved-1f1b, zbv, ...) over
// several micro-batch counts M answers "which schedule is fastest here, and does it fit?". The
// answer changes with M: the bubble of every schedule shrinks as M grows, but the schedules that
// remove more of it (zb-h2, interleaved-1f1b with v > 1) hold more activations or weight
// gradients in flight, so at some M the fastest one no longer fits in device memory and the
// choice *flips* to a leaner one (or a schedule that was refused at small M, like zbv with
// M < 2K - 1, becomes runnable and wins).
//
// From a sweep CSV (`pipetwin sweep`'s columns, studies/sweep/sweep.hpp, or a hand-written table
// with the same names) this computes, per M:
//   winner      the fastest schedule that fits in memory (`fits` = yes and no `error`; a table
//               without `fits` compares peak_memory_max_bytes with memory_capacity_bytes, or
//               takes every point as fitting); ties go to the lower peak memory, then to the
//               schedule seen first in the file. A point that does not fit is never a winner.
//   runner-up   the second fastest that fits, and how much slower it is
//   not fitting the schedules that ran but need more memory than the device has, with their peak
//   cannot run  the schedules with no plan at this M (the sweep's `error`, e.g. a layout refusal)
//   flip        the winner differs from the winner of the previous M (both rows have one)
// A candidate that runs at no M (a layout the sweep cannot place) and an M at which no candidate
// runs (a batch that M does not divide) are left out of the table and the plot, and listed with
// the sweep's reason. A candidate with the same time and memory as an earlier one at every M
// (interleaved-1f1b with v = 1 is 1f1b) is folded into it and named as its alias.
//
// Columns read: `schedule`; M from `plan_M` (the M that ran, also for chunks=auto), else
// `chunks`, else `M`; `iteration_time_s`; `peak_memory_max_bytes`; `memory_capacity_bytes`,
// `fits`, `error` when present. A virtual-stages column (`virtual_stages`, `v` or any input named
// "*virtual*") qualifies the schedule: a schedule run with two v values is two candidates,
// "interleaved-1f1b v=2" and "interleaved-1f1b v=1".
//
// Groups: every other input column that varies in the file (stages, batch, model, cluster, ...;
// `pipetwin sweep`'s knobs are the columns between `points` and `plan_M`) splits the rows into
// groups, each answered on its own (one table and one plot per group); a group needs two
// candidates and two values of M, else it has no answer. A `.best.csv` summary (a `rank` column)
// holds only the top points and is not analysed.
//
// Thread-safety: plain value types and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/csv_table.hpp"

namespace pipetwin::report {

// One schedule at one M.
struct SchedulePoint {
  std::string schedule;  // candidate name: the schedule, with " v=N" when v varies for it
  double m = 0;
  bool ran = false;            // it has an iteration time (no `error`)
  bool fits = false;           // ran and fits in memory
  double iteration_s = 0;      // when ran
  double peak_bytes = -1;      // -1: unknown
  double capacity_bytes = -1;  // -1: unknown
  std::string error;           // why it has no plan (cannot run)
};

struct ScheduleChoiceRow {
  double m = 0;
  std::optional<SchedulePoint> winner, runner_up;
  std::vector<SchedulePoint> not_fitting;  // ran, over memory; fastest first
  std::vector<SchedulePoint> cannot_run;   // no plan at this M; in candidate order
  bool flip = false;                       // winner differs from the previous row's winner
  std::string previous;                    // the previous row's winner when flip
};

struct ScheduleChoiceGroup {
  std::string label;                     // "stages=8 batch=64", or "all" with one group
  std::vector<std::string> fixed;        // "model=gpt2:1.5b", ...: inputs constant in the group
  std::vector<std::string> candidates;   // in order of first appearance
  std::vector<ScheduleChoiceRow> rows;   // by increasing M
  std::vector<SchedulePoint> points;     // every (candidate, M) point, for the plot
  std::vector<SchedulePoint> never_ran;  // candidates that ran at no M: their first point
  std::vector<SchedulePoint> skipped_m;  // an M at which no candidate ran: its first point
  std::vector<std::string> aliases;      // "interleaved-1f1b v=1 = 1f1b": folded into the latter
  double capacity_bytes = -1;            // the device memory, when the table says it

  size_t flips() const;
  // "zb-h2 for M = 8-16, zbv for M = 24-64" (winners in runs of consecutive rows).
  std::string summary() const;
  // One line per left-out candidate, alias and M: "dualpipev ran at no M: <error>",
  // "interleaved-1f1b v=1 = 1f1b: the same time and memory at every M",
  // "M = 40: no schedule ran: <error>".
  std::vector<std::string> left_out() const;
};

struct ScheduleChoice {
  std::vector<std::string> group_columns;   // the inputs that split the groups
  std::vector<ScheduleChoiceGroup> groups;  // only groups with an answer
};

// The schedule choice of a table, or nullopt when it has no schedule, M or iteration-time
// column, is a `.best.csv` summary, or no group has two candidates over two values of M.
std::optional<ScheduleChoice> schedule_choice(const CsvTable& t);

// "12", or "12.5" for a fractional M.
std::string fmt_m(double m);
// How much slower `slow` is than `fast`: "+3.2 % (12.300 ms)".
std::string fmt_loss(double fast_s, double slow_s);

}  // namespace pipetwin::report
