#include "profiles/zoo/op_validation.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/zoo/op_cost.hpp"
#include "profiles/zoo/op_fit.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

namespace {

constexpr size_t kTerms = 5;     // scale, first fwd, first bwd, last fwd, last bwd
constexpr double kFloor = 0.02;  // IRLS: residuals below 2% weigh as 2%

// The refinement's terms of a task: its op-priced time and its boundary indicators.
std::array<double, kTerms> terms(const OpTask& t) {
  return {t.predicted_s, t.first && !t.backward ? 1.0 : 0.0, t.first && t.backward ? 1.0 : 0.0,
          t.last && !t.backward ? 1.0 : 0.0, t.last && t.backward ? 1.0 : 0.0};
}

// One pass's prediction and its parts (a synchronous device: the parts add up).
void price(OpTask& t, const std::vector<Kernel>& kernels, int nodes, const OpParams& p,
           const std::string& dtype) {
  t.predicted_s = pass_time(kernels, nodes, p, dtype);
  t.host_s = nodes * p.host_node_s.value;
  for (const auto& k : kernels) {
    const KernelTime kt = kernel_time(k, p, dtype);
    t.host_s += kt.host_s + p.launch_s.value;
    const double body = kt.device_s - p.launch_s.value;
    if (k.kind == OpKind::gemm || k.kind == OpKind::attention) {
      t.gemm_s += body;
    } else if (k.kind == OpKind::conv) {
      t.conv_s += body;
    } else {
      t.elt_s += body;
    }
  }
}

void add_profile_tasks(const Profile& prof, const std::string& origin, const OpParams& p,
                       std::vector<OpTask>& tasks) {
  const ZooModel model = describe_model(prof.model, origin + ": model");
  if (model.num_layers() != prof.num_layers()) {
    throw InputError(fmt::format("{}: layers: {} has {} layers, the profile {}", origin, prof.model,
                                 model.num_layers(), prof.num_layers()));
  }
  OpCostOptions o;
  o.dtype = prof.dtype;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const ZooLayer& l = model.layers[i];
    const LayerProfile& lp = prof.layers[i];
    if (lp.name != l.name) {
      throw InputError(fmt::format("{}: layers[{}].name: \"{}\", the descriptor of {} has \"{}\"",
                                   origin, i, lp.name, prof.model, l.name));
    }
    o.first_layer = i == 0;
    for (const auto& timing : lp.timings) {
      const LayerKernels k = layer_kernels(l, timing.micro_batch, p, o);
      std::vector<Kernel> backward = k.input_half;
      backward.insert(backward.end(), k.weight_half.begin(), k.weight_half.end());
      for (bool bwd : {false, true}) {
        OpTask t;
        t.model = prof.model;
        t.layer = l.name;
        t.kind = l.kind;
        t.micro_batch = timing.micro_batch;
        t.backward = bwd;
        t.first = i == 0;
        t.last = i + 1 == model.layers.size();
        t.measured_s = bwd ? timing.backward_s : timing.forward_s;
        if (t.measured_s <= 0) continue;
        price(t, bwd ? backward : k.forward, bwd ? k.nodes : 0, p, prof.dtype);
        tasks.push_back(t);
      }
    }
  }
}

ErrorSummary summary_of(const std::vector<const OpTask*>& tasks, bool held) {
  ErrorSummary s;
  std::vector<double> e;
  for (const OpTask* t : tasks) {
    const double err = held ? t->held_error() : t->error();
    e.push_back(err);
    if (err >= s.worst) {
      s.worst = err;
      s.worst_task = fmt::format("{} {} {} b={}", t->model, t->layer, t->backward ? "bwd" : "fwd",
                                 t->micro_batch);
    }
  }
  s.count = static_cast<int>(e.size());
  if (!e.empty()) {
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    s.median = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
  }
  return s;
}

}  // namespace

double OpTask::error() const {
  return std::abs(predicted_s - measured_s) / measured_s;
}

double OpTask::held_error() const {
  return std::abs(held_s - measured_s) / measured_s;
}

double refined(const OpTask& t, const LayerRefinement& r) {
  const auto x = terms(t);
  return x[0] * r.scale.value + x[1] * r.first_forward_s.value + x[2] * r.first_backward_s.value +
         x[3] * r.last_forward_s.value + x[4] * r.last_backward_s.value;
}

LayerRefinement fit_refinement(const std::vector<OpTask>& tasks, const std::string& leave_out,
                               const std::string& origin) {
  std::vector<const OpTask*> fit;
  for (const auto& t : tasks) {
    if (t.model != leave_out) fit.push_back(&t);
  }
  std::array<double, kTerms> value{1, 0, 0, 0, 0};
  std::array<bool, kTerms> free{true, false, false, false, false};
  for (const OpTask* t : fit) {  // a boundary time is fitted only where some task has it
    const auto x = terms(*t);
    for (size_t i = 1; i < kTerms; ++i) free[i] = free[i] || x[i] > 0;
  }
  std::vector<double> weight(fit.size(), 1.0);
  for (int round = 0; round < 60 && !fit.empty(); ++round) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < kTerms; ++i) {
      if (free[i]) idx.push_back(i);
    }
    // Rows x / measured, target 1, each weighted; normal equations of the free terms.
    std::vector<std::vector<double>> a(idx.size(), std::vector<double>(idx.size(), 0));
    std::vector<double> b(idx.size(), 0), sol;
    for (size_t j = 0; j < fit.size(); ++j) {
      const auto x = terms(*fit[j]);
      const double y = fit[j]->measured_s, w = weight[j] * weight[j];
      for (size_t r = 0; r < idx.size(); ++r) {
        b[r] += w * x[idx[r]] / y;
        for (size_t c = 0; c < idx.size(); ++c) a[r][c] += w * x[idx[r]] * x[idx[c]] / (y * y);
      }
    }
    if (!solve_small(a, b, sol, 1e-12)) break;  // the free scales' normal equations
    bool negative = false;
    for (size_t r = 0; r < idx.size(); ++r) {
      value[idx[r]] = sol[r];
      if (idx[r] > 0 && sol[r] < 0) {
        value[idx[r]] = 0;
        free[idx[r]] = false;
        negative = true;
      }
    }
    if (negative) continue;
    for (size_t j = 0; j < fit.size(); ++j) {
      const auto x = terms(*fit[j]);
      double pred = 0;
      for (size_t i = 0; i < kTerms; ++i) pred += x[i] * value[i];
      weight[j] = 1 / std::sqrt(std::max(std::abs(pred / fit[j]->measured_s - 1), kFloor));
    }
  }
  const std::string how =
      fmt::format("robust least squares on relative errors over {} measured layer passes{}{}",
                  fit.size(), leave_out.empty() ? "" : " (all models but " + leave_out + ")",
                  origin.empty() ? "" : " of " + origin);
  LayerRefinement r;
  r.scale = {value[0], how};
  r.first_forward_s = {value[1], how};
  r.first_backward_s = {value[2], how};
  r.last_forward_s = {value[3], how};
  r.last_backward_s = {value[4], how};
  return r;
}

OpValidation validate_op_model(const std::vector<Profile>& measured, const OpParams& p,
                               const std::vector<std::string>& origins) {
  OpValidation v;
  for (size_t i = 0; i < measured.size(); ++i) {
    const std::string origin = i < origins.size() ? origins[i] : measured[i].model;
    if (measured[i].device != measured.front().device) {
      throw InputError(fmt::format("{}: device: {}, the first profile's is {}", origin,
                                   measured[i].device, measured.front().device));
    }
    add_profile_tasks(measured[i], origin, p, v.tasks);
  }
  std::set<std::string> models;
  for (const auto& t : v.tasks) models.insert(t.model);
  for (const auto& m : models) {
    ModelResult r;
    r.model = m;
    if (models.size() > 1) r.refinement = fit_refinement(v.tasks, m);
    std::vector<const OpTask*> mine;
    for (auto& t : v.tasks) {
      if (t.model != m) continue;
      t.held_s = models.size() > 1 ? refined(t, r.refinement) : t.predicted_s;
      mine.push_back(&t);
    }
    r.raw = summary_of(mine, false);
    r.held = summary_of(mine, true);
    v.models.push_back(r);
  }
  std::vector<const OpTask*> all;
  for (const auto& t : v.tasks) all.push_back(&t);
  v.raw = summary_of(all, false);
  v.held = summary_of(all, true);
  v.all = fit_refinement(v.tasks);
  return v;
}

Json op_validation_json(const OpValidation& v) {
  auto summary = [](const ErrorSummary& s) {
    return Json{
        {"tasks", s.count}, {"median", s.median}, {"worst", s.worst}, {"worst_task", s.worst_task}};
  };
  auto scales = [](const LayerRefinement& r) {
    return Json{{"scale", r.scale.value},
                {"first_forward_s", r.first_forward_s.value},
                {"first_backward_s", r.first_backward_s.value},
                {"last_forward_s", r.last_forward_s.value},
                {"last_backward_s", r.last_backward_s.value}};
  };
  Json models = Json::array();
  for (const auto& m : v.models) {
    models.push_back({{"model", m.model},
                      {"microbench_only", summary(m.raw)},
                      {"held_out", summary(m.held)},
                      {"refinement_from_other_models", scales(m.refinement)}});
  }
  Json tasks = Json::array();
  for (const auto& t : v.tasks) {
    tasks.push_back({{"model", t.model},
                     {"layer", t.layer},
                     {"micro_batch", t.micro_batch},
                     {"pass", t.backward ? "bwd" : "fwd"},
                     {"measured_s", t.measured_s},
                     {"predicted_s", t.predicted_s},
                     {"held_s", t.held_s},
                     {"parts_s", {t.host_s, t.gemm_s, t.conv_s, t.elt_s}}});
  }
  return {{"microbench_only", summary(v.raw)},
          {"leave_one_model_out", summary(v.held)},
          {"models", models},
          {"refinement_all_models", scales(v.all)},
          {"tasks", tasks}};
}

}  // namespace pipetwin::zoo
