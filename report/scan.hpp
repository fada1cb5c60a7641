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
// ".plan"); a trailing *role word* is then taken off too:
//   predicted, prediction, simulated, sim   -> the prediction
//   measured, measurement, run, real        -> the measurement
// so `X.predicted.timeline.json`, `X.measured.timeline.json`, `X.sim.trace.json`,
// `X.run.trace.json`, `X.predicted.metrics.json` and `X.plan.json` all belong to run "X", and
// the report puts the two timelines side by side with one time axis and compares them. A file
// without a role word takes its role from its content ("source": "simulated" or "measured");
// a foreign Chrome trace without one counts as a measurement.
//
// Thread-safety: plain value types; scan_results reads the file system.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "report/csv_table.hpp"
#include "report/gantt.hpp"
#include "core/timeline.hpp"

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

struct RunGroup {
  std::string key;
  std::array<std::optional<TimelineFile>, 2> timeline;  // indexed by Role
  std::array<std::optional<MetricsFile>, 2> metrics;
  double samples_per_step = 0;  // from the run's plan; 0 when there is none
  bool paired() const { return timeline[0] && timeline[1]; }
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

// The run key and role word of a file name relative to DIR (see the header comment);
// role is nullopt when the name has no role word.
struct RunName {
  std::string key;
  std::optional<Role> role;
};
RunName parse_run_name(const std::string& relative_path);

// K (the number of stages: the largest stage index + 1) and whether the timeline's schedule is
// asynchronous (core/schedule/generators.hpp; false for an unknown schedule name).
int timeline_stages(const Timeline& t);
bool timeline_async(const Timeline& t);

// InputError when `dir` is not a readable folder. Never throws for a bad file inside it.
ReportInputs scan_results(const std::string& dir, const ReportOptions& options);

}  // namespace pipetwin::report
