#include "core/elastic/autopipe.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

namespace {

double bytes_per_parameter(const std::string& dtype) {
  if (dtype == "float16" || dtype == "bfloat16") return 2;
  if (dtype == "float64") return 8;
  if (dtype == "int8" || dtype == "float8") return 1;
  return 4;
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

const PipelineLayout& AutoPipe::on_freeze(int frozen) {
  const SubLayers sub = m_partition(sizes_, tl_.frozen_profile_layers(frozen));
  if (sub.layers.empty()) {
    throw InputError(fmt::format("autopipe: all {} layers frozen; a pipeline needs an active layer",
                                 tl_.layers()));
  }
  const int K = compressed_length(sub, layout_.K, initial_memory_, lambda_);
  layout_ = layout_pipeline(sub, K, lambda_);
  return layout_;
}

}  // namespace pipetwin::elastic
