#include "report/html_tables.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace pipetwin::report {

std::string replace_chars(std::string_view s,
                          std::initializer_list<std::pair<char, std::string_view>> replacements) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto* r = std::find_if(replacements.begin(), replacements.end(),
                                 [c](const auto& pair) { return pair.first == c; });
    if (r == replacements.end()) {
      out += c;
    } else {
      out += r->second;
    }
  }
  return out;
}

std::string html_escape(std::string_view s) {
  return replace_chars(
      s, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}});
}

std::string fmt_seconds(double s) {
  const double a = std::fabs(s);
  if (a >= 1) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string fmt_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

std::string fmt_percent(double fraction) {
  return fmt::format("{:.1f} %", fraction * 100);
}

std::string fmt_number(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

std::string error_cell(double e) {
  if (!std::isfinite(e)) return "<td class=\"num\">n/a</td>";
  const double a = std::fabs(e);
  const char* cls = a < 0.05 ? "ok" : a < 0.15 ? "warn" : "bad";
  return fmt::format("<td class=\"num err {}\">{:+.1f} %</td>", cls, e * 100);
}

namespace {

std::string td(const std::string& text, bool num = false) {
  return fmt::format("<td{}>{}</td>", num ? " class=\"num\"" : "", html_escape(text));
}

std::string th_row(std::initializer_list<std::string_view> names) {
  std::string out = "<tr>";
  for (auto n : names) out += "<th>" + html_escape(n) + "</th>";
  return out + "</tr>";
}

std::string value(double v, const std::string& unit) {
  if (unit == "fraction") return fmt_percent(v);
  if (unit == "bytes") return fmt_bytes(v);
  if (unit == "samples/s") return fmt_number(v) + " /s";
  if (unit == "s") return fmt_seconds(v);
  return fmt_number(v) + (unit.empty() ? "" : " " + unit);
}

std::string side_cells(const MetricsFile* m, double (*get)(const Metrics&),
                       std::string (*show)(double)) {
  return m ? td(show(get(m->metrics)), true) : td("", true);
}

}  // namespace

std::string runs_overview_html(const std::vector<RunGroup>& runs,
                               const std::vector<std::optional<RunComparison>>& compared) {
  std::string out = "<table class=\"overview\"><thead>";
  out += th_row({"run", "schedule", "predicted iteration", "measured iteration", "error",
                 "predicted bubble", "measured bubble", "noise"});
  out += "</thead><tbody>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunGroup& g = runs[i];
    const MetricsFile* p = g.metrics(kPredicted);
    const MetricsFile* m = g.metrics(kMeasured);
    const std::string schedule = p ? p->metrics.schedule : m ? m->metrics.schedule : "";
    auto iter = [](const Metrics& x) { return x.iteration_time_s; };
    auto bubble = [](const Metrics& x) { return x.bubble_fraction; };
    out += fmt::format("<tr><td><a href=\"#run-{}\">{}</a></td>", i, html_escape(g.key));
    out += td(schedule) + side_cells(p, iter, fmt_seconds) + side_cells(m, iter, fmt_seconds);
    if (p && m && m->metrics.iteration_time_s > 0) {
      out += error_cell((p->metrics.iteration_time_s - m->metrics.iteration_time_s) /
                        m->metrics.iteration_time_s);
    } else {
      out += td("");
    }
    out += side_cells(p, bubble, fmt_percent) + side_cells(m, bubble, fmt_percent);
    const bool c = i < compared.size() && compared[i];
    out += td(c ? verdict_summary(*compared[i]) : "") + "</tr>";
  }
  return out + "</tbody></table>";
}

std::string members_html(const RunGroup& g) {
  const MetricsFile* median = g.metrics(kMeasured);
  const double ref = median ? median_step_s(median->metrics) : 0;
  std::string out = "<table class=\"members\"><thead>";
  out += th_row({"", "file", "median step", "vs the median run"}) + "</thead><tbody>";
  for (Role r : {kPredicted, kMeasured}) {
    for (size_t i = 0; i < g.members[r].size(); ++i) {
      const RunMember& m = g.members[r][i];
      const bool chosen = static_cast<int>(i) == g.chosen[r];
      std::string what = r == kPredicted ? "prediction" : "run";
      if (chosen) what = r == kPredicted ? "prediction compared" : "median run (compared)";
      const std::string path = m.timeline ? m.timeline->path : m.metrics ? m.metrics->path : "";
      out += fmt::format("<tr{}>", chosen ? " class=\"chosen\"" : "") + td(what) + "<td><code>" +
             html_escape(path) + "</code></td>";
      if (m.metrics) {
        const double t = median_step_s(m.metrics->metrics);
        out += td(fmt_seconds(t), true) + (ref > 0 ? error_cell((t - ref) / ref) : td("", true));
      } else {
        out += td("no metrics (not a pipetwin timeline)") + td("");
      }
      out += "</tr>";
    }
  }
  return out + "</tbody></table>";
}

std::string metrics_html(const MetricsFile& f) {
  const Metrics& m = f.metrics;
  std::string out = "<table class=\"kv\"><tbody>";
  auto row = [&](std::string_view k, const std::string& v) {
    out += "<tr><th>" + html_escape(k) + "</th>" + td(v, true) + "</tr>";
  };
  row("source", f.derived ? m.source + " (computed from the timeline)" : m.source);
  row("schedule", m.schedule);
  row("steps", std::to_string(m.steps));
  row("iteration time",
      fmt_seconds(m.iteration_time_s) + (m.steady_state ? " (steady state)" : " (whole run)"));
  row("median step", fmt_seconds(m.iteration_time_median_s));
  row("throughput", fmt_number(m.throughput_samples_per_s) + " samples/s");
  row("bubble fraction", fmt_percent(m.bubble_fraction));
  row("communication",
      fmt_seconds(m.comm_time_s) + ", " + fmt_percent(m.comm_overlap_fraction) + " overlapped");
  row("makespan", fmt_seconds(m.makespan_s));
  out += "</tbody></table><table class=\"devices\"><thead>";
  out += th_row({"device", "utilization", "busy", "comm", "peak memory"}) + "</thead><tbody>";
  for (const auto& d : m.devices) {
    out += "<tr>" + td(d.name) + td(fmt_percent(d.utilization), true) +
           td(fmt_seconds(d.busy_s), true) + td(fmt_seconds(d.comm_s), true) +
           td(fmt_bytes(d.peak_memory_bytes), true) + "</tr>";
  }
  out += "</tbody></table>";
  const bool stale = std::any_of(m.staleness.begin(), m.staleness.end(),
                                 [](const StageStaleness& s) { return s.max > 0; });
  if (stale) {
    out += "<p class=\"note\">weight staleness per stage (max steps): ";
    for (size_t s = 0; s < m.staleness.size(); ++s) {
      out += fmt::format("{}s{}: {}", s ? ", " : "", s, m.staleness[s].max);
    }
    out += "</p>";
  }
  return out;
}

namespace {

std::string compare_rows(const std::vector<CompareRow>& rows) {
  std::string out = "<table class=\"compare\"><thead>";
  out += th_row({"quantity", "predicted", "measured", "error"}) + "</thead><tbody>";
  for (const auto& r : rows) {
    out += "<tr>" + td(r.quantity) + td(value(r.predicted, r.unit), true) +
           td(value(r.measured, r.unit), true) + error_cell(r.error()) + "</tr>";
  }
  return out + "</tbody></table>";
}

}  // namespace

std::string comparison_html(const Comparison& c) {
  std::string out = "<div class=\"comparison\">";
  if (!c.iterations.empty()) {
    out += fmt::format(
        "<p class=\"headline\">iteration-time error: median {:.1f} %, worst {:.1f} % (iteration "
        "{})</p>",
        c.median_abs_iteration_error * 100, c.worst_abs_iteration_error * 100, c.worst_iteration);
  }
  out += compare_rows(c.summary);
  if (!c.actions.empty()) {
    out +=
        "<details class=\"actions\" open><summary>error per action kind and stage (median "
        "duration over the headline's iterations)</summary>" +
        compare_rows(c.actions) + "</details>";
  }
  if (!c.iterations.empty()) {
    out +=
        "<details><summary>every iteration</summary>" + compare_rows(c.iterations) + "</details>";
  }
  return out + "</div>";
}

namespace {

// (ours - reference) / |reference| of one comparison row; NaN when either is missing.
double row_error(const std::vector<std::string>& row, const ComparisonColumns& c) {
  const auto ref = parse_number(row[static_cast<size_t>(c.reference)]);
  const auto ours = parse_number(row[static_cast<size_t>(c.ours)]);
  if (!ref || !ours || *ref == 0) return std::numeric_limits<double>::quiet_NaN();
  return (*ours - *ref) / std::fabs(*ref);
}

std::string comparison_headline(const CsvTable& t, const ComparisonColumns& c) {
  std::vector<double> errors;
  double worst = -1;
  std::string worst_item;
  for (const auto& row : t.rows) {
    const double e = std::fabs(row_error(row, c));
    if (!std::isfinite(e)) continue;
    errors.push_back(e);
    if (e > worst) {
      worst = e;
      worst_item = c.item >= 0 ? row[static_cast<size_t>(c.item)] : "";
    }
  }
  if (errors.empty()) return "<p class=\"headline\">no row has both values</p>";
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  return fmt::format(
      "<p class=\"headline\">{} rows compared ({} vs {}): median |error| {:.1f} %, worst {:.1f} "
      "% ({})</p>",
      n, html_escape(t.columns[static_cast<size_t>(c.ours)]),
      html_escape(t.columns[static_cast<size_t>(c.reference)]), median * 100, worst * 100,
      html_escape(worst_item));
}

}  // namespace

std::string csv_html(const CsvFile& f, size_t max_rows) {
  const CsvTable& t = f.table;
  const auto cmp = f.kind == CsvKind::kComparison ? comparison_columns(t) : std::nullopt;
  std::string out = cmp ? comparison_headline(t, *cmp) : "";
  std::vector<bool> numeric(t.columns.size());
  for (size_t c = 0; c < t.columns.size(); ++c) numeric[c] = t.numeric(c);
  out += "<div class=\"scroll\"><table class=\"csv\"><thead><tr>";
  for (const auto& c : t.columns) out += "<th>" + html_escape(c) + "</th>";
  if (cmp) out += "<th>error (ours vs reference)</th>";
  out += "</tr></thead><tbody>";
  const size_t n = std::min(max_rows, t.rows.size());
  for (size_t r = 0; r < n; ++r) {
    out += "<tr>";
    for (size_t c = 0; c < t.columns.size(); ++c) out += td(t.rows[r][c], numeric[c]);
    if (cmp) out += error_cell(row_error(t.rows[r], *cmp));
    out += "</tr>";
  }
  out += "</tbody></table></div>";
  if (n < t.rows.size()) {
    out += fmt::format("<p class=\"note\">{} more rows not shown (see the CSV file)</p>",
                       t.rows.size() - n);
  }
  return out;
}

}  // namespace pipetwin::report
