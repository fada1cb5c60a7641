#include "exec/runtime/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::exec {

void LossScalerConfig::validate() const {
  if (!(init_scale > 0) || !std::isfinite(init_scale))
    throw InputError(
        fmt::format("loss scaler: init_scale must be positive ({} given)", init_scale));
  if (!(growth_factor > 1))
    throw InputError(
        fmt::format("loss scaler: growth_factor must exceed 1 ({} given)", growth_factor));
  if (!(backoff_factor > 0 && backoff_factor < 1))
    throw InputError(
        fmt::format("loss scaler: backoff_factor must be in (0, 1) ({} given)", backoff_factor));
  if (growth_interval < 1)
    throw InputError(
        fmt::format("loss scaler: growth_interval must be positive ({} given)", growth_interval));
}

LossScaler::LossScaler(LossScalerConfig config) : config_(config), scale_(config.init_scale) {
  config_.validate();
}

bool LossScaler::unscale(const std::vector<at::Tensor>& grads) const {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> gs;
  for (const auto& g : grads) {
    if (g.defined()) gs.push_back(g);
  }
  if (gs.empty()) return false;
  const at::Tensor& first = gs.front();
  const bool fused = first.is_cuda() && std::all_of(gs.begin(), gs.end(), [&](const at::Tensor& g) {
                       return g.device() == first.device() && g.scalar_type() == at::kFloat;
                     });
  if (fused) {
    // GradScaler's kernel: unscales every gradient and sets found_inf, in one launch.
    const auto options = first.options().dtype(at::kFloat);
    at::Tensor found_inf = at::zeros({1}, options);
    at::_amp_foreach_non_finite_check_and_unscale_(gs, found_inf,
                                                   at::full({1}, 1.0 / scale_, options));
    return found_inf.item<float>() != 0;
  }
  at::_foreach_mul_(gs, 1.0 / scale_);
  std::vector<at::Tensor> finite;
  for (const auto& g : gs) finite.push_back(at::isfinite(g).all());
  return !at::stack(finite).all().item<bool>();  // one read of the device
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= config_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == config_.growth_interval) {
    scale_ *= config_.growth_factor;
    growth_tracker_ = 0;
  }
}

void LossScaler::restore(double scale, int growth_tracker) {
  if (!(scale > 0) || !std::isfinite(scale) || growth_tracker < 0 ||
      growth_tracker >= config_.growth_interval) {
    throw InputError(fmt::format("loss scaler: state scale {} growth tracker {} is out of range",
                                 scale, growth_tracker));
  }
  scale_ = scale;
  growth_tracker_ = growth_tracker;
}

OverflowVote::OverflowVote(int voters, const AbortSignal& abort) : voters_(voters), abort_(abort) {}

bool OverflowVote::vote(int64_t step, bool found_inf) {
  std::unique_lock<std::mutex> lock(mu_);
  Round& r = rounds_[step];
  r.found_inf = r.found_inf || found_inf;
  if (++r.votes == voters_) cv_.notify_all();
  abort_.wait(
      cv_, lock, [&] { return rounds_[step].votes >= voters_; },
      fmt::format("the other stages' overflow votes of step {}", step));
  Round& done = rounds_[step];
  const bool result = done.found_inf;
  if (++done.read == voters_) rounds_.erase(step);
  return result;
}

}  // namespace pipetwin::exec
