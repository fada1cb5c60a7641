// What `pipetwin report DIR` finds in a results folder, grouped for the page.
//
// Walks DIR recursively (hidden folders such as .ipynb_checkpoints left out, files in path
// order) and reads every *.json and *.csv:
//   timeline  a Chrome trace: pipetwin's ("otherData.format": "pipetwin.timeline", written by
//             `simulate --timeline` and `run --timeline`) or any other Chrome trace event file
//   metrics   "format": "pipetwin.metrics" (`simulate --metrics`, `run --metrics`)
//   plan      "format": "pipetwin.plan": not drawn; its batch size gives throughput to a run
//             that has a timeline but no metrics file
//   CSV       comparison, sweep or plain table (report/csv_table.hpp)
// Anything else, and any file that fails to parse, is skipped with a warning naming the file.
//
// Runs and the predicted/measured pairing convention. A file's *run key* is its path relative
// to DIR without ".json" and without a trailing type word (".timeline", ".trace", ".metrics",
// ".plan"); a trailing *role word* is then taken off too, with an optional repeat number N
// glued to it or after "-" or "_":
//   predicted, prediction, simulated, sim   -> a prediction
//   measured, measurement, run, real        -> a measurement
// so `X.predicted.timeline.json`, `X.measured.timeline.json`, `X.sim.trace.json`,
// `X.run.trace.json`, `X.predicted.metrics.json` and `X.plan.json` all belong to run "X", and
// the report puts the two timelines side by side with one time axis and compares them. A file
// without a role word takes its role from its content ("source": "simulated" or "measured");
// a foreign Chrome trace without one counts as a measurement.
//
// Repeated runs and predictions (scripts/main-job.sh): `X.run1.trace.json` .. `X.run4...` are
// four measured runs of plan X, `X.sim.trace.json` its prediction from the profile the plan was
// made with, and `X.sim-1.trace.json` .. `X.sim-4...` predictions of the same plan from profiles
// measured between the runs. They form one group, as `pipetwin compare X.sim X.run1 .. X.run4
// --also-predicted X.sim-1 .. X.sim-4` takes them: the measured side is the MEDIAN run (by its
// median step, report/compare.hpp median_step_s; the lower middle one of an even count), the
// predicted side the unnumbered prediction (or, when all predictions are numbered, the median
// one); the others give the runs' and the predictions' spreads (report/run_compare.hpp).
// A timeline and a metrics file with the same key, role and number are one member.
//
// Thread-safety: plain value types; scan_results reads the file system.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/timeline.hpp"
#include "report/csv_table.hpp"
#include "report/gantt.hpp"

namespace pipetwin::report {

struct ReportOptions {
  std::string title = "pipetwin report";
  size_t max_events = 20000;  // per timeline; larger ones are cut to their first steps
  std::string sweep_x;        // x column of sweep charts, when the naming rule picks wrong
  size_t max_table_rows = 200;
};

enum Role { kPredicted = 0, kMeasured = 1 };
const char* role_name(Role r);  // "predicted", "measured"

struct TimelineFile {
  std::string path;                  // relative to DIR
  std::optional<Timeline> timeline;  // pipetwin timelines only
  Gantt gantt;
};

struct MetricsFile {
  std::string path;      // relative to DIR; for derived metrics the timeline's path
  bool derived = false;  // computed from the timeline (no metrics file)
  Metrics metrics;
};

// One measured run or one prediction of a group: its timeline and its metrics.
struct RunMember {
  int number = -1;  // N of X.run<N>, X.sim-<N>; -1 for an unnumbered X.run, X.sim
  std::optional<TimelineFile> timeline;
  std::optional<MetricsFile> metrics;  // derived from the timeline when no metrics file came
};

struct RunGroup {
  std::string key;
  std::array<std::vector<RunMember>, 2> members;  // by Role; the unnumbered first, then by N
  // The member drawn and compared, by Role (see the header comment); -1 when there is none.
  std::array<int, 2> chosen = {-1, -1};
  double samples_per_step = 0;  // from the run's plan; 0 when there is none
  // The plan's layout, from its file: "1f1b, K=4 x dp 2 x t=2 (sequence parallel), M=16,
  // distributed optimizer"; empty without a plan.
  std::string layout;

  const RunMember* pick(Role r) const;
  const TimelineFile* timeline(Role r) const;  // of the chosen member; nullptr when none
  const MetricsFile* metrics(Role r) const;
  bool paired() const { return timeline(kPredicted) && timeline(kMeasured); }
  // More than one measured run or more than one prediction.
  bool repeated() const { return members[kPredicted].size() > 1 || members[kMeasured].size() > 1; }
};

struct CsvFile {
  std::string path;  // relative to DIR
  CsvTable table;
  CsvKind kind = CsvKind::kTable;
};

struct ReportInputs {
  std::string root;
  std::vector<RunGroup> runs;          // in key order
  std::vector<CsvFile> csvs;           // in path order
  std::vector<std::string> not_shown;  // recognised files the report does not draw (plans, ...)
  std::vector<std::string> warnings;   // "<path>: <why it was skipped>"
  bool empty() const { return runs.empty() && csvs.empty(); }
};

// The run key, role word and repeat number of a file name relative to DIR (see the header
// comment); role is nullopt when the name has no role word.
struct RunName {
  std::string key;
  std::optional<Role> role;
  int number = -1;  // the repeat number after the role word; -1 for none
};
RunName parse_run_name(const std::string& relative_path);

// The index of the member to draw and compare among `members` (one role's): the median one by
// median_step_s among those with metrics (the first when none has), or, when `prefer_unnumbered`
// and there is one, the unnumbered member. -1 for none.
int choose_member(const std::vector<RunMember>& members, bool prefer_unnumbered);

// K (the number of stages: the largest stage index + 1) and whether the timeline's schedule is
// asynchronous (core/schedule/generators.hpp; false for an unknown schedule name).
int timeline_stages(const Timeline& t);
bool timeline_async(const Timeline& t);

// InputError when `dir` is not a readable folder. Never throws for a bad file inside it.
ReportInputs scan_results(const std::string& dir, const ReportOptions& options);

}  // namespace pipetwin::report
