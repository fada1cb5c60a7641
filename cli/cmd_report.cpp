// `pipetwin report DIR -o report.html`: one self-contained HTML page over a results folder
// (report/html.hpp): Gantt charts of simulated and measured timelines side by side, metrics
// and their comparison (with repeated runs and predictions, `compare`'s noise verdict, printed
// here too), sweep charts, reproduction tables. Files it cannot use are skipped with
// a warning line each on stderr; a folder with nothing usable is a one-line error (exit 2).
// `pipetwin report --schedule-choice sweep.csv` prints the page's "Schedule choice by
// micro-batch count" tables as text instead (report/schedule_choice.hpp), for a terminal.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "report/html.hpp"
#include "report/html_tables.hpp"
#include "report/run_compare.hpp"
#include "report/schedule_choice.hpp"

namespace pipetwin::cli {

namespace {

struct ReportArgs {
  std::string dir, out = "report.html", schedule_choice;
  report::ReportOptions options;
  bool quiet = false;
};

std::string names_with_peak(const std::vector<report::SchedulePoint>& points, bool peak) {
  std::string out;
  for (const auto& p : points) {
    out += (out.empty() ? "" : ", ") + p.schedule;
    if (peak && p.peak_bytes >= 0) out += " (" + report::fmt_bytes(p.peak_bytes) + ")";
  }
  return out;
}

// The header, a rule and the rows, columns padded to their widest cell; the columns in `right`
// right-aligned (cli::Table aligns by the first character, which puts "1f1b" on the right).
std::string aligned(const std::vector<std::vector<std::string>>& rows,
                    const std::vector<bool>& right) {
  std::vector<size_t> width(right.size(), 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t c = 0; c < r.size(); ++c) {
      l += c ? "  " : "";
      l += right[c] ? fmt::format("{:>{}}", r[c], width[c]) : fmt::format("{:<{}}", r[c], width[c]);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    line(rows[i]);
    if (i > 0) continue;
    std::vector<std::string> rule;
    for (size_t w : width) rule.emplace_back(w, '-');
    line(rule);
  }
  return out;
}

std::string group_text(const report::ScheduleChoiceGroup& g) {
  std::vector<std::vector<std::string>> t = {{"M", "fastest that fits", "iteration", "peak memory",
                                              "runner-up", "lost by", "choice",
                                              "did not fit (peak memory)", "could not run"}};
  for (const auto& r : g.rows) {
    std::vector<std::string> row = {report::fmt_m(r.m)};
    if (r.winner) {
      row.push_back(r.winner->schedule);
      row.push_back(report::fmt_seconds(r.winner->iteration_s));
      row.push_back(r.winner->peak_bytes >= 0 ? report::fmt_bytes(r.winner->peak_bytes) : "?");
    } else {
      row.insert(row.end(), {"none fits", "", ""});
    }
    if (r.winner && r.runner_up) {
      row.push_back(r.runner_up->schedule);
      row.push_back(report::fmt_loss(r.winner->iteration_s, r.runner_up->iteration_s));
    } else {
      row.insert(row.end(), {"", ""});
    }
    row.push_back(r.flip ? fmt::format("flips to {} at M = {} (was {})", r.winner->schedule,
                                       report::fmt_m(r.m), r.previous)
                         : "");
    row.push_back(names_with_peak(r.not_fitting, true));
    row.push_back(names_with_peak(r.cannot_run, false));
    t.push_back(std::move(row));
  }
  return aligned(t, {true, false, true, true, false, true, false, false, false});
}

void print_schedule_choice(const std::string& path) {
  const report::CsvTable table = report::read_csv(path);
  const auto choice = report::schedule_choice(table);
  if (!choice) {
    throw InputError(fmt::format(
        "{}: no schedule choice: needs columns schedule, plan_M (or chunks) and "
        "iteration_time_s, and two schedules over two micro-batch counts with the other inputs "
        "equal",
        path));
  }
  const auto& fixed = choice->groups.front().fixed;
  if (!fixed.empty()) fmt::print("fixed: {}\n", fmt::join(fixed, " "));
  for (const auto& g : choice->groups) {
    const std::string label = g.label == "all" ? "" : g.label + ": ";
    const std::string memory =
        g.capacity_bytes > 0 ? " (device memory " + report::fmt_bytes(g.capacity_bytes) + ")" : "";
    fmt::print("\n{}fastest that fits: {}; {} flip{}{}\n", label, g.summary(), g.flips(),
               g.flips() == 1 ? "" : "s", memory);
    for (const auto& line : g.left_out()) fmt::print("left out: {}\n", line);
    fmt::print("{}", group_text(g));
  }
  std::fflush(stdout);
}

void run_report(const ReportArgs& a) {
  if (!a.schedule_choice.empty()) {
    print_schedule_choice(a.schedule_choice);
    if (a.dir.empty()) return;
  }
  if (a.dir.empty()) throw InputError("report: give a results folder (or --schedule-choice FILE)");
  const report::ReportInputs in = report::scan_results(a.dir, a.options);
  for (const auto& w : in.warnings) std::fprintf(stderr, "pipetwin: warning: %s\n", w.c_str());
  if (in.empty()) {
    throw InputError(fmt::format(
        "{}: nothing to report: no timeline, metrics JSON or CSV table found ({} skipped)", a.dir,
        in.warnings.size()));
  }
  report::write_report(in, a.options, a.out);
  if (a.quiet) return;
  size_t pairs = 0, timelines = 0;
  for (const auto& g : in.runs) {
    pairs += g.paired() ? 1 : 0;
    for (const auto& role : g.members) {
      for (const auto& m : role) timelines += m.timeline ? 1 : 0;
    }
  }
  std::printf("%s: %zu runs (%zu timelines, %zu side-by-side pairs), %zu CSV tables, %zu skipped\n",
              a.out.c_str(), in.runs.size(), timelines, pairs, in.csvs.size(), in.warnings.size());
  // Runs measured or predicted several times: the page's verdict in one line each.
  for (const auto& g : in.runs) {
    if (!g.repeated()) continue;
    if (const auto c = report::compare_run_group(g)) {
      std::printf("  %s: %s\n", g.key.c_str(), report::verdict_summary(*c).c_str());
    }
  }
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page over a results folder (timelines, sweeps)");
  cmd->add_option("dir", args->dir, "results folder, searched recursively");
  cmd->add_option("-o,--output", args->out, "HTML file to write")->capture_default_str();
  cmd->add_option("--title", args->options.title, "page title")->capture_default_str();
  cmd->add_option("--max-events", args->options.max_events,
                  "most actions drawn per timeline (whole steps from the first)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sweep-x", args->options.sweep_x,
                  "x column of sweep charts (default: the numeric input with most values)");
  cmd->add_option("--schedule-choice", args->schedule_choice,
                  "print the fastest schedule that fits per micro-batch count M of this sweep "
                  "CSV, and where the choice flips (no DIR needed)");
  cmd->add_flag("-q,--quiet", args->quiet, "print no summary line");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace pipetwin::cli
