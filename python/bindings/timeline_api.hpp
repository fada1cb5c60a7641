// `pipetwin.Timeline`: a predicted or measured timeline (core/timeline.hpp) held for Python.
//
// simulate() returns its timeline as one of these inside the Simulation; compare() takes it as a
// timeline without a file. events() is the timeline as a list of dicts, one per action, in the
// order of the Chrome trace the CLI writes (by start, then device): device, device_name, stream,
// op, name (the Gantt label, "F s1 mb3 v0"), stage, mb, step, version, payload, peer_stage,
// bucket (None where the action has none), start_s, end_s, duration_s. memory() is the memory
// counter track, one dict per sample. save() writes the CLI's Chrome trace (--timeline); load()
// reads one (a measured timeline of `pipetwin run --timeline`).
//
// Thread-safety: immutable from Python.
#pragma once

#include <pybind11/pybind11.h>

#include "core/timeline.hpp"

namespace pipetwin::python {

namespace py = pybind11;

struct TimelineObject {
  Timeline timeline;
};

void bind_timeline(py::module_& m);

}  // namespace pipetwin::python
