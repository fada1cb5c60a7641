// `pipetwin.compare(predicted, measured, ...)`: `pipetwin compare` from Python (report/compare.hpp).
//
// `predicted` and each of `measured` (one, or a list of runs of the plan: compared with the median
// one, their spread kept) and of `also_predicted` are timelines or metrics, all of one kind as the
// CLI asks: a file path (the CLI's arguments), a Timeline, a metrics or Chrome-trace dict, or a
// Simulation (simulate()'s result), which is a timeline or metrics, whichever the others are
// (a timeline when all are Simulations). Keywords `plan` (a Plan or a plan path: throughput in
// samples/s) and `skip` (leading iterations left out of the headline) are the CLI's.
// The result is a dict: the comparison's rows ("summary", "iterations", "actions": lists of
// {quantity, predicted, measured, error, unit}), the headline (median_abs_iteration_error,
// worst_abs_iteration_error, worst_iteration), the runs' and predictions' spreads, the noise
// verdict's line, and "text": what `pipetwin compare` prints.
//
// Thread-safety: GIL held throughout (the comparison is cheap).
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_compare(py::module_& m);

}  // namespace pipetwin::python
