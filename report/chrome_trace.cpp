// gantt_from_chrome_trace (report/gantt.hpp): any Chrome trace event file, not only
// pipetwin's. Only complete ("X") events are drawn; metadata names the rows; other phases
// (counters, instant and begin/end events) are left out.
#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "report/gantt.hpp"

namespace pipetwin::report {

namespace {

RowRole role_of(const std::string& thread_name) {
  std::string n = thread_name;
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.find("compute") != std::string::npos) return RowRole::kCompute;
  for (const char* w : {"send", "recv", "copy", "comm", "nccl", "collective"}) {
    if (n.find(w) != std::string::npos) return RowRole::kComm;
  }
  return RowRole::kOther;
}

std::string id_text(const Json& id) {
  return id.is_string() ? id.get<std::string>() : id.dump();
}

struct TraceNames {
  std::map<std::string, std::string> process;  // pid -> name
  std::map<std::string, std::string> thread;   // pid/tid -> name
};

TraceNames read_names(const std::vector<JsonView>& events) {
  TraceNames n;
  for (const auto& e : events) {
    if (e.string_or("ph", "") != "M" || !e.has("pid")) continue;
    const std::string pid = id_text(e.at("pid").raw());
    const std::string what = e.string_or("name", "");
    const auto args = e.find("args");
    if (!args || !args->has("name")) continue;
    if (what == "process_name") n.process[pid] = args->string("name");
    if (what == "thread_name" && e.has("tid")) {
      n.thread[pid + "/" + id_text(e.at("tid").raw())] = args->string("name");
    }
  }
  return n;
}

struct RawEvent {
  Json pid, tid;
  GanttEvent ev;
};

RawEvent read_event(const JsonView& e) {
  RawEvent r{e.at("pid").raw(), e.has("tid") ? e.at("tid").raw() : Json(0), {}};
  r.ev.start_s = e.number("ts") * 1e-6;
  r.ev.end_s = r.ev.start_s + e.nonneg_or("dur", 0) * 1e-6;
  r.ev.label = e.string_or("name", "");
  r.ev.kind = e.string_or("cat", r.ev.label);
  if (const auto args = e.find("args"); args && args->raw().is_object()) {
    if (const auto mb = args->find("mb"); mb && mb->raw().is_number_integer()) {
      r.ev.micro_batch = mb->as_int32();
    }
    if (const auto st = args->find("step"); st && st->raw().is_number_integer()) {
      r.ev.step = st->as_int32();
    }
  }
  return r;
}

void assign_rows(std::vector<RawEvent>& raw, const TraceNames& names, Gantt& g) {
  std::map<std::pair<Json, Json>, int> row_of;
  for (const auto& r : raw) row_of.emplace(std::make_pair(r.pid, r.tid), 0);
  std::map<Json, int> group_of;
  for (auto& [key, row] : row_of) {
    const auto [pid, tid] = key;
    group_of.emplace(pid, static_cast<int>(group_of.size()));
    row = static_cast<int>(g.rows.size());
    const std::string p = id_text(pid), t = id_text(tid);
    const auto pn = names.process.find(p);
    const auto tn = names.thread.find(p + "/" + t);
    const std::string thread = tn == names.thread.end() ? t : tn->second;
    g.rows.push_back({fmt::format("{} {}", p, thread), pn == names.process.end() ? p : pn->second,
                      group_of[pid], role_of(thread)});
  }
  const bool roles = std::any_of(g.rows.begin(), g.rows.end(),
                                 [](const GanttRow& r) { return r.role != RowRole::kOther; });
  if (!roles) {  // nothing says what a thread does: each row is a resource of its own
    for (size_t i = 0; i < g.rows.size(); ++i) {
      g.rows[i].role = RowRole::kCompute;
      g.rows[i].group = static_cast<int>(i);
    }
  }
  for (auto& r : raw) r.ev.row = row_of.at({r.pid, r.tid});
}

}  // namespace

Gantt gantt_from_chrome_trace(const JsonView& doc, size_t max_events) {
  const JsonView list = doc.raw().is_array() ? doc : doc.at("traceEvents");
  const std::vector<JsonView> events = list.items();
  const TraceNames names = read_names(events);
  std::vector<RawEvent> raw;
  for (const auto& e : events) {
    if (e.string_or("ph", "") == "X") raw.push_back(read_event(e));
  }
  if (raw.empty()) list.fail("no complete (\"X\") events to draw");
  Gantt g;
  g.source = "trace";
  g.total_events = raw.size();
  assign_rows(raw, names, g);
  std::stable_sort(raw.begin(), raw.end(), [](const RawEvent& a, const RawEvent& b) {
    return a.ev.start_s < b.ev.start_s;
  });
  if (raw.size() > max_events) raw.resize(std::max<size_t>(max_events, 1));
  const double t0 = raw.front().ev.start_s;
  for (auto& r : raw) {
    r.ev.start_s -= t0;
    r.ev.end_s -= t0;
    g.end_s = std::max(g.end_s, r.ev.end_s);
    g.events.push_back(std::move(r.ev));
  }
  shade(g);
  return g;
}

}  // namespace pipetwin::report
