#include "core/zoo/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Eigen/Dense>

#include "core/error.hpp"
#include "core/model_spec.hpp"

namespace pipetwin::zoo {

namespace {

// Columns of the least-squares problem: overhead, 1 / memory efficiency, 1 / efficiency[kind].
struct Layout {
  std::vector<std::string> kinds;
  int cols() const { return 2 + static_cast<int>(kinds.size()); }
  int col(const std::string& kind) const {
    return 2 + static_cast<int>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
  }
};

std::vector<double> to_unknowns(const Efficiency& e, const Layout& layout) {
  std::vector<double> x = {e.overhead_s, 1 / e.memory};
  for (const auto& k : layout.kinds) x.push_back(1 / e.compute_for(k));
  return x;
}

Efficiency from_unknowns(const std::vector<double>& x, const Layout& layout, Efficiency e) {
  e.overhead_s = x[0];
  e.memory = 1 / x[1];
  for (size_t i = 0; i < layout.kinds.size(); ++i) e.compute[layout.kinds[i]] = 1 / x[2 + i];
  return e;
}

bool compute_bound(const TaskSample& s, const Efficiency& e) {
  return s.work.compute_s / e.compute_for(s.kind) >= s.work.memory_s / e.memory;
}

double weighted_error(const std::vector<const TaskSample*>& fit, const Efficiency& e) {
  double sum = 0;
  for (const auto* s : fit) {
    const double r = (task_time(s->work, s->kind, e) - s->measured_s) / s->measured_s;
    sum += r * r;
  }
  return sum;
}

// Least squares A x ~ y with x[j] >= lower[j] for the columns in `free`, the others held at x.
// Active set: the most violating unknown is fixed at its bound and the rest re-solved.
void solve_bounded(const Eigen::MatrixXd& A, const Eigen::VectorXd& y,
                   const std::vector<double>& lower, std::vector<bool> free,
                   std::vector<double>& x) {
  for (int round = 0; round <= A.cols(); ++round) {
    std::vector<int> cols;
    Eigen::VectorXd rhs = y;
    for (int j = 0; j < A.cols(); ++j) {
      if (free[static_cast<size_t>(j)]) {
        cols.push_back(j);
      } else {
        rhs -= A.col(j) * x[static_cast<size_t>(j)];
      }
    }
    if (cols.empty()) return;
    Eigen::MatrixXd sub(A.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = A.col(cols[k]);
    const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(rhs);
    int worst = -1;
    double worst_gap = 0;
    for (size_t k = 0; k < cols.size(); ++k) {
      const double gap = lower[static_cast<size_t>(cols[k])] - sol(static_cast<Eigen::Index>(k));
      if (gap > worst_gap) {
        worst_gap = gap;
        worst = cols[k];
      }
    }
    if (worst < 0) {
      for (size_t k = 0; k < cols.size(); ++k) {
        x[static_cast<size_t>(cols[k])] = sol(static_cast<Eigen::Index>(k));
      }
      return;
    }
    x[static_cast<size_t>(worst)] = lower[static_cast<size_t>(worst)];
    free[static_cast<size_t>(worst)] = false;
  }
}

// One round of step 2: the regimes `compute` fixed, returns the new estimate and which kinds it
// could fit (had a compute-bound sample).
Efficiency fit_round(const std::vector<const TaskSample*>& fit, const std::vector<bool>& compute,
                     const Layout& layout, const Efficiency& current,
                     std::set<std::string>& fitted) {
  const int n = static_cast<int>(fit.size());
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n, layout.cols());
  Eigen::VectorXd y = Eigen::VectorXd::Ones(n);  // measured / measured
  std::vector<bool> free(static_cast<size_t>(layout.cols()), false);
  free[0] = true;
  for (int i = 0; i < n; ++i) {
    const TaskSample& s = *fit[static_cast<size_t>(i)];
    const double w = 1 / s.measured_s;
    A(i, 0) = w;
    const int col = compute[static_cast<size_t>(i)] ? layout.col(s.kind) : 1;
    A(i, col) = w * (compute[static_cast<size_t>(i)] ? s.work.compute_s : s.work.memory_s);
    if (A(i, col) > 0) free[static_cast<size_t>(col)] = true;
  }
  std::vector<double> lower(static_cast<size_t>(layout.cols()), 1 / kMaxEfficiency);
  lower[0] = 0;
  std::vector<double> x = to_unknowns(current, layout);
  solve_bounded(A, y, lower, free, x);
  fitted.clear();
  for (size_t k = 0; k < layout.kinds.size(); ++k) {
    if (free[2 + k]) fitted.insert(layout.kinds[k]);
  }
  return from_unknowns(x, layout, current);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Json summary_json(const ErrorSummary& s) {
  return {{"tasks", s.count},
          {"median_rel_error", s.median},
          {"worst_rel_error", s.worst},
          {"worst_task", s.worst_task}};
}

// The descriptor of profile `p`, checked to match it layer for layer, on `device`, in the
// dtype of the first profile.
ZooModel matching_descriptor(const Profile& p, const Profile& first, const DeviceSpec& device,
                             const std::string& origin) {
  if (p.device != device.name) {
    throw InputError(fmt::format("{}: device \"{}\" differs from the calibrated device \"{}\"",
                                 origin, p.device, device.name));
  }
  if (p.dtype != first.dtype) {
    throw InputError(fmt::format("{}: dtype {} differs from the first profile's {}", origin,
                                 p.dtype, first.dtype));
  }
  ZooModel z = describe_model(p.model, origin + ": model");
  if (z.num_layers() != p.num_layers()) {
    throw InputError(fmt::format("{}: {} layers, but the descriptor of {} has {}", origin,
                                 p.num_layers(), z.name, z.num_layers()));
  }
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerProfile& lp = p.layers[l];
    const ZooLayer& zl = z.layers[l];
    if (lp.name != zl.name || lp.kind != zl.kind) {
      throw InputError(
          fmt::format("{}: layers[{}] is \"{}\" ({}), but the descriptor of {} has \"{}\" ({})",
                      origin, l, lp.name, lp.kind, z.name, zl.name, zl.kind));
    }
  }
  return z;
}

}  // namespace

std::vector<TaskSample> calibration_samples(const std::vector<Profile>& measured,
                                            const DeviceSpec& device,
                                            const std::vector<std::string>& origins,
                                            const CalibrationOptions& o) {
  if (measured.empty()) throw InputError("calibrate: give at least one measured profile");
  if (o.holdout_every < 0) {
    throw InputError(fmt::format("--holdout must not be negative ({} given)", o.holdout_every));
  }
  const std::string held_model =
      o.holdout_model.empty() ? ""
                              : ModelSpec::parse(o.holdout_model, "--holdout-model").to_string();
  const double peak = device_peak(device, measured.front().dtype), bw = device_bandwidth(device);
  const double elem = dtype_bytes(measured.front().dtype, "calibrate: dtype");
  std::vector<TaskSample> out;
  bool held_model_seen = false;
  for (size_t i = 0; i < measured.size(); ++i) {
    const Profile& p = measured[i];
    const std::string origin = i < origins.size() ? origins[i] : fmt::format("profile {}", i);
    const ZooModel z = matching_descriptor(p, measured.front(), device, origin);
    const bool model_held = !held_model.empty() && z.name == held_model;
    held_model_seen = held_model_seen || model_held;
    for (int l = 0; l < p.num_layers(); ++l) {
      const LayerProfile& lp = p.layers[static_cast<size_t>(l)];
      const ZooLayer& zl = z.layers[static_cast<size_t>(l)];
      const bool held =
          model_held || (o.holdout_every > 0 && l % o.holdout_every == o.holdout_every - 1);
      for (const auto& t : lp.timings) {
        const LayerWork w = layer_work(zl, t.micro_batch, peak, bw, elem);
        for (bool backward : {false, true}) {
          const double measured_s = backward ? t.backward_s : t.forward_s;
          if (!(measured_s > 0)) continue;
          out.push_back({z.name, zl.name, zl.kind, t.micro_batch, backward, held,
                         backward ? w.backward : w.forward, measured_s, 0});
        }
      }
    }
  }
  if (!held_model.empty() && !held_model_seen) {
    throw InputError(fmt::format("--holdout-model: no profile of model {} among the profiles given",
                                 held_model));
  }
  return out;
}

double TaskSample::rel_error() const {
  return std::abs(predicted_s - measured_s) / measured_s;
}

ErrorSummary summarize(const std::vector<TaskSample>& samples, bool held_out) {
  ErrorSummary s;
  std::vector<double> errors;
  for (const auto& t : samples) {
    if (t.held_out != held_out) continue;
    errors.push_back(t.rel_error());
    if (errors.back() >= s.worst) {
      s.worst = errors.back();
      s.worst_task =
          fmt::format("{} {} {} b={}", t.model, t.layer, t.backward ? "bwd" : "fwd", t.micro_batch);
    }
  }
  s.count = static_cast<int>(errors.size());
  s.median = median_of(errors);
  return s;
}

CalibrationResult calibrate(const std::vector<Profile>& measured, const DeviceSpec& device,
                            const CalibrationOptions& o, const std::vector<std::string>& origins) {
  CalibrationResult r;
  r.samples = calibration_samples(measured, device, origins, o);
  std::vector<const TaskSample*> fit;
  Layout layout;
  for (const auto& s : r.samples) {
    if (s.held_out) continue;
    fit.push_back(&s);
    if (std::find(layout.kinds.begin(), layout.kinds.end(), s.kind) == layout.kinds.end()) {
      layout.kinds.push_back(s.kind);
    }
  }
  if (fit.empty())
    throw InputError("calibrate: every measured layer is held aside; nothing to fit");
  Efficiency current = default_efficiency(), best = current;
  std::set<std::string> fitted, best_fitted;
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<bool> regime;
  for (const auto* s : fit) regime.push_back(compute_bound(*s, current));
  for (r.iterations = 1; r.iterations <= o.max_iterations; ++r.iterations) {
    current = fit_round(fit, regime, layout, current, fitted);
    const double err = weighted_error(fit, current);
    if (err < best_error) {
      best_error = err;
      best = current;
      best_fitted = fitted;
    }
    std::vector<bool> next;
    for (const auto* s : fit) next.push_back(compute_bound(*s, current));
    if (next == regime) break;
    regime = std::move(next);
  }
  r.iterations = std::min(r.iterations, o.max_iterations);
  std::vector<double> fitted_values;
  for (const auto& k : best_fitted) fitted_values.push_back(best.compute.at(k));
  if (!fitted_values.empty()) best.default_compute = median_of(fitted_values);
  best.device = device.name;
  best.dtype = measured.front().dtype;
  for (auto& s : r.samples) s.predicted_s = task_time(s.work, s.kind, best);
  r.fit = summarize(r.samples, false);
  r.held = summarize(r.samples, true);
  std::vector<std::string> models;
  for (const auto& p : measured) models.push_back(p.model);
  best.notes = fmt::format("calibrated by least squares on {} measured task times of {}",
                           r.fit.count, fmt::join(models, ", "));
  best.fit = {{"fitted", summary_json(r.fit)},
              {"held_out", summary_json(r.held)},
              {"holdout_every", o.holdout_every},
              {"holdout_model", o.holdout_model},
              {"iterations", r.iterations},
              {"fitted_kinds", std::vector<std::string>(best_fitted.begin(), best_fitted.end())}};
  r.fitted_kinds = best_fitted;
  r.efficiency = std::move(best);
  return r;
}

}  // namespace pipetwin::zoo
