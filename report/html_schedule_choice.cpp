#include "report/html_schedule_choice.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "report/html_tables.hpp"

namespace pipetwin::report {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string num_td(const std::string& html) {
  return "<td class=\"num\">" + html + "</td>";
}

std::string peak_text(const SchedulePoint& p) {
  return p.peak_bytes >= 0 ? fmt_bytes(p.peak_bytes) : std::string("?");
}

// "zb-h2 (81.30 GiB), 1f1b v=2 (90.00 GiB)".
std::string not_fitting_cell(const ScheduleChoiceRow& r) {
  std::string out;
  for (const auto& p : r.not_fitting) {
    out += fmt::format("{}{} <span class=\"note\">({})</span>", out.empty() ? "" : ", ",
                       html_escape(p.schedule), peak_text(p));
  }
  return "<td class=\"unfit\">" + out + "</td>";
}

// The names, each with its error as a tooltip.
std::string cannot_run_cell(const ScheduleChoiceRow& r) {
  std::string out;
  for (const auto& p : r.cannot_run) {
    out += fmt::format("{}<span title=\"{}\">{}</span>", out.empty() ? "" : ", ",
                       html_escape(p.error), html_escape(p.schedule));
  }
  return "<td class=\"note\">" + out + "</td>";
}

std::string row_html(const ScheduleChoiceRow& r) {
  std::string out =
      fmt::format("<tr{}><td class=\"num\">{}</td>", r.flip ? " class=\"flip\"" : "", fmt_m(r.m));
  if (r.winner) {
    out += "<td><b>" + html_escape(r.winner->schedule) + "</b></td>" +
           num_td(fmt_seconds(r.winner->iteration_s)) + num_td(peak_text(*r.winner));
  } else {
    out += "<td class=\"unfit\">none fits</td><td></td><td></td>";
  }
  if (r.winner && r.runner_up) {
    out += "<td>" + html_escape(r.runner_up->schedule) + "</td>" +
           num_td(fmt_loss(r.winner->iteration_s, r.runner_up->iteration_s));
  } else {
    out += "<td></td><td></td>";
  }
  if (r.flip) {
    out += fmt::format("<td class=\"flip-note\">flips to {} at M = {} (was {})</td>",
                       html_escape(r.winner->schedule), fmt_m(r.m), html_escape(r.previous));
  } else {
    out += "<td></td>";
  }
  out += not_fitting_cell(r) + cannot_run_cell(r);
  return out + "</tr>";
}

std::string table_html(const ScheduleChoiceGroup& g) {
  std::string out =
      "<div class=\"scroll\"><table class=\"schedule-choice\"><thead><tr><th>M</th><th>fastest "
      "that fits</th><th>iteration</th><th>peak memory</th><th>runner-up</th><th>lost "
      "by</th><th>choice</th><th>did not fit (peak memory)</th><th>could not run</th></tr>"
      "</thead><tbody>";
  for (const auto& r : g.rows) out += row_html(r);
  return out + "</tbody></table></div>";
}

Json chart(const ScheduleChoiceGroup& g, const std::string& y, double scale, bool memory) {
  Json series = Json::array();
  for (const auto& name : g.candidates) {
    Json xs = Json::array(), ys = Json::array(), fits = Json::array();
    for (const auto& p : g.points) {
      const double v = memory ? p.peak_bytes : p.iteration_s;
      if (p.schedule != name || !p.ran || v < 0) continue;
      xs.push_back(p.m);
      ys.push_back(v / scale);
      fits.push_back(p.fits);
    }
    series.push_back({{"name", name}, {"x", xs}, {"y", ys}, {"fits", fits}});
  }
  Json marks = Json::array(), winners = Json::array();
  for (const auto& r : g.rows) {
    if (r.flip) marks.push_back({{"x", r.m}, {"label", "\u2192 " + r.winner->schedule}});
    const double v = !r.winner ? -1 : memory ? r.winner->peak_bytes : r.winner->iteration_s;
    if (v >= 0) winners.push_back({{"x", r.m}, {"y", v / scale}});
  }
  Json c = {{"x", "M (micro-batches)"}, {"y", y},         {"series", series},
            {"marks", marks},           {"zero", memory}, {"hlines", Json::array()},
            {"winners", winners}};
  if (memory && g.capacity_bytes > 0) {
    c["hlines"].push_back({{"y", g.capacity_bytes / scale},
                           {"label", "device memory " + fmt_bytes(g.capacity_bytes)}});
  }
  return c;
}

}  // namespace

Json schedule_choice_charts(const ScheduleChoiceGroup& g) {
  double slowest = 0;
  for (const auto& p : g.points) slowest = std::max(slowest, p.ran ? p.iteration_s : 0);
  const bool ms = slowest < 1;
  Json out = Json::array();
  out.push_back(chart(g, ms ? "iteration time (ms)" : "iteration time (s)", ms ? 1e-3 : 1, false));
  out.push_back(chart(g, "peak memory (GiB)", kGiB, true));
  return out;
}

std::string schedule_choice_html(const CsvFile& f, const ScheduleChoice& choice, Json& charts,
                                 size_t max_groups) {
  std::string out = fmt::format("<article class=\"schedule-choice\"><h3><code>{}</code></h3>",
                                html_escape(f.path));
  if (!choice.groups.front().fixed.empty()) {
    std::string fixed;
    for (const auto& s : choice.groups.front().fixed) fixed += " " + html_escape(s);
    out += "<p class=\"note\">fixed:" + fixed + "</p>";
  }
  const size_t shown = std::min(max_groups, choice.groups.size());
  for (size_t i = 0; i < shown; ++i) {
    const ScheduleChoiceGroup& g = choice.groups[i];
    if (choice.groups.size() > 1) out += "<h4>" + html_escape(g.label) + "</h4>";
    out += fmt::format(
        "<p class=\"headline\">fastest that fits: {}; {} flip{}{}</p>", html_escape(g.summary()),
        g.flips(), g.flips() == 1 ? "" : "s",
        g.capacity_bytes > 0 ? " · device memory " + fmt_bytes(g.capacity_bytes) : std::string());
    for (const auto& line : g.left_out()) {
      out += "<p class=\"note\">left out: " + html_escape(line) + "</p>";
    }
    out += table_html(g) + "<div class=\"charts\">";
    for (const auto& c : schedule_choice_charts(g)) {
      out += fmt::format(
          "<figure class=\"line\"><div class=\"line-host\" data-chart=\"{}\"></div></figure>",
          charts.size());
      charts.push_back(c);
    }
    out += "</div>";
  }
  if (shown < choice.groups.size()) {
    out += fmt::format(
        "<p class=\"note\">{} more groups not shown; <code>pipetwin report --schedule-choice "
        "{}</code> prints them all.</p>",
        choice.groups.size() - shown, html_escape(f.path));
  }
  return out + "</article>";
}

}  // namespace pipetwin::report
