#include "studies/framework_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "sim/pipeline_sim.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::sim {

namespace {

constexpr double kMinScale = 0.05;  // a scale's lower bound: 20x the profile's speed at most
constexpr double kDamping = 1e-6;   // Levenberg damping on the normalised normal equations

bool is_scale(FrameworkTerm t) {
  return framework_term_neutral(t) == 1.0;
}
double lower_bound(FrameworkTerm t) {
  return is_scale(t) ? kMinScale : 0.0;
}

// Solves A x = b (n x n, row-major) by Gaussian elimination with partial pivoting; false when A
// is singular.
bool solve(std::vector<double> a, std::vector<double>& b, size_t n) {
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    if (std::abs(a[p * n + c]) < 1e-300) return false;
    for (size_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[p * n + k]);
    std::swap(b[c], b[p]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / a[c * n + c];
      for (size_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    for (size_t k = c + 1; k < n; ++k) b[c] -= a[c * n + k] * b[k];
    b[c] /= a[c * n + c];
  }
  return true;
}

double median_abs(const std::vector<double>& v) {
  std::vector<double> a;
  for (double x : v) a.push_back(std::abs(x));
  return median(a);
}

double worst_abs(const std::vector<double>& v) {
  double w = 0;
  for (double x : v) w = std::max(w, std::abs(x));
  return w;
}

// One fit to the runs `use` (indices into the model).
class Fitter {
 public:
  Fitter(const std::vector<FrameworkRun>& runs, const FrameworkRunModel& model,
         std::vector<FrameworkTerm> terms, std::vector<size_t> use)
      : runs_(runs), model_(model), terms_(std::move(terms)), use_(std::move(use)) {
    std::vector<double> measured;
    for (size_t i : use_) measured.push_back(runs_[i].measured_s);
    shortest_s_ = *std::min_element(measured.begin(), measured.end());
    step_s_ = 1e-4 * shortest_s_;
  }

  // Fits the terms of `f`, starting from its values; returns the Gauss-Newton steps taken.
  int fit(Framework& f, int max_iterations) {
    weights_.assign(use_.size(), 1.0);
    std::vector<double> r = residuals(f);
    int it = 0;
    for (; it < max_iterations; ++it) {
      const std::vector<std::vector<double>> jac = jacobian(f, r);
      const Framework before = f;
      const double moved = step(f, jac, r);
      // Halve a step that made the weighted squares worse (the critical path moved under it).
      std::vector<double> next = residuals(f);
      for (int halve = 0; halve < 10 && cost(next) > cost(r); ++halve) {
        for (FrameworkTerm t : terms_)
          framework_term(f, t) = (framework_term(f, t) + framework_term(before, t)) / 2;
        next = residuals(f);
      }
      r = std::move(next);
      reweight(r);
      if (moved < 1e-7) break;
    }
    return it;
  }
  const std::vector<double>& weights() const { return weights_; }
  const std::vector<FrameworkTerm>& terms() const { return terms_; }
  void adopt(const Fitter& o) {
    weights_ = o.weights_;
    identified_ = o.identified_;
  }
  double shortest_run_s() const { return shortest_s_; }
  std::vector<double> residuals(const Framework& f) const {
    std::vector<double> r;
    for (size_t i : use_) r.push_back(1 - model_.predict(i, f) / runs_[i].measured_s);
    return r;
  }
  // Terms some run depends on.
  std::vector<FrameworkTerm> identified() const { return identified_; }

 private:
  double cost(const std::vector<double>& r) const {
    double c = 0;
    for (size_t k = 0; k < r.size(); ++k) c += weights_[k] * r[k] * r[k];
    return c;
  }

  double step_of(FrameworkTerm t) const { return is_scale(t) ? 1e-3 : step_s_; }

  // d(predicted / measured) / d(term), per term then per run.
  std::vector<std::vector<double>> jacobian(const Framework& f, const std::vector<double>& r) {
    std::vector<std::vector<double>> jac;
    for (FrameworkTerm t : terms_) {
      Framework g = f;
      const double h = step_of(t);
      framework_term(g, t) += h;
      const std::vector<double> rg = residuals(g);
      std::vector<double> col;
      for (size_t k = 0; k < rg.size(); ++k) col.push_back((r[k] - rg[k]) / h);
      jac.push_back(std::move(col));
    }
    return jac;
  }

  // A damped Gauss-Newton step on the weighted, normalised problem, terms at a bound held there;
  // returns the largest normalised move.
  double step(Framework& f, const std::vector<std::vector<double>>& jac, std::vector<double> r) {
    std::vector<size_t> free;
    std::vector<double> norm(terms_.size(), 0);
    identified_.clear();
    for (size_t j = 0; j < terms_.size(); ++j) {
      for (size_t k = 0; k < r.size(); ++k) norm[j] += weights_[k] * jac[j][k] * jac[j][k];
      norm[j] = std::sqrt(norm[j]);
      if (norm[j] > 1e-9) {
        free.push_back(j);
        identified_.push_back(terms_[j]);
      }
    }
    const Framework start = f;
    Framework before = f;  // with the terms held at a bound moved there
    for (size_t round = 0; round <= terms_.size() && !free.empty(); ++round) {
      const size_t n = free.size();
      std::vector<double> a(n * n, 0), b(n, 0);
      for (size_t x = 0; x < n; ++x) {
        const auto& jx = jac[free[x]];
        for (size_t k = 0; k < r.size(); ++k) b[x] += weights_[k] * jx[k] * r[k] / norm[free[x]];
        for (size_t y = 0; y < n; ++y) {
          const auto& jy = jac[free[y]];
          for (size_t k = 0; k < r.size(); ++k)
            a[x * n + y] += weights_[k] * jx[k] * jy[k] / (norm[free[x]] * norm[free[y]]);
        }
        a[x * n + x] += kDamping;
      }
      if (!solve(a, b, n)) return 0;
      f = before;
      size_t violated = n;
      for (size_t x = 0; x < n; ++x) {
        const FrameworkTerm t = terms_[free[x]];
        double& v = framework_term(f, t);
        v += b[x] / norm[free[x]];
        if (v < lower_bound(t) && violated == n) violated = x;
      }
      if (violated == n) break;
      // Hold the first term past its bound there and solve for the others again, from the
      // residuals the held term leaves (linearised: r - J_t x its move).
      const size_t held = free[violated];
      const FrameworkTerm t = terms_[held];
      const double move = lower_bound(t) - framework_term(before, t);
      for (size_t k = 0; k < r.size(); ++k) r[k] -= jac[held][k] * move;
      framework_term(before, t) = lower_bound(t);
      free.erase(free.begin() + static_cast<long>(violated));
    }
    for (FrameworkTerm t : terms_)
      framework_term(f, t) = std::max(framework_term(f, t), lower_bound(t));
    double moved = 0;
    for (size_t j = 0; j < terms_.size(); ++j) {
      const double d = framework_term(f, terms_[j]) - framework_term(start, terms_[j]);
      moved = std::max(moved, std::abs(d) * std::max(norm[j], 1e-12));
    }
    return moved;
  }

  void reweight(const std::vector<double>& r) {
    const double scale = std::max(1.4826 * median_abs(r), 1e-4);
    const double k = 1.345 * scale;
    for (size_t i = 0; i < r.size(); ++i)
      weights_[i] = std::abs(r[i]) <= k ? 1.0 : k / std::abs(r[i]);
  }

  const std::vector<FrameworkRun>& runs_;
  const FrameworkRunModel& model_;
  std::vector<FrameworkTerm> terms_;
  std::vector<size_t> use_;
  double shortest_s_ = 1e-2;  // the shortest measured run
  double step_s_ = 1e-6;
  std::vector<double> weights_;
  std::vector<FrameworkTerm> identified_;
};

Plan plan_run(const FrameworkRun& run, const Catalog& catalog) {
  PlanOptions o;
  o.model = run.model;
  o.profile = run.profile;
  o.cluster = run.cluster;
  o.stages = run.stages;
  o.dp = run.dp;
  o.batch = run.batch;
  o.chunks = std::to_string(run.chunks());
  o.schedule = run.schedule;
  o.dtype = run.dtype;
  o.optimizer = run.optimizer;
  o.partitioner = run.partitioner;
  o.virtual_stages = run.virtual_stages > 0 ? std::to_string(run.virtual_stages) : "auto";
  o.check_precision();
  PlanRequest r = o.request(catalog);
  r.allow_oom = true;  // the run ran: whatever the memory model says, it fitted
  return make_plan(r);
}

// Gauss-Newton finds the minimum nearest its start, and where two terms trade against each other
// (a transfer's latency against the host time at its ends) that need not be the best one. So the
// fit starts from `f` (neutral, or the whole fit's terms for a left-out run) and from every
// overhead term at 1% and 10% of the shortest run, and keeps the fit with the least Huber loss
// (kHuberLoss). Returns the Gauss-Newton steps of the fit kept; `fitter` ends with its weights.
constexpr double kHuberLoss = 0.05;  // relative errors beyond 5% count linearly

double huber_loss(const std::vector<double>& r) {
  double sum = 0;
  for (double x : r) {
    const double a = std::abs(x);
    sum += a <= kHuberLoss ? a * a / 2 : kHuberLoss * (a - kHuberLoss / 2);
  }
  return sum;
}

int fit_from_starts(Fitter& fitter, Framework& f, int max_iterations) {
  std::vector<Framework> starts{f};
  for (double share : {0.01, 0.1}) {
    Framework s = f;
    for (FrameworkTerm t : fitter.terms())
      if (!is_scale(t)) framework_term(s, t) = share * fitter.shortest_run_s();
    starts.push_back(s);
  }
  double best = std::numeric_limits<double>::infinity();
  int steps = 0;
  const Fitter fresh = fitter;
  for (const Framework& start : starts) {
    Fitter trial = fresh;
    Framework g = start;
    const int n = trial.fit(g, max_iterations);
    const double loss = huber_loss(trial.residuals(g));
    if (loss < best) {
      best = loss;
      f = g;
      steps = n;
      fitter.adopt(trial);  // its weights and identified terms
    }
  }
  return steps;
}

}  // namespace

FrameworkRunModel::FrameworkRunModel(const std::vector<FrameworkRun>& runs,
                                     const Catalog& catalog) {
  for (const FrameworkRun& run : runs) {
    try {
      plans_.push_back(plan_run(run, catalog));
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", run.origin, e.what()));
    }
  }
}

double FrameworkRunModel::predict(size_t run, const Framework& f) const {
  Plan p = plans_[run];
  p.framework = f;
  const PlanContext ctx(p, p.iterations);
  return simulate_plan(ctx).metrics.iteration_time_s;
}

FrameworkFit fit_framework(const std::vector<FrameworkRun>& runs, const FrameworkRunModel& model,
                           const FrameworkFitOptions& o) {
  if (runs.empty()) throw InputError("framework fit: no runs");
  std::vector<FrameworkTerm> terms = o.terms;
  if (terms.empty())
    for (int t = 0; t < kFrameworkTerms; ++t) terms.push_back(FrameworkTerm(t));
  std::vector<size_t> all(runs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  FrameworkFit out;
  out.framework.name = o.name;
  Fitter fitter(runs, model, terms, all);
  out.iterations = fit_from_starts(fitter, out.framework, o.max_iterations);
  out.fitted = fitter.identified();
  std::vector<double> base, fit, loo;
  for (size_t i = 0; i < runs.size(); ++i) {
    FrameworkRunResult r{.run = runs[i],
                         .base_s = model.predict(i, Framework{}),
                         .fitted_s = model.predict(i, out.framework),
                         .loo_s = 0,
                         .weight = fitter.weights()[i]};
    if (o.leave_one_out && runs.size() > 1) {
      std::vector<size_t> others;
      for (size_t k : all)
        if (k != i) others.push_back(k);
      Framework f = out.framework;
      Fitter loo_fitter(runs, model, terms, others);
      fit_from_starts(loo_fitter, f, o.max_iterations);
      r.loo_s = model.predict(i, f);
      loo.push_back(r.loo_error());
    }
    base.push_back(r.base_error());
    fit.push_back(r.fitted_error());
    out.runs.push_back(std::move(r));
  }
  out.base_median = median_abs(base);
  out.base_worst = worst_abs(base);
  out.fit_median = median_abs(fit);
  out.fit_worst = worst_abs(fit);
  out.loo_median = median_abs(loo);
  out.loo_worst = worst_abs(loo);
  return out;
}

Json framework_fit_json(const FrameworkFit& fit) {
  Json terms = Json::array();
  for (FrameworkTerm t : fit.fitted) terms.push_back(framework_term_name(t));
  Json runs = Json::array();
  for (const auto& r : fit.runs) {
    Json j{{"run", r.run.origin},
           {"model", r.run.model},
           {"cluster", r.run.cluster},
           {"stages", r.run.stages},
           {"dp", r.run.dp},
           {"batch", r.run.batch},
           {"micro_batch", r.run.micro_batch},
           {"schedule", r.run.schedule},
           {"measured_ms", r.run.measured_s * 1e3},
           {"base_ms", r.base_s * 1e3},
           {"fitted_ms", r.fitted_s * 1e3},
           {"weight", r.weight}};
    if (r.loo_s > 0) j["leave_one_out_ms"] = r.loo_s * 1e3;
    runs.push_back(std::move(j));
  }
  return Json{{"method",
               "Gauss-Newton on the simulator, Huber IRLS on relative residuals "
               "(studies/framework_fit.hpp)"},
              {"terms_fitted", terms},
              {"iterations", fit.iterations},
              {"median_error_without", fit.base_median},
              {"median_error_fit", fit.fit_median},
              {"worst_error_fit", fit.fit_worst},
              {"median_error_leave_one_out", fit.loo_median},
              {"worst_error_leave_one_out", fit.loo_worst},
              {"runs", runs}};
}

}  // namespace pipetwin::sim
