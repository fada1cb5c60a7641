#include "report/html.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/json_io.hpp"
#include "report/html_schedule_choice.hpp"
#include "report/html_tables.hpp"
#include "report/run_compare.hpp"

namespace pipetwin::report {

std::string script_safe_json(const Json& doc) {
  const std::string text = doc.dump(-1, ' ', false, Json::error_handler_t::replace);
  return replace_chars(text, {{'<', "\\u003c"}, {'>', "\\u003e"}, {'&', "\\u0026"}});
}

namespace {

struct Page {
  const ReportInputs& in;
  const ReportOptions& opt;
  Json gantts = Json::array();
  Json charts = Json::array();
  std::vector<std::optional<RunComparison>> compared = {};  // of in.runs (run_compare.hpp)

  std::string gantt_host(const TimelineFile& f, const std::string& role_html, double scale_end_s);
  std::string run_comparison(size_t index, const RunGroup& g);
  std::string run_article(size_t index, const RunGroup& g);
  std::string runs_section();
  std::string sweep_article(const CsvFile& f);
  std::string csv_section(CsvKind kind, const char* id, const char* title, const char* intro);
  std::string schedule_choice_section();
  std::string files_section();
  std::string render();
};

std::string Page::gantt_host(const TimelineFile& f, const std::string& role_html,
                             double scale_end_s) {
  const Gantt& g = f.gantt;
  const size_t index = gantts.size();
  gantts.push_back(gantt_to_json(g, scale_end_s));
  std::string caption = fmt::format("{} <code>{}</code>", role_html, html_escape(f.path));
  if (!g.schedule.empty()) caption += " · " + html_escape(g.schedule);
  caption += fmt::format(" · idle {} of compute rows · {} of communication overlapped",
                         fmt_percent(g.idle_fraction), fmt_percent(g.overlap_fraction));
  if (g.events.size() < g.total_events) {
    caption += fmt::format(
        "<br><span class=\"note\">showing {} of {} actions ({}); raise --max-events to see "
        "more</span>",
        g.events.size(), g.total_events,
        g.total_steps > 0 ? fmt::format("the first {} of {} steps", g.shown_steps, g.total_steps)
                          : std::string("the earliest"));
  }
  return fmt::format(
      "<figure class=\"gantt\"><figcaption>{}</figcaption><div class=\"gantt-host\" "
      "data-gantt=\"{}\"></div></figure>",
      caption, index);
}

std::string Page::run_comparison(size_t index, const RunGroup& g) {
  if (index >= compared.size() || !compared[index]) return "";
  const RunComparison& rc = *compared[index];
  const NoiseVerdict& v = rc.verdict;
  const char* cls = v.kind == NoiseVerdict::kOneRun ? "one-run" : v.within ? "within" : "outside";
  std::string out = "<h4>prediction next to measurement</h4>";
  out += fmt::format("<p class=\"verdict {}\" data-verdict=\"{}\">{}</p>", cls, cls,
                     html_escape(v.text));
  if (g.repeated()) out += members_html(g);
  return out + comparison_html(rc.comparison);
}

// A Gantt caption's role: "<b>measured</b> · median of 4 runs", "<b>predicted</b> · 1 of 5
// predictions".
std::string role_caption(const RunGroup& g, Role r) {
  const size_t n = g.members[r].size();
  const std::string role = fmt::format("<b>{}</b>", role_name(r));
  if (n < 2) return role;
  return role + (r == kMeasured ? fmt::format(" · median of {} runs", n)
                                : fmt::format(" · 1 of {} predictions", n));
}

std::string Page::run_article(size_t index, const RunGroup& g) {
  std::string out =
      fmt::format("<article class=\"run\" id=\"run-{}\"><h3>{}</h3>", index, html_escape(g.key));
  if (!g.layout.empty()) {
    out += fmt::format("<p class=\"layout\">layout: {}</p>", html_escape(g.layout));
  }
  out += run_comparison(index, g);
  out += "<div class=\"side-by-side\">";
  for (Role r : {kPredicted, kMeasured}) {
    const MetricsFile* m = g.metrics(r);
    if (!m) continue;
    out += fmt::format("<div><h4>{} metrics <code>{}</code></h4>{}</div>", role_name(r),
                       html_escape(m->path), metrics_html(*m));
  }
  out += "</div>";
  double scale_end = 0;
  for (Role r : {kPredicted, kMeasured}) {
    if (const TimelineFile* t = g.timeline(r)) scale_end = std::max(scale_end, t->gantt.end_s);
  }
  if (g.timeline(kPredicted) || g.timeline(kMeasured)) {
    out += fmt::format("<div class=\"gantt-group{}\">", g.paired() ? " pair" : "");
    for (Role r : {kPredicted, kMeasured}) {
      if (const TimelineFile* t = g.timeline(r)) {
        out += gantt_host(*t, role_caption(g, r), scale_end);
      }
    }
    out += "</div>";
  }
  return out + "</article>";
}

std::string Page::runs_section() {
  if (in.runs.empty()) return "";
  for (const auto& g : in.runs) compared.push_back(compare_run_group(g));
  std::string out =
      "<section id=\"runs\"><h2>Runs: prediction and measurement</h2>" +
      runs_overview_html(in.runs, compared) +
      "<p class=\"note\">A run measured several times (<code>X.run1</code>, "
      "<code>X.run2</code>, ...) is compared with its median run, and predicted from profiles "
      "measured between the runs (<code>X.sim-1</code>, ...) too: the error is noise where the "
      "predictions' range and the runs' range overlap (<code>pipetwin compare</code>'s "
      "verdict).</p>" +
      "<p class=\"note\">Gantt charts: one row per device stream, one bar per action (number: "
      "micro-batch). Hatched: compute idle (bubble). Green strip under a transfer: the part "
      "hidden behind the same device's compute. Hover a bar for details.</p>";
  for (size_t i = 0; i < in.runs.size(); ++i) out += run_article(i, in.runs[i]);
  return out + "</section>";
}

std::string Page::sweep_article(const CsvFile& f) {
  const auto layout = sweep_layout(f.table, opt.sweep_x);
  std::string out =
      fmt::format("<article class=\"sweep\"><h3><code>{}</code></h3>", html_escape(f.path));
  if (!layout) return out + "</article>";
  std::string lines = "one line";
  if (!layout->series_columns.empty()) {
    lines = "a line per";
    for (const auto& c : layout->series_columns) lines += " " + html_escape(c);
  }
  out += fmt::format("<p class=\"note\">{} rows; x: <b>{}</b>; {}.</p><div class=\"charts\">",
                     f.table.rows.size(), html_escape(layout->x_column), lines);
  for (const auto& c : layout->charts) {
    Json series = Json::array();
    for (const auto& s : c.series) series.push_back({{"name", s.name}, {"x", s.x}, {"y", s.y}});
    const size_t index = charts.size();
    charts.push_back({{"x", c.x_column}, {"y", c.metric}, {"series", series}});
    std::string note;
    if (c.dropped_series > 0) note += fmt::format("{} more lines not drawn. ", c.dropped_series);
    if (c.skipped_points > 0) {
      note += fmt::format("{} points without a value (infeasible) left out.", c.skipped_points);
    }
    out += fmt::format(
        "<figure class=\"line\"><div class=\"line-host\" data-chart=\"{}\"></div>{}</figure>",
        index, note.empty() ? "" : "<figcaption class=\"note\">" + note + "</figcaption>");
  }
  out += "</div><details><summary>the table</summary>" + csv_html(f, opt.max_table_rows) +
         "</details>";
  return out + "</article>";
}

std::string Page::csv_section(CsvKind kind, const char* id, const char* title, const char* intro) {
  std::string body;
  for (const auto& f : in.csvs) {
    if (f.kind != kind) continue;
    if (kind == CsvKind::kSweep) {
      body += sweep_article(f);
    } else {
      body += fmt::format("<article class=\"csv\"><h3><code>{}</code></h3>{}</article>",
                          html_escape(f.path), csv_html(f, opt.max_table_rows));
    }
  }
  if (body.empty()) return "";
  return fmt::format("<section id=\"{}\"><h2>{}</h2><p class=\"note\">{}</p>{}</section>", id,
                     title, intro, body);
}

std::string Page::schedule_choice_section() {
  std::string body;
  for (const auto& f : in.csvs) {
    if (f.kind == CsvKind::kComparison) continue;
    if (const auto choice = schedule_choice(f.table)) {
      body += schedule_choice_html(f, *choice, charts);
    }
  }
  if (body.empty()) return "";
  return "<section id=\"schedule-choice\"><h2>Schedule choice by micro-batch count</h2><p "
         "class=\"note\">Per micro-batch count M: the fastest schedule that fits in device "
         "memory, the runner-up and how much slower it is, the schedules over memory and those "
         "that could not run (hover for why). Highlighted rows: the choice flips. Charts: hollow "
         "points on dashed lines do not fit; vertical marks are the flips.</p>" +
         body + "</section>";
}

std::string Page::files_section() {
  std::string out = "<section id=\"files\"><h2>Files</h2>";
  if (!in.warnings.empty()) {
    out += "<h4>skipped</h4><ul class=\"warnings\">";
    for (const auto& w : in.warnings) out += "<li>" + html_escape(w) + "</li>";
    out += "</ul>";
  }
  if (!in.not_shown.empty()) {
    out += "<h4>recognised, not drawn</h4><ul>";
    for (const auto& n : in.not_shown) out += "<li><code>" + html_escape(n) + "</code></li>";
    out += "</ul>";
  }
  return out + "</section>";
}

std::string Page::render() {
  std::string sections = runs_section();
  sections += schedule_choice_section();
  sections += csv_section(CsvKind::kSweep, "sweeps", "Sweeps",
                          "Each numeric metric column against the sweep's x column.");
  sections += csv_section(CsvKind::kComparison, "comparisons", "Reproduction and validation",
                          "Error = (ours - reference) / |reference| per row.");
  sections += csv_section(CsvKind::kTable, "tables", "Other tables", "");
  sections += files_section();
  Json data;
  data["gantts"] = gantts;
  data["charts"] = charts;
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  page +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  page += fmt::format("<title>{}</title>\n<style>\n{}</style></head>\n", html_escape(opt.title),
                      kReportCss);
  page += "<body data-render-status=\"pending\">\n";
  page += fmt::format(
      "<header><h1>{}</h1><p class=\"note\">results folder <code>{}</code>: {} runs, {} CSV "
      "tables, {} files skipped</p><noscript>Charts need JavaScript; tables are "
      "below.</noscript></header>\n",
      html_escape(opt.title), html_escape(in.root), in.runs.size(), in.csvs.size(),
      in.warnings.size());
  page += sections;
  page += "\n<div id=\"pt-tooltip\" hidden></div><pre id=\"pt-render-counts\" hidden></pre>\n";
  page += "<script type=\"application/json\" id=\"pt-data\">" + script_safe_json(data) +
          "</script>\n<script>\n";
  page += kReportJs;
  return page + "</script>\n</body></html>\n";
}

}  // namespace

std::string render_report(const ReportInputs& in, const ReportOptions& options) {
  Page page{in, options};
  return page.render();
}

void write_report(const ReportInputs& in, const ReportOptions& options, const std::string& path) {
  write_file_atomic(path, render_report(in, options));
}

}  // namespace pipetwin::report
