#include "core/elastic/autopipe.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

int compressed_length(const SubLayers& sub, int K, double initial_memory, double lambda_frozen) {
  const double frozen_weight = lambda_frozen * sub.frozen_size;  // line 28
  while (K > 1) {
    if (sub.sizes.size() < static_cast<size_t>(K)) {  // cannot fill K partitions any more
      K /= 2;
      continue;
    }
    const Balance half = load_balance(sub.sizes, K / 2, frozen_weight);  // line 27
    if (!(half.max_size() <= initial_memory)) break;                     // lines 29-30, Equation 2
    K /= 2;                                                              // line 31: "K = K/2"
  }
  return K;
}

std::vector<int> chunk_candidates(int K, int batch) {
  std::vector<int> out;
  for (int m = std::max(1, K); m <= 6 * K && m <= batch; ++m) {
    if (batch % m == 0) out.push_back(m);
  }
  if (out.empty()) {
    for (int m = std::min(batch, 6 * K); m >= 1; --m) {
      if (batch % m == 0) return {m};
    }
  }
  return out;
}

int choose_chunks(int K, int batch, const std::function<double(int)>& cost) {
  if (K < 1 || batch < 1) {
    throw InputError(
        fmt::format("autopipe: chunks need K >= 1 and batch >= 1 ({}, {} given)", K, batch));
  }
  int best = 0;
  double best_cost = 0;
  for (int m : chunk_candidates(K, batch)) {
    const double c = cost(m);
    if (best == 0 || c < best_cost) {
      best = m;
      best_cost = c;
    }
  }
  return best;
}

AutoPipe::AutoPipe(const Profile& profile, int initial_K, double lambda_frozen)
    : sizes_(layer_sizes(profile)),
      tl_(TransformerLayers::from_profile(profile)),
      lambda_(lambda_frozen) {
  if (initial_K < 1)
    throw InputError(fmt::format("autopipe: stages must be positive ({} < 1)", initial_K));
  if (lambda_frozen < 0 || lambda_frozen > 1) {
    throw InputError(
        fmt::format("autopipe: lambda_frozen must be in [0, 1] ({} given)", lambda_frozen));
  }
  layout_ = layout_pipeline(m_partition(sizes_, 0), initial_K, lambda_);
  initial_memory_ = layout_.memory();
}

SubLayers AutoPipe::active(int frozen) const {
  SubLayers sub = m_partition(sizes_, tl_.frozen_profile_layers(frozen));
  if (sub.layers.empty()) {
    throw InputError(fmt::format("autopipe: all {} layers frozen; a pipeline needs an active layer",
                                 tl_.layers()));
  }
  return sub;
}

const PipelineLayout& AutoPipe::on_freeze(int frozen) {
  const SubLayers sub = active(frozen);
  const int K = compressed_length(sub, layout_.K, initial_memory_, lambda_);
  layout_ = layout_pipeline(sub, K, lambda_);
  return layout_;
}

PipelineLayout AutoPipe::layout_for(int frozen, int K) const {
  if (K < 1) throw InputError(fmt::format("autopipe: stages must be positive ({} < 1)", K));
  return layout_pipeline(active(frozen), K, lambda_);
}

const PipelineLayout& AutoPipe::restore(int frozen, int K) {
  layout_ = layout_for(frozen, K);
  return layout_;
}

}  // namespace pipetwin::elastic
