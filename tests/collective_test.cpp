// core/collective.hpp: all-reduce times by algorithm against their closed forms, and which one a
// cluster with a topology gets (NCCL's tuner picks the fastest by its model).
#include "core/collective.hpp"

#include <numeric>

#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "profiles/synthetic.hpp"

namespace pipetwin {
namespace {

constexpr double kS = 256e6, kB = 10e9, kA = 2e-5;

TEST(Collective, RingClosedForm) {
  EXPECT_DOUBLE_EQ(ring_allreduce_s(4, kS, kB, kA), 2.0 * 3 / 4 * kS / kB + 2 * 3 * kA);
  EXPECT_DOUBLE_EQ(ring_allreduce_s(2, kS, kB, 0), kS / kB);
  EXPECT_EQ(ring_allreduce_s(1, kS, kB, kA), 0);
}

TEST(Collective, DoubleBinaryTreeClosedForm) {
  EXPECT_DOUBLE_EQ(tree_allreduce_s(8, kS, kB, kA), 2 * kS / kB + 2 * 3 * kA);
  EXPECT_DOUBLE_EQ(tree_allreduce_s(5, kS, kB, kA), 2 * kS / kB + 2 * 3 * kA);  // ceil(log2 5)
  EXPECT_DOUBLE_EQ(tree_allreduce_s(64, 0, kB, kA), 2 * 6 * kA);
  EXPECT_EQ(tree_allreduce_s(1, kS, kB, kA), 0);
}

// 2 nodes x 4: reduce-scatter in the node, ring of S/4 across the 2 nodes, all-gather.
TEST(Collective, HierarchicalClosedForm) {
  const double bi = 16e9, ai = 1e-5;
  const double expected =
      2 * (3.0 / 4 * kS / bi + 3 * ai) + (2.0 * 1 / 2 * (kS / 4) / kB + 2 * 1 * kA);
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(2, 4, kS, bi, ai, kB, kA), expected);
}

Cluster two_by_four(int nics, bool topology = true, int nodes = 2, int per_node = 4) {
  Cluster c;
  c.name = "t";
  c.device.name = "gpu";
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.intra_node = {"pcie", "", 16e9, 1e-5};
  c.inter_node = {"ib", "", kB, kA};
  if (topology) {
    c.topology = Topology{};
    c.topology->nics_per_node = nics;
  }
  return c;
}

std::vector<int> all_eight() {
  std::vector<int> d(8);
  std::iota(d.begin(), d.end(), 0);
  return d;
}

TEST(Collective, WithoutTopologyTheRingOverTheSlowestLinkAsBefore) {
  const AllReduceCost c = allreduce_cost(two_by_four(1, false), kS, all_eight());
  EXPECT_EQ(c.algorithm, AllReduceAlgorithm::kRing);
  EXPECT_EQ(c.seconds, 2 * (8.0 - 1) / 8.0 * kS / kB + 2 * (8.0 - 1) * kA);
  const Profile p = synthetic_profile(ModelSpec::parse("uniform:layers=4", "t"));
  EXPECT_EQ(CostModel(p, two_by_four(1, false)).allreduce_s(kS, all_eight()), c.seconds);
}

// One NIC: the 4 cross-node rings of the hierarchical algorithm share it (B/4 each), so the flat
// ring (one message per NIC direction) wins; four NICs give each its own and hierarchical wins.
TEST(Collective, NicsPerNodeDecideBetweenRingAndHierarchical) {
  const double ring = 2 * 7.0 / 8 * kS / kB + 2 * 7 * kA;
  const AllReduceCost one = allreduce_cost(two_by_four(1), kS, all_eight());
  EXPECT_EQ(one.algorithm, AllReduceAlgorithm::kRing);
  EXPECT_DOUBLE_EQ(one.seconds, ring);
  const AllReduceCost four = allreduce_cost(two_by_four(4), kS, all_eight());
  EXPECT_EQ(four.algorithm, AllReduceAlgorithm::kHierarchical);
  EXPECT_DOUBLE_EQ(four.seconds, hierarchical_allreduce_s(2, 4, kS, 16e9, 1e-5, kB, kA));
  EXPECT_DOUBLE_EQ(hierarchical_allreduce_s(2, 4, kS, 16e9, 1e-5, kB / 4, kA),
                   2 * (3.0 / 4 * kS / 16e9 + 3e-5) + kS / kB + kA * 2);
  EXPECT_GT(hierarchical_allreduce_s(2, 4, kS, 16e9, 1e-5, kB / 4, kA), ring);
}

// 8 nodes of one GPU: 2 log2(8) = 6 latencies for the tree against the ring's 14.
TEST(Collective, SmallMessagesTakeTheTreeForItsLogarithmicLatency) {
  const AllReduceCost c = allreduce_cost(two_by_four(1, true, 8, 1), 1, all_eight());
  EXPECT_EQ(c.algorithm, AllReduceAlgorithm::kTree);
  EXPECT_DOUBLE_EQ(c.seconds, tree_allreduce_s(8, 1, kB, kA));
  EXPECT_DOUBLE_EQ(c.latency, 6 * kA);
  EXPECT_STREQ(algorithm_name(c.algorithm), "tree");
  // Two levels and a small message: hierarchical's 2 x 3 intra-node and 2 x 1 inter-node
  // latencies beat the tree's 2 x 3 inter-node ones.
  const AllReduceCost h = allreduce_cost(two_by_four(1), 1, all_eight());
  EXPECT_EQ(h.algorithm, AllReduceAlgorithm::kHierarchical);
  EXPECT_DOUBLE_EQ(h.latency, 6 * 1e-5 + 2 * kA);
}

}  // namespace
}  // namespace pipetwin
