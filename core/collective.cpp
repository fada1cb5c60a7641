#include "core/collective.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/cluster.hpp"
#include "core/routes.hpp"

namespace pipetwin {

double ring_allreduce_s(double n, double bytes, double bandwidth, double latency) {
  if (n < 2) return 0;
  return 2 * (n - 1) / n * bytes / bandwidth + 2 * (n - 1) * latency;
}

double tree_allreduce_s(int n, double bytes, double bandwidth, double latency) {
  if (n < 2) return 0;
  const double depth = std::ceil(std::log2(static_cast<double>(n)));
  return 2 * bytes / bandwidth + 2 * depth * latency;
}

double hierarchical_allreduce_s(int nodes, int per_node, double bytes, double intra_bandwidth,
                                double intra_latency, double inter_bandwidth,
                                double inter_latency) {
  const double m = per_node, n = nodes;
  const double scatter =
      m > 1 ? (m - 1) / m * bytes / intra_bandwidth + (m - 1) * intra_latency : 0;
  return 2 * scatter + ring_allreduce_s(n, bytes / m, inter_bandwidth, inter_latency);
}

const char* algorithm_name(AllReduceAlgorithm a) {
  constexpr std::pair<AllReduceAlgorithm, const char*> kNames[] = {
      {AllReduceAlgorithm::kRing, "ring"},
      {AllReduceAlgorithm::kTree, "tree"},
      {AllReduceAlgorithm::kHierarchical, "hierarchical"}};
  for (const auto& [algorithm, name] : kNames) {
    if (algorithm == a) return name;
  }
  return "?";
}

namespace {

// Without a topology: the ring over its slowest link, the largest latency of its links.
AllReduceCost flat_ring(const Cluster& c, double bytes, const std::vector<int>& devices) {
  const auto n = static_cast<double>(devices.size());
  double bw = 0, latency = 0;
  bool first = true;
  for (size_t i = 0; i < devices.size(); ++i) {
    const LinkSpec& l = c.link(devices[i], devices[(i + 1) % devices.size()]);
    if (first || l.bandwidth < bw) bw = l.bandwidth;
    latency = std::max(latency, l.latency);
    first = false;
  }
  return {AllReduceAlgorithm::kRing, ring_allreduce_s(n, bytes, bw, latency),
          2 * (n - 1) * latency};
}

// The slowest rate and the largest latency of messages that all go at once.
struct Step {
  double rate = 0, latency = 0;
};
Step step(const Cluster& c, const std::vector<double>& cap,
          const std::vector<std::pair<int, int>>& msgs) {
  std::vector<Route> routes;
  Step s;
  for (const auto& [a, b] : msgs) {
    routes.push_back(route(c, a, b));
    s.latency = std::max(s.latency, routes.back().latency);
  }
  s.rate = slowest_rate(cap, routes);
  return s;
}

// The group's devices by node, when every node it spans holds the same number (else empty).
std::vector<std::vector<int>> by_node(const Cluster& c, const std::vector<int>& devices) {
  std::map<int, std::vector<int>> nodes;
  for (int d : devices) nodes[c.node_of(d)].push_back(d);
  std::vector<std::vector<int>> out;
  for (auto& [node, ds] : nodes) {
    if (!out.empty() && ds.size() != out.front().size()) return {};
    out.push_back(std::move(ds));
  }
  return out;
}

}  // namespace

AllReduceCost allreduce_cost(const Cluster& c, double bytes, const std::vector<int>& devices) {
  if (devices.size() < 2 || !c.topology) return allreduce_cost(c, {}, bytes, devices);
  return allreduce_cost(c, topology_links(c), bytes, devices);
}

AllReduceCost allreduce_cost(const Cluster& c, const std::vector<double>& cap, double bytes,
                             const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  if (n < 2) return {};
  const bool routed = c.topology && std::all_of(devices.begin(), devices.end(),
                                                [&](int d) { return in_cluster(c, d); });
  if (!routed) return flat_ring(c, bytes, devices);
  std::vector<std::pair<int, int>> ring;
  for (int i = 0; i < n; ++i) ring.emplace_back(devices[i], devices[(i + 1) % n]);
  const Step r = step(c, cap, ring);
  AllReduceCost best{AllReduceAlgorithm::kRing, ring_allreduce_s(n, bytes, r.rate, r.latency),
                     2 * (n - 1) * r.latency};
  // The tree at the ring's rate: an approximation, its messages go between other pairs of ranks.
  const double depth = std::ceil(std::log2(static_cast<double>(n)));
  const double tree = tree_allreduce_s(n, bytes, r.rate, r.latency);
  if (tree < best.seconds) best = {AllReduceAlgorithm::kTree, tree, 2 * depth * r.latency};
  const auto nodes = by_node(c, devices);
  if (nodes.size() < 2 || nodes.front().size() < 2) return best;
  const int m = static_cast<int>(nodes.front().size()), N = static_cast<int>(nodes.size());
  std::vector<std::pair<int, int>> intra, inter;
  for (int k = 0; k < N; ++k) {
    for (int j = 0; j < m; ++j) {
      intra.emplace_back(nodes[k][j], nodes[k][(j + 1) % m]);
      inter.emplace_back(nodes[k][j], nodes[(k + 1) % N][j]);
    }
  }
  const Step in = step(c, cap, intra), out = step(c, cap, inter);
  const double h =
      hierarchical_allreduce_s(N, m, bytes, in.rate, in.latency, out.rate, out.latency);
  if (h < best.seconds) {
    best = {AllReduceAlgorithm::kHierarchical, h,
            2 * (m - 1) * in.latency + 2 * (N - 1) * out.latency};
  }
  return best;
}

}  // namespace pipetwin
