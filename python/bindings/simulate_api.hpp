// `pipetwin.simulate(...)`: `pipetwin simulate` from Python.
//
// With a plan (a Plan, or the path of a plan JSON as --plan) it predicts the plan's timeline and
// metrics with the discrete-event simulator (sim/pipeline_sim.hpp) and returns
// {"metrics": the metrics JSON --metrics writes, as a dict; "timeline": a Timeline}. Keywords:
// iterations, schedule_file, timeline (a path: the Chrome trace is written there too), metrics
// (likewise), profile (reprice the plan's layers with this profile of the same model),
// max_actions. With elastic=True it replays a PipeTransformer run (sim/elastic_sim.hpp) with the
// CLI's elastic flags as keywords (model, profile, cluster, catalog, stages, batch, epochs,
// samples, freeze_trace, alpha, freeze_every, freeze_unit, checkpoint_mode, lambda_frozen,
// no_autopipe, no_autodp, no_autocache, breakdown, cache_memory, host_bandwidth, disk_bandwidth,
// transition_overheads, transition_scale, no_state_transfer, seed, log, freeze_trace_out, report)
// and returns {"report": the --report JSON, "epoch_log": the --log JSON, "freeze_trace": the
// replayed trace}. The package's Python layer wraps both in dicts with DataFrames.
//
// Thread-safety: the simulation runs with the GIL released. max_actions sets the process's
// action limit (core/schedule/limits.hpp) for the call and puts the previous one back.
#pragma once

#include <pybind11/pybind11.h>

namespace pipetwin::python {

namespace py = pybind11;

void bind_simulate(py::module_& m);

}  // namespace pipetwin::python
