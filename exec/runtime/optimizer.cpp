#include "exec/runtime/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "core/error.hpp"

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
  const auto& c = config_;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < std::min(frozen_, params.size()); ++i) {
    if (!out[i].is_same(params[i])) {
      at::Tensor dst = out[i];
      dst.copy_(params[i]);
    }
  }
  for (size_t i = frozen_; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    at::Tensor g = grads[i].defined() ? grads[i] : at::zeros_like(p);
    if (c.weight_decay != 0) g = g + c.weight_decay * p;
    if (c.kind == "sgd") {
      if (c.momentum != 0) {
        if (buf_.size() <= i) buf_.resize(params.size());
        // torch.optim.SGD: the first step's buffer is the gradient itself; dampening 0.
        buf_[i] = buf_[i].defined() ? buf_[i].mul_(c.momentum).add_(g) : g.clone();
        g = buf_[i];
      }
      // torch.optim.SGD: param.add_(grad, alpha=-lr); out of place when `out` is another version.
      if (out[i].is_same(p)) {
        out[i].add_(g, -c.lr);
      } else {
        at::Tensor dst = out[i];  // a handle: the storage is shared
        at::add_out(dst, p, g, -c.lr);
      }
    } else {
      if (exp_avg_.size() <= i) {
        exp_avg_.resize(params.size());
        exp_avg_sq_.resize(params.size());
      }
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = at::zeros_like(p);
        exp_avg_sq_[i] = at::zeros_like(p);
      }
      exp_avg_[i].mul_(c.beta1).add_(g, 1 - c.beta1);
      exp_avg_sq_[i].mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
      const double bc1 = 1 - std::pow(c.beta1, static_cast<double>(steps_));
      const double bc2 = 1 - std::pow(c.beta2, static_cast<double>(steps_));
      const at::Tensor denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bc2)).add_(c.eps);
      // torch.optim.Adam: param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1).
      if (out[i].is_same(p)) {
        out[i].addcdiv_(exp_avg_[i], denom, -c.lr / bc1);
      } else {
        at::Tensor dst = out[i];
        at::addcdiv_out(dst, p, exp_avg_[i], denom, -c.lr / bc1);
      }
    }
  }
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
