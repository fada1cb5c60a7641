#include "profiles/trace_import/kineto.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_io.hpp"
#include "profiles/trace_import/gzip.hpp"

namespace pipetwin::trace_import {

namespace {

// Where an event sits in the file, for messages: "traceEvents[12]" or, in the array format, "[12]".
struct EventPlace {
  const std::string& origin;
  const std::string& array_path;  // "traceEvents" or ""
  size_t index;

  std::string path(std::string_view field = {}) const {
    std::string p = fmt::format("{}[{}]", array_path, index);
    if (!field.empty()) p += fmt::format(".{}", field);
    return p;
  }
  [[noreturn]] void fail(const Json& node, std::string_view field, std::string_view what) const {
    JsonView(node, origin, path(field)).fail(what);
  }
};

std::string shown(const Json& j) {
  std::string text = j.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

double finite_number(const Json& ev, const char* key, const EventPlace& at, bool nonneg) {
  const auto it = ev.find(key);
  if (it == ev.end()) at.fail(ev, key, "missing required field");
  const bool ok =
      it->is_number() && std::isfinite(it->get<double>()) && (!nonneg || it->get<double>() >= 0);
  if (!ok) {
    at.fail(*it, key,
            fmt::format("expected a {}number, got {}", nonneg ? "non-negative " : "", shown(*it)));
  }
  return it->get<double>();
}

// An integer arg; -1 when absent or out of int64 range (AccumulateGrad's sequence number is
// UINT64_MAX, "no sequence number").
int64_t integer_arg(const Json& args, const char* key, const EventPlace& at) {
  const auto it = args.find(key);
  if (it == args.end() || it->is_null()) return -1;
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1
                                                                          : static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return std::max<int64_t>(-1, it->get<int64_t>());
  if (it->is_number_float() && std::isfinite(it->get<double>()) &&
      std::floor(it->get<double>()) == it->get<double>() && std::fabs(it->get<double>()) < 9e15) {
    return std::max<int64_t>(-1, static_cast<int64_t>(it->get<double>()));
  }
  at.fail(*it, fmt::format("args.{}", key), fmt::format("expected an integer, got {}", shown(*it)));
}

// "Input Dims": a shape (array of integers) per input; anything else (a scalar's [], a tensor
// list's nested arrays, null) stands for "no tensor shape".
std::vector<int64_t> shape_of(const Json& dims) {
  std::vector<int64_t> shape;
  if (!dims.is_array()) return shape;
  for (const auto& d : dims) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) return {};
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

void read_args(const Json& ev, TraceEvent& e, const EventPlace& at) {
  const auto it = ev.find("args");
  if (it == ev.end() || it->is_null()) return;
  if (!it->is_object()) at.fail(*it, "args", fmt::format("expected an object, got {}", shown(*it)));
  const Json& args = *it;
  e.sequence = integer_arg(args, "Sequence number", at);
  e.fwd_thread = integer_arg(args, "Fwd thread id", at);
  e.correlation = integer_arg(args, "correlation", at);
  e.external_id = integer_arg(args, "External id", at);
  // The Python call tree only refines what the timestamps say: ids of another form are not read.
  const auto id = [&](const char* key) {
    const auto it = args.find(key);
    return it != args.end() && it->is_number_integer() ? std::max<int64_t>(-1, it->get<int64_t>())
                                                       : int64_t{-1};
  };
  e.python_id = id("Python id");
  e.python_parent = id("Python parent id");
  if (const auto dims = args.find("Input Dims"); dims != args.end()) {
    if (!dims->is_array()) {
      at.fail(*dims, "args.Input Dims",
              fmt::format("expected an array of shapes, got {}", shown(*dims)));
    }
    e.has_input_dims = true;
    for (const auto& d : *dims) e.input_dims.push_back(shape_of(d));
  }
  if (const auto types = args.find("Input type"); types != args.end() && types->is_array()) {
    for (const auto& t : *types) e.input_types.push_back(t.is_string() ? t.get<std::string>() : "");
  }
}

// The kind of an event by its Kineto category (libkineto's ActivityType names); false: dropped.
bool kind_of(const std::string& cat, EventKind& kind) {
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
    kind = EventKind::kDevice;
  } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
    kind = EventKind::kRuntime;
  } else if (cat == "gpu_user_annotation" || cat == "Trace" || cat == "overhead" ||
             cat == "cuda_sync") {
    return false;
  } else {
    kind = EventKind::kHost;
  }
  return true;
}

// Whether a host event is a range rather than an operator (kineto.hpp): by its category, or in a
// trace without categories by pipetwin's and torch's range names.
bool is_range(const Json& ev, const std::string& cat, const std::string& name) {
  if (ev.contains("cat")) return cat == "user_annotation" || cat == "python_function";
  for (const char* prefix : {"pipetwin.", "nn.Module: ", "ProfilerStep#", "Optimizer."}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The lane of an event: its (pid, tid), numbers or strings ("CPU functions" in legacy traces).
int lane_of(const Json& ev, std::map<std::string, int>& lanes) {
  const auto pid = ev.find("pid"), tid = ev.find("tid");
  const std::string key = (pid == ev.end() ? std::string("-") : pid->dump()) + "/" +
                          (tid == ev.end() ? std::string("-") : tid->dump());
  return lanes.emplace(key, static_cast<int>(lanes.size())).first->second;
}

std::vector<TraceEvent> read_events(const Json& array, const EventPlace& base,
                                    std::map<std::string, int>& lanes) {
  std::vector<TraceEvent> events;
  for (size_t i = 0; i < array.size(); ++i) {
    const Json& ev = array[i];
    const EventPlace at{base.origin, base.array_path, i};
    if (!ev.is_object())
      at.fail(ev, "", fmt::format("expected an event object, got {}", shown(ev)));
    const auto ph = ev.find("ph");
    if (ph == ev.end()) at.fail(ev, "ph", "missing required field");
    if (!ph->is_string()) at.fail(*ph, "ph", fmt::format("expected a string, got {}", shown(*ph)));
    if (ph->get<std::string>() != "X") continue;  // only complete events have a duration
    TraceEvent e;
    const auto cat_it = ev.find("cat");
    const std::string cat =
        cat_it != ev.end() && cat_it->is_string() ? cat_it->get<std::string>() : "";
    if (!kind_of(cat, e.kind)) continue;
    const auto name = ev.find("name");
    if (name == ev.end()) at.fail(ev, "name", "missing required field");
    if (!name->is_string())
      at.fail(*name, "name", fmt::format("expected a string, got {}", shown(*name)));
    e.name = name->get<std::string>();
    e.range = e.kind == EventKind::kHost && is_range(ev, cat, e.name);
    e.ts_us = finite_number(ev, "ts", at, false);
    e.dur_us = finite_number(ev, "dur", at, true);
    e.lane = lane_of(ev, lanes);
    e.file_index = i;
    read_args(ev, e, at);
    events.push_back(std::move(e));
  }
  return events;
}

// Sorts by lane, start, longer first, file order, and links each host/runtime event to the
// innermost one of its lane that encloses it. An event that starts inside another one on the same
// thread is nested in it (RecordFunction ranges nest per thread); the end it reports may overrun
// the enclosing one's by the rounding of the timestamps, which does not make it a sibling; one of
// zero duration that starts at the enclosing one's end is its last child (kineto.hpp). So is one
// of at most 1 us there in a file of whole microseconds (torch 1.13's export without Kineto): its
// start and duration are each cut to the microsecond, so a child of a 1 us operator (aten::relu's
// aten::clamp_min) can be written as starting where its parent ends and ending 1 us later; a
// sibling of 1 us or less that follows within the same microsecond nests there too, which moves
// at most that microsecond between the two.
bool whole_us(const TraceEvent& e) {
  return e.ts_us == std::floor(e.ts_us) && e.dur_us == std::floor(e.dur_us);
}

bool ends_before(const TraceEvent& e, const TraceEvent& open) {
  if (e.ts_us != open.end_us()) return e.ts_us > open.end_us();
  if (open.dur_us == 0) return true;
  return !(e.dur_us == 0 || (e.dur_us <= 1 && whole_us(e) && whole_us(open)));
}

void nest(std::vector<TraceEvent>& events) {
  std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.lane != b.lane) return a.lane < b.lane;
    if (a.ts_us != b.ts_us) return a.ts_us < b.ts_us;
    return a.dur_us > b.dur_us;
  });
  std::vector<int> stack;
  int lane = -1;
  for (size_t i = 0; i < events.size(); ++i) {
    TraceEvent& e = events[i];
    if (e.lane != lane) stack.clear(), lane = e.lane;
    if (e.kind == EventKind::kDevice) continue;
    while (!stack.empty() && ends_before(e, events[static_cast<size_t>(stack.back())]))
      stack.pop_back();
    e.parent = stack.empty() ? -1 : stack.back();
    stack.push_back(static_cast<int>(i));
  }
}

// TraceEvent::module_depth, from "Python id" and "Python parent id": per Python event, the module
// events among it and its Python ancestors, each chain walked once (a broken file's ids may loop:
// the walk stops where it meets itself; ids given twice are no tree: none is read).
void module_depths(std::vector<TraceEvent>& events) {
  std::map<int64_t, size_t> python;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].python_id >= 0 && !python.emplace(events[i].python_id, i).second) return;
  }
  const auto is_module = [&](size_t i) { return events[i].name.rfind("nn.Module: ", 0) == 0; };
  constexpr int kUnknown = -1, kOnPath = -2;
  std::vector<int> modules(events.size(), kUnknown);
  for (const auto& [id, first] : python) {
    std::vector<size_t> path;
    int base = 0;
    for (size_t j = first;;) {
      if (modules[j] != kUnknown) {
        base = std::max(modules[j], 0);
        break;
      }
      modules[j] = kOnPath;
      path.push_back(j);
      const auto up = python.find(events[j].python_parent);
      if (events[j].python_parent < 0 || up == python.end()) break;
      j = up->second;
    }
    for (auto k = path.rbegin(); k != path.rend(); ++k) modules[*k] = base += is_module(*k) ? 1 : 0;
  }
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].python_id >= 0 && is_module(i)) events[i].module_depth = modules[i];
  }
}

std::vector<std::string> device_names_of(const Json& doc) {
  std::vector<std::string> names;
  const auto props = doc.find("deviceProperties");
  if (props == doc.end() || !props->is_array()) return names;
  for (const auto& p : *props) {
    if (p.is_object() && p.contains("name") && p["name"].is_string())
      names.push_back(p["name"].get<std::string>());
  }
  return names;
}

}  // namespace

bool KinetoTrace::has_device_events() const {
  return std::any_of(events.begin(), events.end(),
                     [](const TraceEvent& e) { return e.kind == EventKind::kDevice; });
}

KinetoTrace parse_kineto_trace(const Json& doc, const std::string& origin) {
  KinetoTrace t;
  t.origin = origin;
  const Json* array = &doc;
  std::string array_path;
  if (doc.is_object()) {
    const auto it = doc.find("traceEvents");
    if (it == doc.end()) {
      JsonView(doc, origin, "traceEvents")
          .fail("missing required field: not a PyTorch profiler (Chrome trace) file");
    }
    array = &*it;
    array_path = t.events_path = "traceEvents";
    if (const auto meta = doc.find("pipetwin"); meta != doc.end() && !meta->is_null()) {
      if (!meta->is_object())
        JsonView(*meta, origin, "pipetwin")
            .fail(fmt::format("expected an object, got {}", shown(*meta)));
      t.metadata = *meta;
    }
    t.device_names = device_names_of(doc);
  } else if (!doc.is_array()) {
    JsonView(doc, origin)
        .fail(fmt::format(
            "expected a Chrome trace (an object with traceEvents, or an array of events), got {}",
            shown(doc)));
  }
  if (!array->is_array()) {
    JsonView(*array, origin, array_path)
        .fail(fmt::format("expected an array of events, got {}", shown(*array)));
  }
  if (array->empty()) JsonView(*array, origin, array_path).fail("no events: an empty trace");
  std::map<std::string, int> lanes;
  t.events = read_events(*array, EventPlace{origin, array_path, 0}, lanes);
  if (t.events.empty()) {
    JsonView(*array, origin, array_path)
        .fail(fmt::format("none of the {} events is a complete (\"ph\": \"X\") event",
                          array->size()));
  }
  nest(t.events);
  module_depths(t.events);
  return t;
}

KinetoTrace load_kineto_trace(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  // A gzipped trace (torch.profiler's use_gzip=True: "*.pt.trace.json.gz") reads as it is.
  const Json doc =
      is_gzip(bytes) ? parse_json_text(gunzip(bytes, path), path) : parse_json_text(bytes, path);
  return parse_kineto_trace(doc, path);
}

void add_events(KinetoTrace& trace, std::vector<TraceEvent> extra) {
  if (extra.empty()) return;
  // Before the read events, so that the stable sort puts an added range around an operator of
  // the same start and duration.
  extra.insert(extra.end(), std::make_move_iterator(trace.events.begin()),
               std::make_move_iterator(trace.events.end()));
  for (auto& e : extra) e.parent = -1;
  trace.events = std::move(extra);
  nest(trace.events);
}

double element_bytes(const std::string& type) {
  static const std::map<std::string, double, std::less<>> sizes = {{"float", 4},
                                                                   {"double", 8},
                                                                   {"c10::Half", 2},
                                                                   {"c10::BFloat16", 2},
                                                                   {"long int", 8},
                                                                   {"long", 8},
                                                                   {"int", 4},
                                                                   {"short int", 2},
                                                                   {"short", 2},
                                                                   {"signed char", 1},
                                                                   {"unsigned char", 1},
                                                                   {"bool", 1},
                                                                   {"c10::complex<float>", 8},
                                                                   {"c10::complex<double>", 16},
                                                                   {"c10::Float8_e4m3fn", 1},
                                                                   {"c10::Float8_e5m2", 1}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace pipetwin::trace_import
