#include "core/partition/autopipe_balance.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"

namespace pipetwin::elastic {

namespace {

double bytes_per_parameter(const std::string& dtype) {
  return dtype_bytes(dtype, "AutoPipe: profile dtype");
}

// np.var (population variance) of v[from:].
double tail_variance(const std::vector<double>& v, size_t from) {
  const size_t n = v.size() - from;
  if (n == 0) return 0;
  double mean = 0;
  for (size_t i = from; i < v.size(); ++i) mean += v[i];
  mean /= static_cast<double>(n);
  double var = 0;
  for (size_t i = from; i < v.size(); ++i) var += (v[i] - mean) * (v[i] - mean);
  return var / static_cast<double>(n);
}

}  // namespace

double parameter_millions(const Profile& profile, int layer) {
  return profile.layers[static_cast<size_t>(layer)].param_bytes /
         bytes_per_parameter(profile.dtype) / 1e6;
}

std::vector<double> layer_sizes(const Profile& profile) {
  std::vector<double> out;
  for (int l = 0; l < profile.num_layers(); ++l) out.push_back(parameter_millions(profile, l));
  return out;
}

SubLayers m_partition(const std::vector<double>& layer_sizes, int frozen_profile_layers) {
  const int L = static_cast<int>(layer_sizes.size());
  if (frozen_profile_layers < 0 || frozen_profile_layers > L) {
    throw InputError(fmt::format("autopipe: frozen layers must be in 0..{} ({} given)", L,
                                 frozen_profile_layers));
  }
  SubLayers s;
  s.frozen_layers = frozen_profile_layers;
  for (int l = 0; l < L; ++l) {
    const double size = layer_sizes[static_cast<size_t>(l)];
    if (l < frozen_profile_layers) {
      s.frozen_size += size;
    } else {
      s.layers.push_back(l);
      s.sizes.push_back(size);
    }
  }
  return s;
}

double Balance::max_size() const {
  return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
}

Balance load_balance(const std::vector<double>& S_pipe, int K, double frozen_weight) {
  const size_t n = S_pipe.size();
  if (K < 1) throw InputError(fmt::format("autopipe: partitions must be positive ({} < 1)", K));
  if (n < static_cast<size_t>(K)) {
    throw InputError(fmt::format("autopipe: {} active sub-layers cannot fill {} partitions", n, K));
  }
  // Line 12: "B_L = dict(), B_S = dict()"; F_frozen preassigned to partition 0 at lambda_frozen.
  Balance b;
  b.layers.assign(static_cast<size_t>(K), 0);
  b.sizes.assign(static_cast<size_t>(K), 0.0);
  b.sizes[0] = frozen_weight;
  // Line 13: "L_assigned = 0; S_total = sum(S_pipe)".
  size_t assigned = 0;
  double S_total = std::accumulate(S_pipe.begin(), S_pipe.end(), 0.0) + frozen_weight;
  for (int k = 0; k < K; ++k) {  // line 14: "for partition index = k to K"
    const auto ku = static_cast<size_t>(k);
    const double mean = S_total / (K - k);                         // line 15
    const double var = tail_variance(S_pipe, assigned) / (K - k);  // line 16
    const size_t keep = static_cast<size_t>(K - 1 - k);  // one sub-layer per later partition
    for (size_t i = assigned; i + keep < n; ++i) {       // line 17
      const double criterion = b.sizes[ku] + S_pipe[i];  // lines 18-19
      const bool last = k == K - 1;
      // Line 20: "if criterion < mean + var" (<=, see the header), else line 23: "break".
      if (!last && b.layers[ku] > 0 && !(criterion <= (mean + var) * (1 + 1e-12))) break;
      // Line 21: "B_S += S_k; B_L += 1; L_assigned += 1; S_total -= S_k".
      b.sizes[ku] = criterion;
      b.layers[ku] += 1;
      S_total -= S_pipe[i];
      ++assigned;
    }
    if (k == 0) S_total -= frozen_weight;
  }
  return b;
}

PipelineLayout layout_pipeline(const SubLayers& sub, int K, double lambda_frozen) {
  PipelineLayout p;
  p.K = K;
  p.frozen_profile_layers = sub.frozen_layers;
  p.balance = load_balance(sub.sizes, K, lambda_frozen * sub.frozen_size);
  p.stages.assign(static_cast<size_t>(K), {});
  for (int l = 0; l < sub.frozen_layers; ++l) p.stages[0].push_back(l);
  size_t next = 0;
  for (int k = 0; k < K; ++k) {
    for (int i = 0; i < p.balance.layers[static_cast<size_t>(k)]; ++i) {
      p.stages[static_cast<size_t>(k)].push_back(sub.layers[next++]);
    }
  }
  return p;
}

}  // namespace pipetwin::elastic
