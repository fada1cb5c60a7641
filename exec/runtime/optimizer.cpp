#include "exec/runtime/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "models/torch_compat.hpp"

namespace pipetwin::exec {

double OptimizerConfig::state_ratio() const {
  if (kind == "adam") return 2;
  return momentum != 0 ? 1 : 0;
}

void OptimizerConfig::validate() const {
  if (kind != "sgd" && kind != "adam") {
    throw InputError(fmt::format("--optimizer: expected sgd or adam, got \"{}\"", kind));
  }
  if (!(lr > 0)) throw InputError(fmt::format("--lr must be positive ({} given)", lr));
  if (momentum < 0 || momentum >= 1)
    throw InputError(fmt::format("--momentum must be in [0, 1) ({} given)", momentum));
  if (weight_decay < 0)
    throw InputError(fmt::format("--weight-decay must not be negative ({} given)", weight_decay));
}

void Optimizer::step(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                     const std::vector<at::Tensor>& out) {
  ++steps_;
  at::NoGradGuard no_grad;
  // The update is computed in place on `out`: a stash's new version starts as a copy.
  for (size_t i = 0; i < params.size(); ++i) {
    if (!out[i].is_same(params[i])) {
      at::Tensor dst = out[i];  // a handle: the storage is shared
      dst.copy_(params[i]);
    }
  }
  const size_t f = std::min(frozen_, params.size());
  if (f == params.size()) return;
  std::vector<at::Tensor> p(out.begin() + static_cast<std::ptrdiff_t>(f), out.end());
  std::vector<at::Tensor> g;
  for (size_t i = f; i < params.size(); ++i)
    g.push_back(grads[i].defined() ? grads[i] : at::zeros_like(params[i]));
  if (config_.kind == "sgd") {
    sgd_step(p, g, f);
  } else {
    adam_step(p, g, f);
  }
}

namespace {

// Whether the fused kernels take these tensors: all on one GPU (torch_compat.hpp).
bool fusable(const std::vector<at::Tensor>& p) {
  if (!models::kHasFusedOptimizers || p.empty() || !p.front().is_cuda()) return false;
  return std::all_of(p.begin(), p.end(), [&](const at::Tensor& t) {
    return t.device() == p.front().device() && t.scalar_type() == p.front().scalar_type();
  });
}

std::vector<at::Tensor> tail(std::vector<at::Tensor>& all, size_t from) {
  return {all.begin() + static_cast<std::ptrdiff_t>(from), all.end()};
}

}  // namespace

void Optimizer::sgd_step(const std::vector<at::Tensor>& p, std::vector<at::Tensor> g, size_t f) {
  const auto& c = config_;
  const size_t n = f + p.size();
  const bool momentum = c.momentum != 0;
  if (momentum && buf_.size() < n) buf_.resize(n);
  const auto defined = [](const at::Tensor& t) { return t.defined(); };
  const auto from = buf_.begin() + static_cast<std::ptrdiff_t>(std::min(f, buf_.size()));
  const bool first = momentum && std::none_of(from, buf_.end(), defined);
  const bool all = momentum && std::all_of(from, buf_.end(), defined);
  if (fusable(p) && (first || all || !momentum)) {
    if (first) {
      for (size_t i = 0; i < p.size(); ++i) buf_[f + i] = at::empty_like(p[i]);
    }
    const std::vector<at::Tensor> bufs = momentum ? tail(buf_, f) : std::vector<at::Tensor>{};
    models::fused_sgd(p, g, bufs, c.weight_decay, c.momentum, c.lr, first);
    return;
  }
  // torch.optim.SGD's foreach path (_multi_tensor_sgd).
  if (c.weight_decay != 0) g = at::_foreach_add(g, p, c.weight_decay);
  if (momentum) {
    if (all) {
      const std::vector<at::Tensor> bufs = tail(buf_, f);
      at::_foreach_mul_(bufs, c.momentum);
      at::_foreach_add_(bufs, g);
    } else {
      // torch.optim.SGD: the first step's buffer is the gradient itself; dampening 0.
      for (size_t i = 0; i < p.size(); ++i) {
        at::Tensor& b = buf_[f + i];
        b = b.defined() ? b.mul_(c.momentum).add_(g[i]) : g[i].clone();
      }
    }
    g = tail(buf_, f);
  }
  at::_foreach_add_(p, g, -c.lr);  // param.add_(grad, alpha=-lr)
}

void Optimizer::adam_step(const std::vector<at::Tensor>& p, std::vector<at::Tensor> g, size_t f) {
  const auto& c = config_;
  const size_t n = f + p.size();
  if (exp_avg_.size() < n) {
    exp_avg_.resize(n);
    exp_avg_sq_.resize(n);
  }
  for (size_t i = 0; i < p.size(); ++i) {
    if (!exp_avg_[f + i].defined()) {
      exp_avg_[f + i] = at::zeros_like(p[i]);
      exp_avg_sq_[f + i] = at::zeros_like(p[i]);
    }
  }
  const std::vector<at::Tensor> m = tail(exp_avg_, f), v = tail(exp_avg_sq_, f);
  if (fusable(p)) {
    const at::Tensor count =
        at::full({}, static_cast<double>(steps_), p.front().options().dtype(at::kFloat));
    const std::vector<at::Tensor> steps(p.size(), count);
    models::fused_adam(p, g, m, v, steps, c.lr, c.beta1, c.beta2, c.weight_decay, c.eps);
    return;
  }
  // torch.optim.Adam's foreach path (_multi_tensor_adam).
  if (c.weight_decay != 0) g = at::_foreach_add(g, p, c.weight_decay);
  at::_foreach_mul_(m, c.beta1);
  at::_foreach_add_(m, g, 1 - c.beta1);
  at::_foreach_mul_(v, c.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - c.beta2);
  const double bc1 = 1 - std::pow(c.beta1, static_cast<double>(steps_));
  const double bc2 = 1 - std::pow(c.beta2, static_cast<double>(steps_));
  std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, std::sqrt(bc2));
  at::_foreach_add_(denom, c.eps);
  // param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
  at::_foreach_addcdiv_(p, m, denom, -c.lr / bc1);
}

std::vector<at::Tensor> Optimizer::state() const {
  std::vector<at::Tensor> s;
  for (const auto& t : buf_) s.push_back(t);
  for (const auto& t : exp_avg_) s.push_back(t);
  for (const auto& t : exp_avg_sq_) s.push_back(t);
  return s;
}

OptimizerState Optimizer::export_state() const {
  OptimizerState s;
  s.steps = steps_;
  s.momentum = buf_;
  s.exp_avg = exp_avg_;
  s.exp_avg_sq = exp_avg_sq_;
  return s;
}

void Optimizer::import_state(const OptimizerState& s, size_t num_params) {
  auto copy = [num_params](const std::vector<at::Tensor>& in, const char* what) {
    if (!in.empty() && in.size() != num_params) {
      throw std::invalid_argument(fmt::format("optimizer state: {} has {} tensors, expected {}",
                                              what, in.size(), num_params));
    }
    std::vector<at::Tensor> out;
    for (const auto& t : in) out.push_back(t.defined() ? t.detach().clone() : t);
    return out;
  };
  buf_ = copy(s.momentum, "momentum");
  exp_avg_ = copy(s.exp_avg, "exp_avg");
  exp_avg_sq_ = copy(s.exp_avg_sq, "exp_avg_sq");
  steps_ = s.steps;
}

}  // namespace pipetwin::exec
