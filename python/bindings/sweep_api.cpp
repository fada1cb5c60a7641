#include "python/bindings/sweep_api.hpp"

#include <algorithm>
#include <atomic>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_options.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"
#include "studies/sweep/sweep_options.hpp"

namespace pipetwin::python {

namespace {

// Stops the sweep on Ctrl-C: the runner calls `progress` on the calling thread, which takes
// the GIL to let Python run its signal handlers; a KeyboardInterrupt raised there is kept and
// raised again once the points in flight are written.
struct Interrupt {
  std::atomic<bool> stop{false};
  std::optional<py::error_already_set> error;

  void check() {
    py::gil_scoped_acquire gil;
    if (error || PyErr_CheckSignals() == 0) return;
    error.emplace();  // fetches the exception
    stop.store(true);
  }
};

py::dict run(const sim::SweepOptions& a) {
  const sim::SweepInputs in = a.inputs();
  Interrupt interrupt;
  sim::RunResult r;
  std::string best;
  {
    py::gil_scoped_release release;
    const sim::Sweep sweep(sim::Grid::parse(a.grid), in);
    sim::RunOptions o = a.run_options();
    o.stop = &interrupt.stop;
    o.progress = [&interrupt](const sim::SweepProgress&) { interrupt.check(); };
    r = sim::run_sweep(sweep, o);
    if (r.complete && o.shards == 1) best = sim::save_best_points(a.output, a.top).path;
  }
  if (interrupt.error) throw std::move(*interrupt.error);
  py::dict out;
  out["output"] = a.output;
  out["best"] = best.empty() ? py::object(py::none()) : py::object(py::str(best));
  out["complete"] = r.complete;
  out["total"] = r.total;
  out["resumed"] = r.resumed;
  out["computed"] = r.computed;
  return out;
}

py::dict sweep_verb(const py::kwargs& kwargs) {
  Options o("sweep", kwargs);
  sim::SweepOptions a;
  // --grid, the plan options, then the sweep's others, as `pipetwin sweep --help` lists them.
  const auto& specs = sim::sweep_option_specs();
  bind_option_spec(o, a, specs.front());
  bind_plan_flags(o, a.plan);
  for (size_t i = 1; i < specs.size(); ++i) bind_option_spec(o, a, specs[i]);
  o.finish();
  return run(a);
}

py::dict merge_verb(const py::kwargs& kwargs) {
  Options o("sweep_merge", kwargs);
  std::vector<std::string> inputs;
  std::string output;
  int top = 10;
  o.paths("inputs", inputs);
  o.path("output", output);
  o.integer("top", top);
  o.finish();
  if (inputs.empty()) throw InputError("sweep merge: inputs is required (the shard CSVs)");
  if (output.empty()) throw InputError("sweep merge: -o/--output is required (the merged CSV)");
  const std::string best = without_gil([&] {
    sim::save_sweep(sim::merge_sweeps(inputs), output);
    return sim::save_best_points(output, top).path;
  });
  py::dict out;
  out["output"] = output;
  out["best"] = best;
  return out;
}

}  // namespace

void bind_sweep(py::module_& m) {
  m.def("_sweep", &sweep_verb);
  m.def("_sweep_merge", &merge_verb);
}

}  // namespace pipetwin::python
