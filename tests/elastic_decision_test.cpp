// core/elastic/decision: the plan of a pipeline state (Figure 7's placement), F_frozen outside the
// Pipe, and AutoCache's test against its closed form — the decisions the replay and the live run
// share.
#include "core/elastic/decision.hpp"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/model_spec.hpp"
#include "profiles/synthetic.hpp"

namespace pipetwin::elastic {
namespace {

using ::testing::ElementsAre;

Plan base(int nodes, int per_node) {
  Plan p;
  p.model = "uniform:layers=8,fwd_ms=1,bwd_ms=2,act_kb=64";
  p.profile = synthetic_profile(ModelSpec::parse(p.model, "test"));
  p.cluster.name = "test";
  p.cluster.nodes = nodes;
  p.cluster.devices_per_node = per_node;
  p.cluster.intra_node.bandwidth = 1e10;
  p.cluster.device.memory_bytes = 1e12;
  return p;
}

PipelineState state(int K, int dp, int frozen) {
  PipelineState s;
  s.K = K;
  s.dp = dp;
  s.frozen_profile = frozen;
  for (int k = 0; k < K; ++k) {
    s.stages.emplace_back();
    for (int l = k * 8 / K; l < (k + 1) * 8 / K; ++l) s.stages.back().push_back(l);
  }
  return s;
}

TEST(ElasticDecision, PipelinesStayInsideANode) {
  // Two nodes of 8: K = 4 with 2 replicas per node fills them; K = 4 with one per node (AutoDP
  // off) leaves each node's second half idle, not a pipeline across the nodes.
  Plan p = state_plan(base(2, 8), state(4, 4, 2), 16, 0.25);
  EXPECT_THAT(p.placement, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  EXPECT_EQ(p.batch_size, 64);
  EXPECT_EQ(p.frozen_layers, 2);
  EXPECT_EQ(p.lambda_frozen, 0.25);
  EXPECT_EQ(p.partitioner, "autopipe");
  p = state_plan(base(2, 8), state(4, 2, 0), 16, 0.25);
  EXPECT_THAT(p.placement, ElementsAre(0, 1, 2, 3, 8, 9, 10, 11));
  // Three replicas do not split over two nodes (a job that lost a device): default placement.
  p = state_plan(base(2, 8), state(2, 3, 0), 16, 0.25);
  EXPECT_TRUE(p.placement.empty());
  p.validate("test");
}

TEST(ElasticDecision, FrozenForwardLeavesThePipe) {
  const Profile p = base(1, 2).profile;
  const Profile out = outside_pipe(p, 3);
  for (int l = 0; l < 8; ++l) {
    const auto& t = out.layers[static_cast<size_t>(l)].timings[0];
    EXPECT_EQ(t.forward_s, l < 3 ? 0 : p.layers[static_cast<size_t>(l)].timings[0].forward_s);
    EXPECT_EQ(t.backward_s, p.layers[static_cast<size_t>(l)].timings[0].backward_s);
  }
}

TEST(ElasticDecision, CacheWhenReadingBeatsTheFrozenForward) {
  // 64 KiB per sample crosses any boundary of the chain; at the host's 10 GB/s a read takes
  // 6.6 us, against F_frozen's forward of 1 ms per layer per sample: cache. With a memory
  // budget of nothing and a disk of 10 MB/s the read takes 6.6 ms: more than 3 layers' 3 ms,
  // less than 7 layers' 7 ms.
  const Plan p = base(1, 2);
  CacheInputs in;
  in.samples = 1000;
  in.batch = 1;
  EXPECT_DOUBLE_EQ(boundary_bytes(p.profile, 3), 64 * 1024);
  EXPECT_TRUE(cache_on(p, 3, in));
  in.config.memory_budget_bytes = 0;
  in.costs.disk_bandwidth = 1e7;
  EXPECT_FALSE(cache_on(p, 3, in));
  EXPECT_TRUE(cache_on(p, 7, in));
}

}  // namespace
}  // namespace pipetwin::elastic
