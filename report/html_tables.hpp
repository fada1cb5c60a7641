// The report's HTML tables: metrics, prediction next to measurement, and CSV files.
//
// Rendered on the C++ side so that the numbers read the same without scripts; every string that
// comes from a file passes through html_escape. Relative errors follow report/compare.hpp,
// (predicted - measured) / measured, and studies/reproduce, (ours - paper) / |paper|; a cell is
// marked "ok" under 5 %, "warn" under 15 % and "bad" beyond, thresholds a reader can re-judge
// from the printed value.
//
// Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/compare.hpp"
#include "core/metrics.hpp"
#include "report/run_compare.hpp"
#include "report/scan.hpp"

namespace pipetwin::report {

// Escapes & < > " ' for text and attribute values.
// `s` with every character that `replacements` names replaced by its text.
std::string replace_chars(std::string_view s,
                          std::initializer_list<std::pair<char, std::string_view>> replacements);
std::string html_escape(std::string_view s);

// Human units: "12.3 ms", "1.50 GiB", "45.6 %", "3.21k".
std::string fmt_seconds(double s);
std::string fmt_bytes(double b);
std::string fmt_percent(double fraction);
std::string fmt_number(double v);
// "+4.2 %" with the class ok/warn/bad, or "n/a" for a missing or infinite error.
std::string error_cell(double relative_error);

// One row per run: schedule, iteration time and bubble of each side, the error, and the noise
// verdict (`compared[i]` is run i's, report/run_compare.hpp).
std::string runs_overview_html(const std::vector<RunGroup>& runs,
                               const std::vector<std::optional<RunComparison>>& compared);
// A group's predictions and measured runs: file, median step, and its difference from the median
// run's; the pair drawn and compared marked.
std::string members_html(const RunGroup& g);
// The headline metrics and the per-device table of one metrics file.
std::string metrics_html(const MetricsFile& m);
// Predicted next to measured: summary, per-action medians (timelines) and iteration errors.
std::string comparison_html(const Comparison& c);
// A CSV file as a table (at most `max_rows` rows, the rest counted); comparison CSVs get an
// error column of their own and a headline of median and worst |error|.
std::string csv_html(const CsvFile& f, size_t max_rows);

}  // namespace pipetwin::report
