#include "core/model_graph.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

ModelGraph ModelGraph::from_profile(const Profile& profile, const std::string& origin) {
  ModelGraph g;
  for (const auto& l : profile.layers) boost::add_vertex(Layer{l.name, l.kind}, g.graph_);
  const auto edges = profile.effective_edges();
  for (size_t i = 0; i < edges.size(); ++i) {
    const auto& e = edges[i];
    if (e.from < 0 || e.to < 0 || e.from >= g.num_layers() || e.to >= g.num_layers()) {
      throw InputError(fmt::format("{}: edges[{}]: layer index out of range", origin, i));
    }
    if (!std::isfinite(e.bytes_per_sample) || e.bytes_per_sample < 0) {
      throw InputError(
          fmt::format("{}: edges[{}].bytes_per_sample: unknown or negative size", origin, i));
    }
    boost::add_edge(static_cast<size_t>(e.from), static_cast<size_t>(e.to),
                    Tensor{e.bytes_per_sample}, g.graph_);
    if (e.from >= e.to) g.index_order_topological_ = false;
  }
  // Kahn's algorithm with a min-heap on the layer index: deterministic order, and a leftover
  // vertex means a cycle.
  const int n = g.num_layers();
  std::vector<int> indegree(static_cast<size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    indegree[static_cast<size_t>(v)] =
        static_cast<int>(boost::in_degree(static_cast<size_t>(v), g.graph_));
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int v = 0; v < n; ++v) {
    if (indegree[static_cast<size_t>(v)] == 0) ready.push(v);
  }
  while (!ready.empty()) {
    const int v = ready.top();
    ready.pop();
    g.topo_.push_back(v);
    for (auto [it, end] = boost::out_edges(static_cast<size_t>(v), g.graph_); it != end; ++it) {
      const auto t = boost::target(*it, g.graph_);
      if (--indegree[t] == 0) ready.push(static_cast<int>(t));
    }
  }
  if (static_cast<int>(g.topo_.size()) != n) {
    // A layer left over may merely wait on a cycle without being on it. Every leftover layer has
    // a leftover predecessor, so following predecessors n times lands on a cycle; report the
    // lowest layer of that cycle.
    auto leftover_pred = [&](int v) {
      for (auto [it, end] = boost::in_edges(static_cast<size_t>(v), g.graph_); it != end; ++it) {
        const auto u = boost::source(*it, g.graph_);
        if (indegree[u] > 0) return static_cast<int>(u);
      }
      return v;  // unreachable: a leftover layer has a leftover predecessor
    };
    int v = 0;
    while (indegree[static_cast<size_t>(v)] == 0) ++v;
    for (int i = 0; i < n; ++i) v = leftover_pred(v);
    int lowest = v;
    for (int u = leftover_pred(v); u != v; u = leftover_pred(u)) lowest = std::min(lowest, u);
    throw InputError(fmt::format("{}: edges: the graph has a cycle through layer {} (\"{}\")",
                                 origin, lowest, profile.layers[static_cast<size_t>(lowest)].name));
  }
  return g;
}

std::vector<ModelGraph::Edge> ModelGraph::edges() const {
  std::vector<Edge> out;
  for (auto [it, end] = boost::edges(graph_); it != end; ++it) {
    out.push_back({static_cast<int>(boost::source(*it, graph_)),
                   static_cast<int>(boost::target(*it, graph_)), graph_[*it].bytes_per_sample});
  }
  return out;
}

std::vector<ModelGraph::Edge> ModelGraph::in_edges(int layer) const {
  std::vector<Edge> out;
  for (auto [it, end] = boost::in_edges(static_cast<size_t>(layer), graph_); it != end; ++it) {
    out.push_back(
        {static_cast<int>(boost::source(*it, graph_)), layer, graph_[*it].bytes_per_sample});
  }
  return out;
}

std::vector<ModelGraph::Edge> ModelGraph::out_edges(int layer) const {
  std::vector<Edge> out;
  for (auto [it, end] = boost::out_edges(static_cast<size_t>(layer), graph_); it != end; ++it) {
    out.push_back(
        {layer, static_cast<int>(boost::target(*it, graph_)), graph_[*it].bytes_per_sample});
  }
  return out;
}

std::map<std::pair<int, int>, double> ModelGraph::stage_edge_bytes(
    const std::vector<int>& stage_of) const {
  std::map<std::pair<int, int>, double> tensor;  // (producer, reading stage) -> bytes
  for (const auto& e : edges()) {
    const int a = stage_of.at(static_cast<size_t>(e.from)),
              b = stage_of.at(static_cast<size_t>(e.to));
    if (a == b) continue;
    double& bytes = tensor[{e.from, b}];
    bytes = std::max(bytes, e.bytes_per_sample);
  }
  std::map<std::pair<int, int>, double> out;
  for (const auto& [key, bytes] : tensor)
    out[{stage_of.at(static_cast<size_t>(key.first)), key.second}] += bytes;
  return out;
}

}  // namespace pipetwin
