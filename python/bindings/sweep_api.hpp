// `pipetwin.sweep(...)` and `pipetwin.sweep_merge(...)`: `pipetwin sweep` and `sweep merge`.
//
// sweep() takes --grid as `grid=`, the plan flags (plan_options.hpp) and the sweep's own flags
// (micro_batch, alpha, samples, epochs, jobs, shard, limit, top, output) as keywords and runs the
// grid as the CLI does (studies/sweep/runner.hpp): on `jobs` threads, into the CSV `output`,
// resuming a file that holds part of the same sweep, and, once whole and unsharded, writing the
// best `top` points beside it (SWEEP.best.csv). The package's Python layer gives `output` a
// temporary file when the caller names none, and reads the CSV back as a pandas DataFrame.
// Ctrl-C (KeyboardInterrupt) stops after the points in flight, as SIGINT stops the CLI: every
// finished point is in the CSV, and the same call resumes.
//
// Thread-safety: the sweep runs with the GIL released, on its own threads.
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_sweep(py::module_& m);

}  // namespace pipetwin::python
