// CSV tables for the report: reading any CSV with a header, and deciding how to show it.
//
// `pipetwin report` shows three kinds of CSV found in a results folder:
//   comparison  a column of the paper's (or the predicted) value next to ours (or the measured):
//               `pipetwin reproduce` tables (item,metric,paper,ours,unit,relative_error,note),
//               its summary.csv, and experiments/validate_executor.py (predicted_ms,measured_ms);
//               shown as a table with each row's relative error (ours - paper) / |paper|
//   sweep       one row per point, one column per input and per metric (`pipetwin sweep`,
//               `pipetwin capacity`); plotted as line charts of each numeric metric column
//               against a numeric input column, one line per combination of the other inputs
//   table       anything else with a header; shown as a table
// A column is a *metric* when its name says it measures something (see is_metric_column); every
// other column is an *input*, except outcome and identity columns (fits, error, oom_*, plan_*,
// point, points, id, rank, ...: what `pipetwin sweep` writes besides its knobs), which are
// neither plotted nor split lines. A CSV with `pipetwin sweep`'s layout (columns "points" ...
// "plan_M") is read by position instead: its knobs are the columns between those two, its
// results the columns after (so final_K of an alpha sweep is plotted, not a line of its own).
// The x column is the numeric input with the most distinct values; every numeric metric that is
// not constant gets a chart. The sweep layout is defined by
// another tool that may add columns, so the report keys on these naming rules rather than on a
// fixed list; `--sweep-x` overrides the x column when the rule picks the wrong one.
//
// Thread-safety: plain value types and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipetwin::report {

struct CsvTable {
  std::string path;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // each the size of `columns`

  // Index of the column named `name`, or -1.
  int column(std::string_view name) const;
  // Every non-empty cell is a number and at least one is.
  bool numeric(size_t col) const;
  // Number of distinct non-empty cells in the column.
  size_t distinct(size_t col) const;
};

// Parses CSV text (RFC 4180: quoted cells may hold commas, quotes and newlines). Lines starting
// with '#' before the header are comments (the reference tables cite their paper that way).
// InputError "<origin>: ..." on an empty file, a duplicate column or a ragged row.
CsvTable parse_csv(std::string_view text, const std::string& origin);
CsvTable read_csv(const std::string& path);

// A cell as a number: plain decimals and exponents, and "12.5%" as 0.125; nullopt otherwise.
std::optional<double> parse_number(std::string_view cell);

// Metric columns: names ending in a unit (_s, _ms, _us, _per_s, _fraction, _bytes, _gib, _mib,
// _usd, _pct) or naming a measured quantity (throughput, bubble, utilization, memory, cost,
// speedup, error, overlap, staleness, time).
bool is_metric_column(std::string_view name);

enum class CsvKind { kComparison, kSweep, kTable };

struct ComparisonColumns {
  int item = -1;       // first non-numeric column, the row's label
  int reference = -1;  // "paper", "predicted", "paper_*", "predicted_*"
  int ours = -1;       // "ours", "measured", "ours_*", "measured_*"
};
// The comparison columns of a table, when it has both a reference and an ours column.
std::optional<ComparisonColumns> comparison_columns(const CsvTable& t);

// One line of a sweep chart: the rows sharing one combination of the other inputs.
struct SweepSeries {
  std::string name;  // "schedule=gpipe stages=4", or "all" when no other input varies
  std::vector<double> x, y;
};
struct SweepChart {
  std::string x_column, metric;
  std::vector<SweepSeries> series;  // at most max_series
  size_t dropped_series = 0;        // series beyond the cap, not drawn
  size_t skipped_points = 0;        // rows whose metric is empty or not a number (infeasible)
};
struct SweepLayout {
  std::string x_column;
  std::vector<std::string> series_columns;  // the other inputs that vary
  std::vector<SweepChart> charts;           // one per numeric metric column
};
// The charts of a sweep CSV, or nullopt when it has no numeric input with two values and a
// numeric metric. `x_hint`, when non-empty and a numeric column of this table, is the x column.
std::optional<SweepLayout> sweep_layout(const CsvTable& t, const std::string& x_hint,
                                        size_t max_series = 12, size_t max_charts = 12);

CsvKind classify_csv(const CsvTable& t, const std::string& x_hint);

}  // namespace pipetwin::report
