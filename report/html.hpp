// `pipetwin report`: one self-contained HTML page over a results folder.
//
// The page needs no network: its CSS and script are inlined (report/report.css and
// report.js, embedded at build time), its charts are SVG drawn by that script from a JSON block
// in the page, and a Content-Security-Policy forbids fetching anything. It shows, in order:
//   runs         an overview table, then per run (report/scan.hpp) its prediction next to
//                its measurement (report/compare.hpp) with `pipetwin compare`'s noise verdict
//                (report/run_compare.hpp; for repeated runs and predictions, their table and
//                the comparison with the median run), the per-action error table, the metrics,
//                and the Gantt charts of the prediction and the (median) measurement side by
//                side on one time axis, with bubbles and overlap shaded (report/gantt.hpp)
//   schedule choice  for a sweep of two or more schedules over several micro-batch counts M:
//                the fastest schedule that fits per M, where the choice flips, and iteration time
//                and peak memory against M per schedule (report/html_schedule_choice.hpp)
//   sweeps       line charts of each metric against the sweep's x column, one line per
//                combination of the other inputs, and the table behind them
//   comparisons  reproduction and validation tables with each row's error
//   tables       other CSV files
//   files        what was skipped and why, and the recognised files not drawn
// Every string from a file is escaped: HTML text through html_escape, the JSON block with <, >
// and & as \u escapes so no file content can close the script element.
//
// When the script has drawn everything it sets data-render-status="ok" on <body> and writes the
// counts of what it drew (Gantt charts and bars, bubble and overlap shades, line charts, lines
// and points, hollow points of schedules that do not fit, flip marks) into data- attributes of
// <body> and a hidden #pt-render-counts element, so a headless browser can check the page
// rendered (tests/report_test.sh, tests/report_schedule_choice_test.cpp).
//
// Thread-safety: pure functions; write_report writes one file.
#pragma once

#include <string>

#include "report/scan.hpp"

namespace pipetwin::report {

std::string render_report(const ReportInputs& in, const ReportOptions& options);
// Renders and writes atomically (temp file + rename, core/json_io.hpp).
void write_report(const ReportInputs& in, const ReportOptions& options, const std::string& path);

// The JSON text embedded in the page for `doc`: invalid UTF-8 replaced, and <, >, & escaped.
std::string script_safe_json(const Json& doc);

// The inlined assets (generated from report.css and report.js at build time).
extern const char* const kReportCss;
extern const char* const kReportJs;

}  // namespace pipetwin::report
