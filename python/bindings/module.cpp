// pipetwin._pipetwin: the compiled half of `import pipetwin` (pybind11). The package's
// __init__.py (python/bindings/pipetwin/) wraps these functions in the public API, with
// DataFrames and docstrings; each verb's file here says what it takes and returns.
//
// pipetwin's InputError (bad input: the CLI prints it and exits 2) is raised as
// pipetwin.InputError, a ValueError, with the CLI's one-line message; RunFailure as
// pipetwin.RunFailure, a RuntimeError. Other C++ exceptions become pybind11's defaults
// (RuntimeError for std::runtime_error).
//
// Thread-safety: each function holds the GIL while it reads its arguments and builds its result,
// and releases it while planning, simulating, sweeping and importing.
#include <pybind11/pybind11.h>

#include "core/error.hpp"
#include "python/bindings/capacity_api.hpp"
#include "python/bindings/compare_api.hpp"
#include "python/bindings/import_trace_api.hpp"
#include "python/bindings/plan_api.hpp"
#include "python/bindings/simulate_api.hpp"
#include "python/bindings/sweep_api.hpp"
#include "python/bindings/timeline_api.hpp"
#include "python/bindings/zoo_api.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_pipetwin, m) {
  m.doc() = "pipetwin's planner, simulator and studies (the compiled half of `import pipetwin`)";
  py::register_exception<pipetwin::InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<pipetwin::RunFailure>(m, "RunFailure", PyExc_RuntimeError);
  pipetwin::python::bind_timeline(m);
  pipetwin::python::bind_plan(m);
  pipetwin::python::bind_simulate(m);
  pipetwin::python::bind_sweep(m);
  pipetwin::python::bind_compare(m);
  pipetwin::python::bind_import_trace(m);
  pipetwin::python::bind_zoo(m);
  pipetwin::python::bind_capacity(m);
}
