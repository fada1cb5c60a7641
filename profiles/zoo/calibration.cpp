#include "profiles/zoo/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Eigen/Dense>

#include "core/error.hpp"
#include "profiles/model_spec.hpp"

namespace pipetwin::zoo {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr TaskPass kPasses[] = {TaskPass::forward, TaskPass::backward, TaskPass::step};

// Columns of the least-squares problem: the overheads (one per (kind, pass) with enough samples,
// one shared per pass for the rest; a single one with per_kind_overheads off), then 1 / memory
// efficiency, then 1 / efficiency[kind].
struct Layout {
  std::vector<std::string> kinds;
  std::map<std::pair<std::string, TaskPass>, int> own;  // (kind, pass) -> its overhead column
  std::map<TaskPass, int> shared;                       // pass -> the shared overhead column
  int overheads = 0;
  bool per_kind = true;

  int ocol(const TaskSample& s) const {
    if (!per_kind) return 0;
    const auto it = own.find({s.kind, s.pass});
    return it != own.end() ? it->second : shared.at(s.pass);
  }
  int vcol() const { return overheads; }
  int ucol(const std::string& kind) const {
    return overheads + 1 +
           static_cast<int>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin());
  }
  int cols() const { return overheads + 1 + static_cast<int>(kinds.size()); }
};

Layout make_layout(const std::vector<const TaskSample*>& fit, const CalibrationOptions& o) {
  Layout layout;
  layout.per_kind = o.per_kind_overheads;
  std::map<std::pair<std::string, TaskPass>, int> count;
  for (const auto* s : fit) {
    if (std::find(layout.kinds.begin(), layout.kinds.end(), s->kind) == layout.kinds.end()) {
      layout.kinds.push_back(s->kind);
    }
    ++count[{s->kind, s->pass}];
  }
  if (!layout.per_kind) {
    layout.overheads = 1;
    return layout;
  }
  for (const auto& [key, n] : count) {
    if (n >= o.min_overhead_samples) layout.own[key] = layout.overheads++;
  }
  for (const auto& [key, n] : count) {
    if (n < o.min_overhead_samples && !layout.shared.count(key.second)) {
      layout.shared[key.second] = layout.overheads++;
    }
  }
  return layout;
}

std::vector<double> to_unknowns(const Efficiency& e, const Layout& layout) {
  std::vector<double> x(static_cast<size_t>(layout.cols()), e.overhead_s);
  x[static_cast<size_t>(layout.vcol())] = 1 / e.memory;
  for (const auto& k : layout.kinds) x[static_cast<size_t>(layout.ucol(k))] = 1 / e.compute_for(k);
  return x;
}

// The overheads of a per-kind layout: kinds with a column of their own list all three passes
// (a pass they lack takes the shared value); the shared value of a pass without a shared column
// is the median of the kinds' own.
void set_overheads(const std::vector<double>& x, const Layout& layout, Efficiency& e) {
  TaskOverheads shared;
  for (TaskPass pass : kPasses) {
    double value = e.overhead_s;
    if (const auto it = layout.shared.find(pass); it != layout.shared.end()) {
      value = x[static_cast<size_t>(it->second)];
    } else {
      std::vector<double> own;
      for (const auto& [key, col] : layout.own) {
        if (key.second == pass) own.push_back(x[static_cast<size_t>(col)]);
      }
      if (!own.empty()) value = median_of(own);
    }
    (pass == TaskPass::forward    ? shared.forward_s
     : pass == TaskPass::backward ? shared.backward_s
                                  : shared.step_s) = value;
  }
  e.overheads.clear();
  for (const auto& [key, col] : layout.own) e.overheads.emplace(key.first, shared);
  for (const auto& [key, col] : layout.own) {
    TaskOverheads& o = e.overheads[key.first];
    (key.second == TaskPass::forward    ? o.forward_s
     : key.second == TaskPass::backward ? o.backward_s
                                        : o.step_s) = x[static_cast<size_t>(col)];
  }
  e.default_overheads = shared;
  e.overhead_s = shared.forward_s;
}

Efficiency from_unknowns(const std::vector<double>& x, const Layout& layout, Efficiency e) {
  if (layout.per_kind) {
    set_overheads(x, layout, e);
  } else {
    e.overhead_s = x[0];
    e.overheads.clear();
    e.default_overheads.reset();
  }
  e.memory = 1 / x[static_cast<size_t>(layout.vcol())];
  for (const auto& k : layout.kinds) e.compute[k] = 1 / x[static_cast<size_t>(layout.ucol(k))];
  return e;
}

bool compute_bound(const TaskSample& s, const Efficiency& e) {
  return s.work.compute_s / e.compute_for(s.kind) >= s.work.memory_s / e.memory;
}

double weighted_error(const std::vector<const TaskSample*>& fit, const Efficiency& e) {
  double sum = 0;
  for (const auto* s : fit) {
    const double r = (task_time(s->work, s->kind, s->pass, e) - s->measured_s) / s->measured_s;
    sum += r * r;
  }
  return sum;
}

// Which roofline columns the samples can determine (see "Identifiability" in the header).
std::vector<bool> identifiable(const std::vector<const TaskSample*>& fit, const Layout& layout,
                               const Efficiency& prior, double share) {
  std::vector<bool> out(static_cast<size_t>(layout.cols()), false);
  for (int j = 0; j < layout.overheads; ++j) out[static_cast<size_t>(j)] = true;
  for (const auto* s : fit) {
    const double floor = share * s->measured_s;
    if (s->work.compute_s / prior.compute_for(s->kind) >= floor) {
      out[static_cast<size_t>(layout.ucol(s->kind))] = true;
    }
    if (s->work.memory_s / prior.memory >= floor) out[static_cast<size_t>(layout.vcol())] = true;
  }
  return out;
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

// One round of step 2: the regimes `compute` fixed, returns the new estimate; `fitted` gets the
// kinds whose efficiency it set.
Efficiency fit_round(const std::vector<const TaskSample*>& fit, const std::vector<bool>& compute,
                     const Layout& layout, const std::vector<bool>& solvable,
                     const Efficiency& current, std::set<std::string>& fitted) {
  const int n = static_cast<int>(fit.size());
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n, layout.cols());
  Eigen::VectorXd y = Eigen::VectorXd::Ones(n);  // measured / measured
  std::vector<bool> free(static_cast<size_t>(layout.cols()), false);
  for (int i = 0; i < n; ++i) {
    const TaskSample& s = *fit[static_cast<size_t>(i)];
    const double w = 1 / s.measured_s;
    const bool c = compute[static_cast<size_t>(i)];
    const int ocol = layout.ocol(s), col = c ? layout.ucol(s.kind) : layout.vcol();
    A(i, ocol) = w;
    free[static_cast<size_t>(ocol)] = true;
    A(i, col) = w * (c ? s.work.compute_s : s.work.memory_s);
    if (A(i, col) > 0 && solvable[static_cast<size_t>(col)]) free[static_cast<size_t>(col)] = true;
  }
  std::vector<double> lower(static_cast<size_t>(layout.cols()), 1 / kMaxEfficiency);
  for (int j = 0; j < layout.overheads; ++j) lower[static_cast<size_t>(j)] = 0;
  // The memory term is capped at the datasheet bandwidth (efficiency <= 1): small models' tensors
  // stay in a GPU's L2 and fit above it (1.4 on the H100 profiles), which the large models the
  // analytic profile is for would not see.
  lower[static_cast<size_t>(layout.vcol())] = 1.0;
  std::vector<double> x = to_unknowns(current, layout);
  solve_bounded(A, y, lower, free, x);
  fitted.clear();
  for (const auto& k : layout.kinds) {
    if (free[static_cast<size_t>(layout.ucol(k))]) fitted.insert(k);
  }
  return from_unknowns(x, layout, current);
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

namespace {

struct SampleContext {
  double peak = 0, bandwidth = 0, elem = 0;
};

// The forward, backward and optimizer-step samples of layer `l` of profile `p`.
void add_layer_samples(const Profile& p, const ZooModel& z, int l, bool held,
                       const SampleContext& c, const std::string& origin,
                       std::vector<TaskSample>& out) {
  const LayerProfile& lp = p.layers[static_cast<size_t>(l)];
  const ZooLayer& zl = z.layers[static_cast<size_t>(l)];
  for (const auto& t : lp.timings) {
    const LayerWork w = layer_work(zl, t.micro_batch, c.peak, c.bandwidth, c.elem);
    if (t.forward_s > 0) {
      out.push_back({z.name, zl.name, zl.kind, t.micro_batch, TaskPass::forward, held, w.forward,
                     t.forward_s, 0});
    }
    if (t.backward_s > 0) {
      out.push_back({z.name, zl.name, zl.kind, t.micro_batch, TaskPass::backward, held, w.backward,
                     t.backward_s, 0});
    }
  }
  // A profile that does not say which optimizer it timed has no step traffic to go by.
  if (zl.params > 0 && lp.optimizer_step_s > 0 && !p.optimizer.empty()) {
    const ParamBytes per_param =
        param_bytes(p.dtype, parse_optimizer(p.optimizer, origin + ": optimizer"));
    out.push_back({z.name, zl.name, zl.kind, 0, TaskPass::step, held,
                   step_work(zl, per_param, c.bandwidth), lp.optimizer_step_s, 0});
  }
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
  const SampleContext c{device_peak(device, measured.front().dtype), device_bandwidth(device),
                        dtype_bytes(measured.front().dtype, "calibrate: dtype")};
  std::vector<TaskSample> out;
  bool held_model_seen = false;
  for (size_t i = 0; i < measured.size(); ++i) {
    const Profile& p = measured[i];
    const std::string origin = i < origins.size() ? origins[i] : fmt::format("profile {}", i);
    const ZooModel z = matching_descriptor(p, measured.front(), device, origin);
    const bool model_held = !held_model.empty() && z.name == held_model;
    held_model_seen = held_model_seen || model_held;
    for (int l = 0; l < p.num_layers(); ++l) {
      const bool held =
          model_held || (o.holdout_every > 0 && l % o.holdout_every == o.holdout_every - 1);
      add_layer_samples(p, z, l, held, c, origin, out);
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
      s.worst_task = t.pass == TaskPass::step ? fmt::format("{} {} step", t.model, t.layer)
                                              : fmt::format("{} {} {} b={}", t.model, t.layer,
                                                            pass_name(t.pass), t.micro_batch);
    }
  }
  s.count = static_cast<int>(errors.size());
  s.median = median_of(errors);
  return s;
}

namespace {

struct Estimate {
  Efficiency efficiency;
  std::set<std::string> fitted_kinds;
  int iterations = 0;
};

// Steps 1-3 of "Fit" over the samples not held aside.
Estimate fit_samples(const std::vector<TaskSample>& samples, const CalibrationOptions& o) {
  std::vector<const TaskSample*> fit;
  for (const auto& s : samples) {
    if (!s.held_out) fit.push_back(&s);
  }
  if (fit.empty())
    throw InputError("calibrate: every measured layer is held aside; nothing to fit");
  const Layout layout = make_layout(fit, o);
  const Efficiency prior = default_efficiency();
  const std::vector<bool> solvable = identifiable(fit, layout, prior, o.identifiable_share);
  Efficiency current = prior;
  Estimate best{prior, {}, 0};
  std::set<std::string> fitted;
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<bool> regime;
  for (const auto* s : fit) regime.push_back(compute_bound(*s, current));
  int round = 1;
  for (; round <= o.max_iterations; ++round) {
    current = fit_round(fit, regime, layout, solvable, current, fitted);
    const double err = weighted_error(fit, current);
    if (err < best_error) {
      best_error = err;
      best.efficiency = current;
      best.fitted_kinds = fitted;
    }
    std::vector<bool> next;
    for (const auto* s : fit) next.push_back(compute_bound(*s, current));
    if (next == regime) break;
    regime = std::move(next);
  }
  best.iterations = std::min(round, o.max_iterations);
  std::vector<double> fitted_values;
  for (const auto& k : best.fitted_kinds) fitted_values.push_back(best.efficiency.compute.at(k));
  if (!fitted_values.empty()) best.efficiency.default_compute = median_of(fitted_values);
  return best;
}

}  // namespace

CalibrationResult calibrate(const std::vector<Profile>& measured, const DeviceSpec& device,
                            const CalibrationOptions& o, const std::vector<std::string>& origins) {
  CalibrationResult r;
  r.samples = calibration_samples(measured, device, origins, o);
  Estimate best = fit_samples(r.samples, o);
  Efficiency& e = best.efficiency;
  e.device = device.name;
  e.dtype = measured.front().dtype;
  for (auto& s : r.samples) s.predicted_s = task_time(s.work, s.kind, s.pass, e);
  r.fit = summarize(r.samples, false);
  r.held = summarize(r.samples, true);
  std::vector<std::string> models;
  for (const auto& p : measured) models.push_back(p.model);
  e.notes = fmt::format(
      "calibrated by least squares on {} measured task times of {}; {}", r.fit.count,
      fmt::join(models, ", "),
      o.per_kind_overheads ? "one overhead per (op kind, pass)" : "one overhead for every task");
  e.fit = {{"fitted", summary_json(r.fit)},
           {"held_out", summary_json(r.held)},
           {"holdout_every", o.holdout_every},
           {"holdout_model", o.holdout_model},
           {"iterations", best.iterations},
           {"fitted_kinds",
            std::vector<std::string>(best.fitted_kinds.begin(), best.fitted_kinds.end())}};
  r.iterations = best.iterations;
  r.fitted_kinds = std::move(best.fitted_kinds);
  r.efficiency = std::move(e);
  return r;
}

HoldoutReport leave_one_model_out(const std::vector<Profile>& measured, const DeviceSpec& device,
                                  const CalibrationOptions& options,
                                  const std::vector<std::string>& origins) {
  std::vector<std::string> models;
  for (const auto& p : measured) {
    const std::string name = ModelSpec::parse(p.model, "calibrate: model").to_string();
    if (std::find(models.begin(), models.end(), name) == models.end()) models.push_back(name);
  }
  if (models.size() < 2) {
    throw InputError(fmt::format(
        "--leave-one-model-out: needs profiles of at least two models ({} given)", models.size()));
  }
  HoldoutReport report;
  std::vector<TaskSample> held;
  for (const auto& m : models) {
    CalibrationOptions o = options;
    o.holdout_every = 0;
    o.holdout_model = m;
    const CalibrationResult r = calibrate(measured, device, o, origins);
    report.models.push_back({m, r.held});
    for (const auto& s : r.samples) {
      if (s.held_out) held.push_back(s);
    }
  }
  report.overall = summarize(held, true);
  return report;
}

Json holdout_report_json(const HoldoutReport& report) {
  Json models = Json::object();
  for (const auto& m : report.models) models[m.model] = summary_json(m.held);
  return {
      {"method", "leave one model out: fit on the other models, predict every task of this one"},
      {"overall", summary_json(report.overall)},
      {"models", std::move(models)}};
}

}  // namespace pipetwin::zoo
