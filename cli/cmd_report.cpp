// `pipetwin report DIR -o report.html`: one self-contained HTML page over a results folder
// (core/report/html.hpp): Gantt charts of simulated and measured timelines side by side, metrics
// and their comparison, sweep charts, reproduction tables. Files it cannot use are skipped with
// a warning line each on stderr; a folder with nothing usable is a one-line error (exit 2).
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/report/html.hpp"

namespace pipetwin::cli {

namespace {

struct ReportArgs {
  std::string dir, out = "report.html";
  report::ReportOptions options;
  bool quiet = false;
};

void run_report(const ReportArgs& a) {
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
    for (const auto& t : g.timeline) timelines += t ? 1 : 0;
  }
  std::printf("%s: %zu runs (%zu timelines, %zu side-by-side pairs), %zu CSV tables, %zu skipped\n",
              a.out.c_str(), in.runs.size(), timelines, pairs, in.csvs.size(), in.warnings.size());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page over a results folder (timelines, sweeps)");
  cmd->add_option("dir", args->dir, "results folder, searched recursively")->required();
  cmd->add_option("-o,--output", args->out, "HTML file to write")->capture_default_str();
  cmd->add_option("--title", args->options.title, "page title")->capture_default_str();
  cmd->add_option("--max-events", args->options.max_events,
                  "most actions drawn per timeline (whole steps from the first)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sweep-x", args->options.sweep_x,
                  "x column of sweep charts (default: the numeric input with most values)");
  cmd->add_flag("-q,--quiet", args->quiet, "print no summary line");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace pipetwin::cli
