// AutoPipe's balanced partition: PipeTransformer Section 3.2.1, Algorithm 1's m_partition and
// load_balance (lines 3-24), the partitioning half of AutoPipe. core/elastic/autopipe.hpp holds
// the elastic half (compression, chunk choice, freeze notifications) and the reading of the
// paper's pseudo-code both halves follow; `autopipe` (core/partition/autopipe.cpp) is this
// partition behind the partitioner interface.
//
// Thread-safety: pure functions and value types.
#pragma once

#include <vector>

#include "core/profile.hpp"

namespace pipetwin::elastic {

// m_size: a profile layer's parameters in millions; all layers of a profile.
double parameter_millions(const Profile& profile, int layer);
std::vector<double> layer_sizes(const Profile& profile);

// m_partition over per-profile-layer sizes: F_frozen = layers [0, frozen_profile_layers);
// F_pipe = the rest, one sub-layer each.
struct SubLayers {
  int frozen_layers = 0;
  double frozen_size = 0;     // S_frozen
  std::vector<int> layers;    // profile layer of each F_pipe sub-layer
  std::vector<double> sizes;  // S_pipe
};
SubLayers m_partition(const std::vector<double>& layer_sizes, int frozen_profile_layers);

// load_balance: B_L (sub-layers per partition) and B_S (size per partition; partition 0
// includes `frozen_weight` = lambda_frozen * S_frozen). Throws InputError when there are fewer
// sub-layers than partitions.
struct Balance {
  std::vector<int> layers;
  std::vector<double> sizes;
  double max_size() const;
};
Balance load_balance(const std::vector<double>& sizes, int K, double frozen_weight = 0);

// One pipeline layout: K partitions; stage 0 holds F_frozen and the first partition.
struct PipelineLayout {
  int K = 1;
  int frozen_profile_layers = 0;
  Balance balance;
  std::vector<std::vector<int>> stages;                 // profile layers per stage, in model order
  double memory() const { return balance.max_size(); }  // M_GPU(T), Equation 2
};
PipelineLayout layout_pipeline(const SubLayers& sub, int K, double lambda_frozen);

}  // namespace pipetwin::elastic
