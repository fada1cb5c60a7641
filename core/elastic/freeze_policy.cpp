#include "core/elastic/freeze_policy.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

const char* freeze_unit_name(FreezeUnit u) {
  return u == FreezeUnit::kEpoch ? "epoch" : "step";
}

FreezeUnit parse_freeze_unit(const std::string& text, const std::string& origin) {
  if (text == "epoch" || text == "epochs") return FreezeUnit::kEpoch;
  if (text == "step" || text == "steps") return FreezeUnit::kStep;
  throw InputError(fmt::format("{}: expected \"epoch\" or \"step\", got \"{}\"", origin, text));
}

void FreezeConfig::validate(const std::string& origin) const {
  if (layers < 1) {
    throw InputError(fmt::format("{}: layers must be positive ({} given)", origin, layers));
  }
  if (!(alpha > 0 && alpha < 1)) {
    throw InputError(fmt::format("{}: alpha must be in (0, 1) ({} given)", origin, alpha));
  }
  if (interval < 1) {
    throw InputError(
        fmt::format("{}: freeze interval must be positive ({} given)", origin, interval));
  }
}

double alpha_bound(int layers, double alpha, int T) {
  return layers * (1.0 - std::pow(1.0 - alpha, T));
}

double alpha_bound_as_printed(int layers, double alpha, int T) {
  if (T <= 0) return 0;
  const double aL = alpha * layers;
  double bracket = aL / (1.0 - alpha);
  for (int t = 2; t <= T; ++t) bracket += aL / std::pow(1.0 - alpha, t);
  return std::pow(1.0 - alpha, T) * bracket;
}

int bound_frozen_layers(int layers, double alpha, int T) {
  return static_cast<int>(std::floor(alpha_bound(layers, alpha, T) + 1e-9));
}

double equation1(double previous, int layers, double alpha, int argmin) {
  const double bound = previous + alpha * (layers - previous);
  return argmin < 0 ? bound : std::min(bound, static_cast<double>(argmin));
}

GradNormAccumulator::GradNormAccumulator(int layers) : sum_(static_cast<size_t>(layers), 0.0) {}

void GradNormAccumulator::add(const std::vector<double>& norms) {
  if (norms.size() != sum_.size()) {
    throw InputError(
        fmt::format("gradient norms: {} values for {} layers", norms.size(), sum_.size()));
  }
  for (size_t i = 0; i < norms.size(); ++i) {
    if (!std::isfinite(norms[i]) || norms[i] < 0) {
      throw InputError(
          fmt::format("gradient norms: layer {}: expected a finite non-negative norm, "
                      "got {}",
                      i, norms[i]));
    }
  }
  for (size_t i = 0; i < norms.size(); ++i) sum_[i] += norms[i];
  ++steps_;
}

std::vector<double> GradNormAccumulator::mean() const {
  if (steps_ == 0) return {};
  std::vector<double> out(sum_);
  for (double& v : out) v /= steps_;
  return out;
}

void GradNormAccumulator::reset() {
  std::fill(sum_.begin(), sum_.end(), 0.0);
  steps_ = 0;
}

int argmin_count(const std::vector<double>& norms, int first_active) {
  const int L = static_cast<int>(norms.size());
  if (norms.empty() || first_active >= L) return -1;
  int best = first_active;
  for (int l = first_active + 1; l < L; ++l) {
    if (norms[static_cast<size_t>(l)] < norms[static_cast<size_t>(best)]) best = l;
  }
  return best + 1;
}

FreezePolicy::FreezePolicy(FreezeConfig config) : config_(config), accumulator_(config.layers) {
  config_.validate("freeze policy");
}

bool FreezePolicy::due_at_epoch(int epoch) const {
  return config_.unit == FreezeUnit::kEpoch && epoch > 0 && epoch % config_.interval == 0;
}

bool FreezePolicy::due_after_step(long step) const {
  return config_.unit == FreezeUnit::kStep && step > 0 && step % config_.interval == 0;
}

int FreezePolicy::freeze_step() {
  const int argmin = argmin_count(accumulator_.mean(), frozen_);
  real_ = equation1(real_, config_.layers, config_.alpha, argmin);
  frozen_ = std::max(frozen_, static_cast<int>(std::floor(real_ + 1e-9)));
  accumulator_.reset();
  ++T_;
  return frozen_;
}

}  // namespace pipetwin::elastic
