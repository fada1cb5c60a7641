#include "sim/network/max_min.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace pipetwin::sim::network {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Links whose fair share is within this relative margin of the smallest fill together: rounding
// must not leave a link with a residual of 1e-9 of its capacity that freezes nothing.
constexpr double kTie = 1e-12;

}  // namespace

void FlowPaths::add(const std::vector<int32_t>& links) {
  path_links.insert(path_links.end(), links.begin(), links.end());
  path_begin.push_back(static_cast<int32_t>(path_links.size()));
}

void MaxMinSolver::solve(const std::vector<double>& capacity, const FlowPaths& flows,
                         std::vector<double>& rate, const std::vector<uint8_t>* active) {
  const auto n = static_cast<size_t>(flows.num_flows());
  const size_t links = capacity.size();
  rate.assign(n, 0.0);
  residual_.assign(capacity.begin(), capacity.end());
  crossing_.assign(links, 0);
  frozen_.assign(n, 0);
  size_t left = 0;
  for (size_t f = 0; f < n; ++f) {
    if (active != nullptr && !(*active)[f]) {
      frozen_[f] = 1;
      continue;
    }
    if (flows.path_begin[f] == flows.path_begin[f + 1]) {
      rate[f] = kInf;
      frozen_[f] = 1;
      continue;
    }
    for (int32_t k = flows.path_begin[f]; k < flows.path_begin[f + 1]; ++k) {
      const auto l = static_cast<size_t>(flows.path_links[static_cast<size_t>(k)]);
      if (l >= links)
        throw std::out_of_range(fmt::format("flow {} crosses link {} of {}", f, l, links));
      ++crossing_[l];
    }
    ++left;
  }
  // Progressive filling: raise every unfrozen flow by the smallest fair share of a link.
  while (left > 0) {
    double inc = kInf;
    for (size_t l = 0; l < links; ++l) {
      if (crossing_[l] > 0) inc = std::min(inc, std::max(0.0, residual_[l]) / crossing_[l]);
    }
    full_.assign(links, 0);
    for (size_t l = 0; l < links; ++l) {
      if (crossing_[l] == 0) continue;
      full_[l] = std::max(0.0, residual_[l]) / crossing_[l] <= inc * (1 + kTie);
      residual_[l] -= inc * crossing_[l];
    }
    for (size_t f = 0; f < n; ++f) {
      if (frozen_[f]) continue;
      rate[f] += inc;
      bool bottlenecked = false;
      for (int32_t k = flows.path_begin[f]; k < flows.path_begin[f + 1]; ++k) {
        bottlenecked =
            bottlenecked || full_[static_cast<size_t>(flows.path_links[static_cast<size_t>(k)])];
      }
      if (!bottlenecked) continue;
      frozen_[f] = 1;
      --left;
      for (int32_t k = flows.path_begin[f]; k < flows.path_begin[f + 1]; ++k) {
        --crossing_[static_cast<size_t>(flows.path_links[static_cast<size_t>(k)])];
      }
    }
  }
}

std::vector<double> max_min_rates(const std::vector<double>& capacity, const FlowPaths& flows) {
  MaxMinSolver solver;
  std::vector<double> rate;
  solver.solve(capacity, flows, rate);
  return rate;
}

}  // namespace pipetwin::sim::network
