// Framework fit: a framework's overheads and efficiency scales (core/framework.hpp) fitted from
// a handful of measured runs (studies/framework_runs.hpp), so that a few runs on the GPUs at hand
// calibrate predictions of the configurations one would buy (docs/framework-fit.md).
//
// Each run is planned once as `plan` would plan it (its model, cluster, K, dp, batch, micro-batch,
// schedule, dtype, optimizer, virtual stages and partitioner; memory not checked: the run ran),
// and its iteration is simulated with a candidate framework. The terms enter the simulated time
// almost linearly (the overheads add to passes, the scales multiply them) but through the
// schedule's critical path, so the fit is a Gauss-Newton iteration on the simulator itself, its
// Jacobian by forward differences, on the relative residuals (measured - predicted) / measured;
// robust by iteratively reweighted least squares with Huber weights (k = 1.345 x the residuals'
// scale, 1.4826 x their median absolute value), with a small Levenberg damping so that terms the
// runs barely tell apart stay near where they were. A term no run depends on (a communication
// scale when nothing is communicated) keeps its neutral value; the overheads stay >= 0 and the
// scales >= 0.05 (a term at its bound is held there and the others are solved again).
//
// Leave-one-out: every run is predicted by the framework fitted to the others (started from the
// fit to all), the error a user should expect on a configuration not measured.
//
// Thread-safety: pure functions; FrameworkRunModel is immutable after construction.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "core/json_io.hpp"
#include "core/plan.hpp"
#include "studies/framework_runs.hpp"

namespace pipetwin::sim {

// The runs planned once; predicts their iteration time under a framework.
class FrameworkRunModel {
 public:
  // InputError "FILE:ROW: ..." when a run cannot be planned.
  FrameworkRunModel(const std::vector<FrameworkRun>& runs, const Catalog& catalog);
  size_t size() const { return plans_.size(); }
  const Plan& plan(size_t run) const { return plans_[run]; }
  // The simulated time of one iteration of run `run` with framework `f`, in seconds.
  double predict(size_t run, const Framework& f) const;

 private:
  std::vector<Plan> plans_;
};

struct FrameworkFitOptions {
  std::vector<FrameworkTerm> terms;  // the terms fitted; empty: all seven. The rest stay neutral
  int max_iterations = 30;
  bool leave_one_out = true;
  std::string name = "fitted";  // the framework's name
};

struct FrameworkRunResult {
  FrameworkRun run;
  double base_s = 0;    // simulated without a framework
  double fitted_s = 0;  // with the framework fitted to every run
  double loo_s = 0;     // with the framework fitted to the other runs (0: not computed)
  double weight = 1;    // the run's final Huber weight in the fit to every run

  double fitted_error() const { return fitted_s / run.measured_s - 1; }
  double loo_error() const { return loo_s / run.measured_s - 1; }
  double base_error() const { return base_s / run.measured_s - 1; }
};

struct FrameworkFit {
  Framework framework;
  std::vector<FrameworkRunResult> runs;
  std::vector<FrameworkTerm> fitted;  // terms fitted (asked for, and some run depends on them)
  int iterations = 0;                 // Gauss-Newton steps of the fit to every run
  // Medians and worsts of |error| over the runs.
  double base_median = 0, base_worst = 0, fit_median = 0, fit_worst = 0, loo_median = 0,
         loo_worst = 0;
};

// Fits the terms to `runs` (at least one; leave-one-out needs two).
FrameworkFit fit_framework(const std::vector<FrameworkRun>& runs, const FrameworkRunModel& model,
                           const FrameworkFitOptions& options);

// The fit's report, for the framework file's "fit" field: the terms fitted, the runs with their
// measured, base, fitted and leave-one-out times, and the error summaries.
Json framework_fit_json(const FrameworkFit& fit);

}  // namespace pipetwin::sim
