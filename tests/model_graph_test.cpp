// core/model_graph.hpp: chains and skip connections, deterministic topological order, cycles.
#include "core/model_graph.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Layers named a, b, c, ... with output sizes 10, 20, 30, ... and the given explicit edges.
Profile layers(int n, std::vector<ProfileEdge> edges = {}) {
  Profile p;
  for (int i = 0; i < n; ++i) {
    LayerProfile l;
    l.name = std::string(1, static_cast<char>('a' + i));
    l.kind = "linear";
    l.output_bytes_per_sample = 10.0 * (i + 1);
    l.timings = {{1, 1e-3, 2e-3, 1e-3}};
    p.layers.push_back(l);
  }
  p.edges = std::move(edges);
  return p;
}

std::vector<std::pair<int, int>> endpoints(const std::vector<ModelGraph::Edge>& edges) {
  std::vector<std::pair<int, int>> out;
  for (const auto& e : edges) out.emplace_back(e.from, e.to);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ModelGraph, ChainFromAProfileWithoutEdges) {
  const ModelGraph g = ModelGraph::from_profile(layers(4));
  EXPECT_EQ(g.num_layers(), 4);
  EXPECT_THAT(g.topological_order(), ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(g.index_order_is_topological());
  EXPECT_THAT(endpoints(g.edges()), ElementsAre(std::pair(0, 1), std::pair(1, 2), std::pair(2, 3)));
  // Edge i -> i+1 carries layer i's output.
  for (const auto& e : g.edges()) EXPECT_EQ(e.bytes_per_sample, 10.0 * (e.from + 1));
  EXPECT_TRUE(g.in_edges(0).empty());
  EXPECT_TRUE(g.out_edges(3).empty());
  EXPECT_EQ(g.graph()[2].name, "c");
  EXPECT_EQ(g.graph()[2].kind, "linear");
}

TEST(ModelGraph, SkipConnectionIsAnEdgeOverLayers) {
  // U-Net style: the chain a -> b -> c -> d plus the skip a -> d of 7 bytes per sample.
  const ModelGraph g =
      ModelGraph::from_profile(layers(4, {{0, 1, 10}, {1, 2, 20}, {2, 3, 30}, {0, 3, 7}}));
  EXPECT_TRUE(g.index_order_is_topological());
  EXPECT_THAT(g.topological_order(), ElementsAre(0, 1, 2, 3));
  const auto in = g.in_edges(3);
  ASSERT_EQ(in.size(), 2u);
  double bytes = 0;
  std::set<int> sources;
  for (const auto& e : in) {
    EXPECT_EQ(e.to, 3);
    sources.insert(e.from);
    bytes += e.bytes_per_sample;
  }
  EXPECT_EQ(sources, (std::set<int>{0, 2}));
  EXPECT_EQ(bytes, 37);
  const auto out = g.out_edges(0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(endpoints(out), ElementsAre(std::pair(0, 1), std::pair(0, 3)));
}

TEST(ModelGraph, TopologicalOrderTakesTheLowestReadyLayerFirst) {
  // Edges 2 -> 0, 0 -> 1, 3 -> 1. Ready at first: {2, 3}; take 2, which frees 0; ready {0, 3};
  // take 0; 1 still waits for 3; take 3, then 1.
  const ModelGraph g = ModelGraph::from_profile(layers(4, {{2, 0, 1}, {0, 1, 1}, {3, 1, 1}}));
  EXPECT_THAT(g.topological_order(), ElementsAre(2, 0, 3, 1));
  EXPECT_FALSE(g.index_order_is_topological());
  // Same graph, edges listed in another order: same result.
  const ModelGraph h = ModelGraph::from_profile(layers(4, {{3, 1, 1}, {0, 1, 1}, {2, 0, 1}}));
  EXPECT_EQ(h.topological_order(), g.topological_order());
}

TEST(ModelGraph, IndependentLayersComeInIndexOrder) {
  const ModelGraph g = ModelGraph::from_profile(layers(5, {{4, 3, 1}}));
  // 4 -> 3 forces 3 after 4; the rest keep index order.
  EXPECT_THAT(g.topological_order(), ElementsAre(0, 1, 2, 4, 3));
  EXPECT_FALSE(g.index_order_is_topological());
}

TEST(ModelGraph, CycleIsAnErrorNamingALayerOnIt) {
  const std::string msg = input_error([] {
    ModelGraph::from_profile(layers(3, {{0, 1, 1}, {1, 2, 1}, {2, 1, 1}}), "m.json");
  });
  EXPECT_THAT(msg, ::testing::StartsWith("m.json: edges: the graph has a cycle through layer "));
  EXPECT_TRUE(msg.find("layer 1 (\"b\")") != std::string::npos ||
              msg.find("layer 2 (\"c\")") != std::string::npos)
      << msg;
}

TEST(ModelGraph, CycleErrorNamesALayerOnTheCycleNotOneAfterIt) {
  // Layer b (1) waits on the cycle c <-> d but is not on it.
  const std::string msg = input_error([] {
    ModelGraph::from_profile(layers(4, {{0, 1, 1}, {2, 3, 1}, {3, 2, 1}, {3, 1, 1}}), "m.json");
  });
  EXPECT_TRUE(msg.find("layer 2 (\"c\")") != std::string::npos ||
              msg.find("layer 3 (\"d\")") != std::string::npos)
      << msg;
}

TEST(ModelGraph, SelfLoopIsACycle) {
  EXPECT_EQ(input_error([] {
              ModelGraph::from_profile(layers(2, {{1, 1, 1}}), "m.json");
            }),
            "m.json: edges: the graph has a cycle through layer 1 (\"b\")");
}

TEST(ModelGraph, BadEdgesOfAHandBuiltProfile) {
  EXPECT_EQ(input_error([] {
              ModelGraph::from_profile(layers(2, {{0, 1, 1}, {1, 2, 1}}), "x");
            }),
            "x: edges[1]: layer index out of range");
  EXPECT_EQ(input_error([] {
              ModelGraph::from_profile(layers(2, {{-1, 1, 1}}), "x");
            }),
            "x: edges[0]: layer index out of range");
  EXPECT_EQ(input_error([] {
              ModelGraph::from_profile(layers(2, {{0, 1, -5}}), "x");
            }),
            "x: edges[0].bytes_per_sample: unknown or negative size");
}

TEST(ModelGraph, SingleLayerHasNoEdges) {
  const ModelGraph g = ModelGraph::from_profile(layers(1));
  EXPECT_THAT(g.topological_order(), ElementsAre(0));
  EXPECT_TRUE(g.edges().empty());
  EXPECT_TRUE(g.index_order_is_topological());
}

}  // namespace
}  // namespace pipetwin
