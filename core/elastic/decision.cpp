#include "core/elastic/decision.hpp"

#include <algorithm>
#include <cmath>

#include "core/cost_model.hpp"

namespace pipetwin::elastic {

Plan state_plan(const Plan& base, const PipelineState& s, int batch_per_replica,
                double lambda_frozen) {
  Plan p = base;
  p.partitioner = "autopipe";
  p.stages.clear();
  for (size_t k = 0; k < s.stages.size(); ++k)
    p.stages.push_back({s.stages[k], static_cast<int>(k)});
  p.dp = s.dp;
  p.batch_size = s.dp * batch_per_replica;
  p.chunks = s.chunks;
  p.frozen_layers = s.frozen_profile;
  p.lambda_frozen = lambda_frozen;
  p.cache = s.cache;
  p.placement.clear();
  const Cluster& c = p.cluster;
  const int per_node = s.dp / c.nodes;
  if (s.dp % c.nodes == 0 && per_node * s.K <= c.devices_per_node) {
    for (int n = 0; n < c.nodes; ++n) {
      for (int j = 0; j < per_node; ++j) {
        for (int k = 0; k < s.K; ++k) p.placement.push_back(n * c.devices_per_node + j * s.K + k);
      }
    }
  }
  return p;
}

Profile outside_pipe(const Profile& profile, int frozen_profile) {
  Profile p = profile;
  for (int l = 0; l < frozen_profile; ++l) {
    for (auto& t : p.layers[static_cast<size_t>(l)].timings) t.forward_s = t.recompute_s = 0;
  }
  return p;
}

double boundary_bytes(const Profile& profile, int frozen_profile) {
  double bytes = 0;
  for (const auto& e : profile.effective_edges()) {
    if (e.from < frozen_profile && e.to >= frozen_profile) bytes += e.bytes_per_sample;
  }
  return bytes;
}

CacheCosts resolved_costs(const CacheCosts& costs, const Cluster& cluster) {
  CacheCosts c = costs;
  if (c.host_bandwidth <= 0) c.host_bandwidth = cluster.intra_node.bandwidth;
  if (c.disk_bandwidth <= 0) c.disk_bandwidth = 2e9;
  return c;
}

bool cache_on(const Plan& base, int frozen_profile, const CacheInputs& in) {
  const Cluster& c = base.cluster;
  const double bytes = boundary_bytes(base.profile, frozen_profile);
  const double node_samples = std::ceil(static_cast<double>(in.samples) / c.nodes);
  const double budget = in.config.memory_budget_bytes;
  const double spilled = bytes > 0 && node_samples > 0 && std::isfinite(budget)
                             ? std::max(0.0, 1.0 - budget / (node_samples * bytes))
                             : 0.0;
  CostOptions o;
  o.compute_scale = base.compute_scale;
  const CostModel cost(base.profile, c, o);
  double forward = 0;
  for (int l = 0; l < frozen_profile; ++l) forward += cost.forward_s(l, in.batch);
  return cache_pays_off(forward / in.batch,
                        cache_read_s(bytes, spilled, resolved_costs(in.costs, c)));
}

}  // namespace pipetwin::elastic
