// `pipetwin.import_trace(traces, ...)`: `pipetwin import-trace` from Python
// (profiles/trace_import/import.hpp; docs/import-trace.md).
//
// `traces` is one Kineto Chrome-trace file or a list of them (one per micro-batch size); the
// keywords are the CLI's: layers, micro_batch (an int or a list), device, model, loss, catalog,
// output (-o: the profile is written there too). The result is
// {"profile": the profile JSON the CLI writes, as a dict; "layers": one row per layer at the
// largest micro-batch (what the CLI prints); "traces": per trace what it could attribute, with
// "warning" the CLI's page-fault warning or None}. The package's Python layer returns it as a
// Profile (a dict of the profile JSON) that plan(profile=...) takes.
// `_save_profile(profile, path)` validates a profile dict and writes it as the CLI would.
//
// Thread-safety: the import runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_import_trace(py::module_& m);

}  // namespace pipetwin::python
