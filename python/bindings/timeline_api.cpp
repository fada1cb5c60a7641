#include "python/bindings/timeline_api.hpp"

#include <algorithm>

#include <pybind11/stl.h>

#include "python/bindings/convert.hpp"
#include "python/bindings/options.hpp"

namespace pipetwin::python {

namespace {

// An action field that is -1 for "none" (core/schedule/action.hpp): None then.
py::object optional_int(int32_t value) {
  return value >= 0 ? py::object(py::int_(value)) : py::object(py::none());
}

py::dict event_dict(const Timeline& t, const TimelineEvent& e) {
  const Action& a = e.action;
  py::dict d;
  d["device"] = e.device;
  d["device_name"] = e.device >= 0 && e.device < t.num_devices()
                         ? py::object(py::str(t.device_names[static_cast<size_t>(e.device)]))
                         : py::object(py::none());
  d["stream"] = stream_name(stream_of(a.op));
  d["op"] = op_name(a.op);
  d["name"] = describe(a);
  d["stage"] = a.stage;
  d["mb"] = optional_int(a.micro_batch);
  d["step"] = a.step;
  d["version"] = optional_int(a.version);
  d["payload"] = a.payload == Payload::kNone ? py::object(py::none())
                                             : py::object(py::str(payload_name(a.payload)));
  d["peer_stage"] = optional_int(a.peer_stage);
  d["bucket"] = optional_int(a.bucket);
  d["start_s"] = e.start_s;
  d["end_s"] = e.end_s;
  d["duration_s"] = e.duration();
  return d;
}

// The events in the Chrome trace's order: by start, then device (core/timeline.cpp).
py::list events(const TimelineObject& o) {
  const Timeline& t = o.timeline;
  std::vector<const TimelineEvent*> sorted;
  sorted.reserve(t.events.size());
  for (const auto& e : t.events) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TimelineEvent* a, const TimelineEvent* b) {
                     if (a->start_s != b->start_s) return a->start_s < b->start_s;
                     return a->device < b->device;
                   });
  py::list out;
  for (const TimelineEvent* e : sorted) out.append(event_dict(t, *e));
  return out;
}

py::list memory(const TimelineObject& o) {
  py::list out;
  const Timeline& t = o.timeline;
  for (size_t d = 0; d < t.memory.size(); ++d) {
    for (const auto& m : t.memory[d]) {
      py::dict row;
      row["device"] = d;
      row["time_s"] = m.time_s;
      row["bytes"] = m.bytes;
      out.append(row);
    }
  }
  return out;
}

}  // namespace

void bind_timeline(py::module_& m) {
  py::class_<TimelineObject>(m, "Timeline",
                             "A predicted or measured timeline: one event per action "
                             "(core/timeline.hpp)")
      .def_property_readonly("source", [](const TimelineObject& o) { return o.timeline.source; })
      .def_property_readonly("schedule",
                             [](const TimelineObject& o) { return o.timeline.schedule; })
      .def_property_readonly("device_names",
                             [](const TimelineObject& o) { return o.timeline.device_names; })
      .def_property_readonly("peak_memory_bytes",
                             [](const TimelineObject& o) { return o.timeline.peak_memory_bytes; })
      .def("events", &events, "One dict per action, in the Chrome trace's order.")
      .def("memory", &memory,
           "The memory counter track: one dict (device, time_s, bytes) a sample.")
      .def(
          "chrome_trace",
          [](const TimelineObject& o) { return to_python(timeline_to_chrome_trace(o.timeline)); },
          "The Chrome trace JSON the CLI writes (--timeline), as a dict.")
      .def(
          "save",
          [](const TimelineObject& o, py::handle path) {
            save_timeline(o.timeline, path_text(path, "path"));
          },
          py::arg("path"), "Writes the Chrome trace the CLI writes (--timeline).")
      .def_static(
          "load",
          [](py::handle path) { return TimelineObject{load_timeline(path_text(path, "path"))}; },
          py::arg("path"), "Reads a timeline (`pipetwin simulate|run --timeline`).")
      .def("__len__", [](const TimelineObject& o) { return o.timeline.events.size(); })
      .def("__repr__", [](const TimelineObject& o) {
        return "<pipetwin.Timeline " + o.timeline.source + " " + o.timeline.schedule + ": " +
               std::to_string(o.timeline.events.size()) + " actions on " +
               std::to_string(o.timeline.num_devices()) + " devices>";
      });
}

}  // namespace pipetwin::python
