// The tensor-parallel terms of the cost model (core/cost_model.hpp, "tensor parallel").
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/collective.hpp"
#include "core/cost_model.hpp"
#include "core/error.hpp"

namespace pipetwin {

double CostModel::tp_collective_s(CollectiveKind kind, double bytes) const {
  if (tp_group_.size() < 2 || bytes <= 0) return 0;
  const double all_reduce =
      allreduce_cost(cluster_, links_, bytes, tp_group_).seconds * comm_scale_;
  return kind == CollectiveKind::kAllReduce ? all_reduce : all_reduce / 2;
}

void CostModel::fit_tensor_parallel() {
  const int t = profile_.tensor_parallel.size;
  if (t < 2) return;
  tp_group_ = options_.tp_group;
  if (tp_group_.empty()) {
    tp_group_.resize(static_cast<size_t>(t));
    std::iota(tp_group_.begin(), tp_group_.end(), 0);
  }
  if (static_cast<int>(tp_group_.size()) != t) {
    throw InputError(fmt::format("tensor-parallel group of {} devices for a profile of t = {}",
                                 tp_group_.size(), t));
  }
  for (int d : tp_group_) {
    if (d < 0 || d >= cluster_.num_devices()) {
      throw InputError(fmt::format("tensor-parallel group: device {} not in cluster \"{}\" (0..{})",
                                   d, cluster_.name, cluster_.num_devices() - 1));
    }
  }
  // Each collective is latency plus bytes over a rate, bytes proportional to the micro-batch:
  // two micro-batch sizes give the line exactly.
  auto line = [this](const std::vector<TpCollective>& list) {
    auto at = [&](double b) {
      double s = 0;
      for (const auto& c : list) s += tp_collective_s(c.kind, c.bytes_per_sample * b);
      return s;
    };
    LinearFit fit;
    fit.c = at(2) - at(1);
    fit.a = at(1) - fit.c;
    return fit;
  };
  for (const auto& layer : profile_.layers) {
    tp_forward_.push_back(line(layer.tp_forward));
    tp_backward_.push_back(line(layer.tp_backward));
  }
}

double CostModel::tp_forward_s(int layer, double b) const {
  return tp_forward_.empty() ? 0 : tp_forward_[static_cast<size_t>(layer)](b);
}

double CostModel::tp_backward_s(int layer, double b) const {
  if (tp_backward_.empty()) return 0;
  const double comm = tp_backward_[static_cast<size_t>(layer)](b);
  const double overlap = 0.5 * std::max(0.0, fits(layer).backward_weight(b) * scale_);
  return std::max(0.0, comm - overlap);
}

}  // namespace pipetwin
