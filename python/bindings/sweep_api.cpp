#include "python/bindings/sweep_api.hpp"

#include <algorithm>
#include <atomic>
#include <optional>

#include <fmt/format.h>

#include "cli/plan_flags.hpp"
#include "core/error.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_options.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"

namespace pipetwin::python {

namespace {

// sweep()'s keywords (cli/cmd_sweep.cpp's SweepArgs).
struct SweepCall {
  cli::PlanFlags flags;  // every point's values of the fields the grid does not vary
  std::string grid, output, shard;
  int jobs = 0, top = 10, epochs = 1, micro_batch = 0;
  long limit = -1;
  double alpha = -1;
  long samples = 0;
};

// The point the grid varies: the flags' values (cli/cmd_sweep.cpp's base_config).
sim::PointConfig base_config(const SweepCall& a) {
  const cli::PlanFlags& f = a.flags;
  sim::PointConfig c;
  c.model = f.model;
  c.cluster = f.cluster;
  c.stages = f.stages;
  c.chunks = f.chunk_count();
  c.schedule = f.schedule;
  c.virtual_stages = f.virtual_stage_count();
  c.partitioner = f.partitioner;
  c.batch = f.batch;
  c.micro_batch = a.micro_batch;
  c.dp = f.dp;
  c.frozen = f.frozen;
  c.alpha = a.alpha;
  f.check_precision();
  c.dtype = f.dtype;
  c.optimizer = f.optimizer;
  c.checkpoint = f.checkpoint_kind();
  return c;
}

// SWEEP.best.csv: the best `top` points, as `pipetwin sweep` writes it; its path.
std::string write_best(const std::string& csv, int top) {
  const sim::SweepTable all = sim::load_sweep(csv);
  const sim::SweepTable best = sim::best_points(all, static_cast<size_t>(std::max(top, 0)));
  const std::string path = sim::best_path(csv);
  sim::save_sweep(best, path);
  return path;
}

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

py::dict run(const SweepCall& a) {
  if (a.grid.empty()) {
    throw InputError("--grid is required (e.g. --grid 'stages=1,2,4;chunks=auto')");
  }
  if (a.output.empty()) throw InputError("-o/--output is required (the sweep CSV)");
  if (a.jobs < 0) throw InputError(fmt::format("--jobs must not be negative ({} given)", a.jobs));
  sim::SweepInputs in;
  in.base = base_config(a);
  in.profile_path = a.flags.profile;
  in.catalog_dir = a.flags.catalog;
  in.iterations = a.flags.iterations;
  in.samples = a.samples;
  in.epochs = a.epochs;
  Interrupt interrupt;
  sim::RunResult r;
  std::string best;
  {
    py::gil_scoped_release release;
    const sim::Sweep sweep(sim::Grid::parse(a.grid), in);
    sim::RunOptions o;
    o.output = a.output;
    o.jobs = a.jobs;
    if (!a.shard.empty()) std::tie(o.shard, o.shards) = sim::parse_shard(a.shard);
    o.limit = a.limit;
    o.stop = &interrupt.stop;
    o.progress = [&interrupt](const sim::SweepProgress&) { interrupt.check(); };
    r = sim::run_sweep(sweep, o);
    if (r.complete && o.shards == 1) best = write_best(a.output, a.top);
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
  SweepCall a;
  o.text("grid", a.grid);
  bind_plan_flags(o, a.flags);
  o.integer("micro_batch", a.micro_batch);
  o.real("alpha", a.alpha);
  o.integer("samples", a.samples);
  o.integer("epochs", a.epochs);
  o.integer("jobs", a.jobs);
  o.text("shard", a.shard);
  o.integer("limit", a.limit);
  o.integer("top", a.top);
  o.path("output", a.output);
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
  std::string best;
  {
    py::gil_scoped_release release;
    sim::save_sweep(sim::merge_sweeps(inputs), output);
    best = write_best(output, top);
  }
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
