#include "core/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace pipetwin {

namespace {

// Microseconds, rounded to the nanosecond so output bytes do not depend on float noise.
double to_us(double seconds) { return std::round(seconds * 1e9) / 1e3; }

// An int32 action field; a value outside int32 is an error rather than a silent wrap.
int32_t int32_of(const JsonView& j) {
  const int64_t v = j.as_int();
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    j.fail(fmt::format("{} is out of range", v));
  }
  return static_cast<int32_t>(v);
}

int32_t int32_or(const JsonView& j, std::string_view key, int32_t fallback) {
  const auto v = j.find(key);
  return v ? int32_of(*v) : fallback;
}

}  // namespace

Json timeline_to_chrome_trace(const Timeline& t) {
  Json events = Json::array();
  // The tensor stream is named only where a timeline has tensor-parallel events.
  const bool tensor = std::any_of(t.events.begin(), t.events.end(), [](const TimelineEvent& e) {
    return e.action.op == Op::kTensorParallel;
  });
  const int streams = tensor ? kTimelineStreams : kStreamsPerDevice;
  for (int d = 0; d < t.num_devices(); ++d) {
    events.push_back({{"ph", "M"}, {"pid", d}, {"name", "process_name"},
                      {"args", {{"name", t.device_names[static_cast<size_t>(d)]}}}});
    events.push_back({{"ph", "M"}, {"pid", d}, {"name", "process_sort_index"},
                      {"args", {{"sort_index", d}}}});
    for (int s = 0; s < streams; ++s) {
      events.push_back({{"ph", "M"}, {"pid", d}, {"tid", s}, {"name", "thread_name"},
                        {"args", {{"name", stream_name(static_cast<StreamKind>(s))}}}});
    }
  }
  std::vector<const TimelineEvent*> sorted;
  sorted.reserve(t.events.size());
  for (const auto& e : t.events) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const TimelineEvent* a, const TimelineEvent* b) {
    if (a->start_s != b->start_s) return a->start_s < b->start_s;
    return a->device < b->device;
  });
  for (const TimelineEvent* e : sorted) {
    const Action& a = e->action;
    Json args;
    args["op"] = op_name(a.op);
    args["stage"] = a.stage;
    if (a.micro_batch >= 0) args["mb"] = a.micro_batch;
    args["step"] = a.step;
    if (a.version >= 0) args["version"] = a.version;
    if (a.payload != Payload::kNone) args["payload"] = payload_name(a.payload);
    if (a.peer_stage >= 0) args["peer_stage"] = a.peer_stage;
    if (a.bucket >= 0) args["bucket"] = a.bucket;
    events.push_back({{"ph", "X"},
                      {"pid", e->device},
                      {"tid", static_cast<int>(stream_of(a.op))},
                      {"ts", to_us(e->start_s)},
                      {"dur", to_us(e->end_s) - to_us(e->start_s)},
                      {"name", describe(a)},
                      {"cat", op_name(a.op)},
                      {"args", args}});
  }
  for (size_t d = 0; d < t.memory.size(); ++d) {
    for (const auto& m : t.memory[d]) {
      events.push_back({{"ph", "C"}, {"pid", static_cast<int>(d)}, {"name", "memory"},
                        {"ts", to_us(m.time_s)}, {"args", {{"bytes", m.bytes}}}});
    }
  }
  Json doc;
  doc["traceEvents"] = events;
  doc["displayTimeUnit"] = "ms";
  Json other = json_document("pipetwin.timeline", 1);  // Chrome trace's free-form otherData
  other["source"] = t.source;
  other["schedule"] = t.schedule;
  other["devices"] = t.device_names;
  if (!t.peak_memory_bytes.empty()) other["peak_memory_bytes"] = t.peak_memory_bytes;
  doc["otherData"] = other;
  return doc;
}

Timeline timeline_from_chrome_trace(const JsonView& doc) {
  Timeline t;
  const JsonView other = doc.at("otherData");
  other.check_format("pipetwin.timeline", 1);
  t.source = other.string_or("source", "measured");
  t.schedule = other.string_or("schedule", "");
  for (const auto& d : other.at("devices").items()) t.device_names.push_back(d.as_string());
  if (auto peaks = other.find("peak_memory_bytes")) {
    for (const auto& p : peaks->items()) t.peak_memory_bytes.push_back(p.as_nonneg());
  }
  t.memory.resize(t.device_names.size());
  for (const auto& e : doc.at("traceEvents").items()) {
    const std::string ph = e.string("ph");
    if (ph == "M") continue;
    const int64_t pid = e.integer("pid");
    if (pid < 0 || pid >= t.num_devices()) {
      e.at("pid").fail(fmt::format("device {} not in otherData.devices (0..{})", pid, t.num_devices() - 1));
    }
    if (ph == "C") {
      t.memory[static_cast<size_t>(pid)].push_back(
          {e.number("ts") * 1e-6, e.at("args").nonneg("bytes")});
      continue;
    }
    if (ph != "X") e.at("ph").fail(fmt::format("unsupported event phase \"{}\"", ph));
    TimelineEvent ev;
    ev.device = static_cast<int32_t>(pid);
    ev.start_s = e.number("ts") * 1e-6;
    ev.end_s = ev.start_s + e.nonneg("dur") * 1e-6;
    const JsonView args = e.at("args");
    Action& a = ev.action;
    const std::string op = args.string("op");
    if (!parse_op(op, a.op)) args.at("op").fail(fmt::format("unknown op \"{}\"", op));
    const std::string payload = args.string_or("payload", "none");
    if (!parse_payload(payload, a.payload)) args.at("payload").fail("unknown payload");
    a.stage = int32_of(args.at("stage"));
    a.micro_batch = int32_or(args, "mb", -1);
    a.step = int32_of(args.at("step"));
    if (a.op == Op::kOptimizerStep && a.step < 0) {
      args.at("step").fail(
          fmt::format("an optimizer step needs a step number >= 0 ({} given)", a.step));
    }
    a.version = int32_or(args, "version", -1);
    a.peer_stage = int32_or(args, "peer_stage", -1);
    a.bucket = int32_or(args, "bucket", -1);
    t.events.push_back(ev);
  }
  return t;
}

void save_timeline(const Timeline& t, const std::string& path) {
  write_file_atomic(path, timeline_to_chrome_trace(t).dump() + "\n");
}

Timeline load_timeline(const std::string& path) {
  return load_json_as(path, timeline_from_chrome_trace);
}

}  // namespace pipetwin
