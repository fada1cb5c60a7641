// `pipetwin.simulate(elastic=True, ...)`: a PipeTransformer training run replayed
// (sim/elastic_sim.hpp), as `pipetwin simulate --elastic` with its flags as keywords
// (simulate_api.hpp lists them). The keywords only mean something with elastic=True; given
// without it they are refused as the CLI refuses them ("--alpha requires --elastic").
//
// Thread-safety: the replay runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include "python/bindings/options.hpp"

namespace pipetwin::python {

namespace py = pybind11;

// Reads the elastic keywords from `options` (then finishes them) and replays the run:
// {"report": ..., "epoch_log": ..., "freeze_trace": ...}.
py::dict simulate_elastic_call(Options& options);

// InputError for the first elastic-only keyword given to a simulate() without elastic=True.
void refuse_elastic_options(const Options& options);

}  // namespace pipetwin::python
