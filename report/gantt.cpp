#include "report/gantt.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::report {

namespace {

using Span = std::pair<double, double>;

// Sorted, disjoint union of spans.
std::vector<Span> merge(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Span> out;
  for (const auto& s : spans) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Parts of [a, b) covered by `merged` (sorted, disjoint).
std::vector<Span> intersect(double a, double b, const std::vector<Span>& merged) {
  std::vector<Span> out;
  auto it = std::lower_bound(merged.begin(), merged.end(), Span{a, a},
                             [](const Span& x, const Span& y) { return x.second < y.first; });
  for (; it != merged.end() && it->first < b; ++it) {
    const double lo = std::max(a, it->first), hi = std::min(b, it->second);
    if (hi > lo) out.emplace_back(lo, hi);
  }
  return out;
}

double length(const std::vector<Span>& spans) {
  double sum = 0;
  for (const auto& s : spans) sum += s.second - s.first;
  return sum;
}

double to_us(double seconds) {
  return std::round(seconds * 1e9) / 1e3;
}

// Keeps whole steps from the first while the events fit `max_events` (at least one step).
std::vector<const TimelineEvent*> cut_to_steps(const Timeline& t, size_t max_events, Gantt& g) {
  std::map<int, size_t> per_step;
  for (const auto& e : t.events) ++per_step[e.action.step];
  g.total_steps = static_cast<int>(per_step.size());
  int last_step = per_step.empty() ? 0 : per_step.begin()->first;
  size_t kept = 0;
  for (const auto& [step, n] : per_step) {
    if (kept > 0 && kept + n > max_events) break;
    kept += n;
    last_step = step;
    ++g.shown_steps;
  }
  std::vector<const TimelineEvent*> out;
  for (const auto& e : t.events) {
    if (e.action.step <= last_step) out.push_back(&e);
  }
  return out;
}

}  // namespace

Gantt gantt_from_timeline(const Timeline& t, size_t max_events) {
  Gantt g;
  g.source = t.source;
  g.schedule = t.schedule;
  g.total_events = t.events.size();
  // Rows: every (device, stream) with an event, in device then stream order.
  std::vector<std::vector<int>> row_of(static_cast<size_t>(t.num_devices()),
                                       std::vector<int>(kTimelineStreams, -1));
  for (const auto& e : t.events) {
    if (e.device < 0 || e.device >= t.num_devices()) {
      throw InputError(
          fmt::format("timeline: event on device {} of {}", e.device, t.num_devices()));
    }
    row_of[static_cast<size_t>(e.device)][static_cast<size_t>(stream_of(e.action.op))] = 0;
  }
  for (int d = 0; d < t.num_devices(); ++d) {
    for (int s = 0; s < kTimelineStreams; ++s) {
      int& r = row_of[static_cast<size_t>(d)][static_cast<size_t>(s)];
      if (r < 0) continue;
      r = static_cast<int>(g.rows.size());
      const auto kind = static_cast<StreamKind>(s);
      g.rows.push_back({fmt::format("dev {} {}", d, stream_name(kind)),
                        t.device_names[static_cast<size_t>(d)], d,
                        kind == StreamKind::kCompute ? RowRole::kCompute : RowRole::kComm});
    }
  }
  for (const TimelineEvent* e : cut_to_steps(t, max_events, g)) {
    const Action& a = e->action;
    const int row = row_of[static_cast<size_t>(e->device)][static_cast<size_t>(stream_of(a.op))];
    g.events.push_back(
        {row, e->start_s, e->end_s, op_name(a.op), a.micro_batch, a.step, describe(a)});
    g.end_s = std::max(g.end_s, e->end_s);
  }
  shade(g);
  return g;
}

void shade(Gantt& g) {
  g.bubbles.clear();
  g.overlaps.clear();
  std::vector<std::vector<Span>> busy_row(g.rows.size()), by_row(g.rows.size());
  std::map<int, std::vector<Span>> busy_group;
  for (const auto& e : g.events) {
    by_row[static_cast<size_t>(e.row)].emplace_back(e.start_s, e.end_s);
    if (g.rows[static_cast<size_t>(e.row)].role == RowRole::kCompute) {
      busy_group[g.rows[static_cast<size_t>(e.row)].group].emplace_back(e.start_s, e.end_s);
    }
  }
  for (auto& [group, spans] : busy_group) spans = merge(std::move(spans));
  double idle = 0, compute_rows = 0, comm = 0, hidden = 0;
  for (size_t r = 0; r < g.rows.size(); ++r) {
    const GanttRow& row = g.rows[r];
    const int ri = static_cast<int>(r);
    if (row.role == RowRole::kCompute) {
      ++compute_rows;
      double t = 0;
      for (const auto& s : merge(by_row[r])) {
        if (s.first > t) g.bubbles.push_back({ri, t, s.first});
        t = std::max(t, s.second);
      }
      if (g.end_s > t) g.bubbles.push_back({ri, t, g.end_s});
    } else if (row.role == RowRole::kComm) {
      const auto it = busy_group.find(row.group);
      std::vector<Span> covered;
      for (const auto& s : by_row[r]) {
        comm += s.second - s.first;
        if (it == busy_group.end()) continue;
        auto part = intersect(s.first, s.second, it->second);
        hidden += length(part);
        covered.insert(covered.end(), part.begin(), part.end());
      }
      for (const auto& s : merge(covered)) g.overlaps.push_back({ri, s.first, s.second});
    }
  }
  for (const auto& b : g.bubbles) idle += b.end_s - b.start_s;
  g.idle_fraction = compute_rows > 0 && g.end_s > 0 ? idle / (compute_rows * g.end_s) : 0;
  g.overlap_fraction = comm > 0 ? hidden / comm : 0;
}

Json gantt_to_json(const Gantt& g, double scale_end_s) {
  Json rows = Json::array();
  for (const auto& r : g.rows) {
    const char* role = r.role == RowRole::kCompute ? "compute"
                       : r.role == RowRole::kComm  ? "comm"
                                                   : "other";
    rows.push_back({{"label", r.label}, {"device", r.device}, {"role", role}});
  }
  std::vector<std::string> kinds;
  Json events = Json::array();
  for (const auto& e : g.events) {
    auto k = std::find(kinds.begin(), kinds.end(), e.kind);
    if (k == kinds.end()) k = kinds.insert(kinds.end(), e.kind);
    events.push_back(Json::array({e.row, to_us(e.start_s), to_us(e.end_s),
                                  static_cast<int>(k - kinds.begin()), e.micro_batch, e.label}));
  }
  auto spans = [](const std::vector<GanttInterval>& v) {
    Json out = Json::array();
    for (const auto& s : v) out.push_back(Json::array({s.row, to_us(s.start_s), to_us(s.end_s)}));
    return out;
  };
  Json j;
  j["source"] = g.source;
  j["schedule"] = g.schedule;
  j["end_us"] = to_us(g.end_s);
  j["scale_end_us"] = to_us(std::max(scale_end_s, g.end_s));
  j["rows"] = rows;
  j["kinds"] = kinds;
  j["events"] = events;
  j["bubbles"] = spans(g.bubbles);
  j["overlaps"] = spans(g.overlaps);
  j["total_events"] = g.total_events;
  j["shown_steps"] = g.shown_steps;
  j["total_steps"] = g.total_steps;
  j["idle_fraction"] = g.idle_fraction;
  j["overlap_fraction"] = g.overlap_fraction;
  return j;
}

}  // namespace pipetwin::report
