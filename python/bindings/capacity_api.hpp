// `pipetwin.capacity(...)`: `pipetwin capacity` from Python (studies/capacity.hpp): the clusters of
// a priced catalog ranked by the time and the cost to train a model.
//
// Keywords are the CLI's: model, profile, catalog, dtype, optimizer, batch (required), partitioner
// (a list or "a,b"), samples (required), epochs, prices, clusters, schedules, checkpoint_modes,
// tp_sizes (a list of ints), distributed_optimizer,
// budget, jobs. The result is one row per line of the capacity.csv that `-o DIR` writes — per
// objective ("fastest", "cheapest") one row per cluster in rank order, and an objective "none" row
// per cluster where nothing fits — with the same columns as values (numbers as numbers, empty
// fields as None), plan_file replaced by `plan`: the Plan itself (the leanest plan tried where
// nothing fits), ready for simulate(). Files are the caller's to write (Plan.save, to_csv).
//
// Thread-safety: the search runs with the GIL released, on its own threads.
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_capacity(py::module_& m);

}  // namespace pipetwin::python
