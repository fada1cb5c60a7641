// The engine's network (sim/engine.hpp "Network") and the simulator on clusters with a topology
// (core/topology.hpp): transfers that share a link slow each other by max-min fair sharing, a
// rendezvous ends with the member that moves the data, and concurrent all-reduces share a NIC.
#include <gtest/gtest.h>

#include "core/collective.hpp"
#include "sim/engine.hpp"
#include "tests/sim_test_util.hpp"

namespace pipetwin::sim {
namespace {

constexpr double kS = 64e6, kB = 10e9;

// Tasks 0..n-1, each alone on its stream; `flows[t]` the links task t's one flow crosses (empty:
// none); groups as given.
TaskGraph graph(const std::vector<double>& capacity, const std::vector<std::vector<int32_t>>& flows,
                const std::vector<std::vector<int32_t>>& groups = {}) {
  TaskGraph g;
  const auto n = static_cast<int>(flows.size());
  g.num_streams = n;
  g.net_capacity = capacity;
  g.net_flow_begin.assign(1, 0);
  g.group.assign(static_cast<size_t>(n), -1);
  g.group_begin.assign(1, 0);
  for (const auto& m : groups) {
    for (int32_t t : m) {
      g.group[static_cast<size_t>(t)] = static_cast<int32_t>(g.group_begin.size()) - 1;
      g.group_members.push_back(t);
    }
    g.group_begin.push_back(static_cast<int32_t>(g.group_members.size()));
  }
  for (int t = 0; t < n; ++t) {
    g.duration.push_back(1.0);  // unused by tasks that move flows
    g.stream.push_back(t);
    g.stream_begin.push_back(t);
    g.stream_tasks.push_back(t);
    g.dep_begin.push_back(0);
    g.net_latency.push_back(1e-6);
    const auto& path = flows[static_cast<size_t>(t)];
    if (!path.empty()) {
      g.flow_bytes.push_back(kS);
      g.flow_path_links.insert(g.flow_path_links.end(), path.begin(), path.end());
      g.flow_path_begin.push_back(static_cast<int32_t>(g.flow_path_links.size()));
    }
    g.net_flow_begin.push_back(static_cast<int32_t>(g.flow_bytes.size()));
  }
  g.stream_begin.push_back(n);
  g.dep_begin.push_back(0);
  g.prepare();
  return g;
}

TEST(EngineNetwork, TwoTransfersOnOneLinkTakeTwiceAsLong) {
  std::vector<double> s, e;
  Engine().run(graph({kB}, {{0}, {0}}), s, e);
  EXPECT_DOUBLE_EQ(e[0], 2 * kS / kB + 1e-6);
  EXPECT_DOUBLE_EQ(e[1], 2 * kS / kB + 1e-6);
}

TEST(EngineNetwork, SeparateLinksDoNotInterfere) {
  std::vector<double> s, e;
  Engine().run(graph({kB, kB}, {{0}, {1}}), s, e);
  EXPECT_DOUBLE_EQ(e[0], kS / kB + 1e-6);
  EXPECT_DOUBLE_EQ(e[1], kS / kB + 1e-6);
}

// A send (task 0, moves the flow) and its receive (task 1) end together; task 2 is a plain task.
TEST(EngineNetwork, TheReceiveEndsWithItsSend) {
  std::vector<double> s, e;
  Engine engine;
  const TaskGraph g = graph({kB}, {{0}, {}, {}}, {{0, 1}});
  engine.run(g, s, e);
  EXPECT_DOUBLE_EQ(e[0], kS / kB + 1e-6);
  EXPECT_DOUBLE_EQ(e[1], e[0]);
  EXPECT_DOUBLE_EQ(e[2], 1.0);
  std::vector<double> s2, e2;  // the engine re-runs to the same result
  engine.run(g, s2, e2);
  EXPECT_EQ(e, e2);
}

// 2 nodes x 4 GPUs, 4 stages per replica, dp = 2: the four stages' all-reduces cross the nodes at
// once. One NIC per node: they share it; four: each has its own and the iteration matches the
// cluster without a topology.
TEST(EngineNetwork, ConcurrentAllReducesShareTheNic) {
  auto iteration = [](int nics, bool topology) {
    testing::PlanSpec p;
    p.model = testing::uniform(4, 1, 2, "param_kb=65536");
    p.dp = 2;
    p.cluster = testing::ideal_cluster(8, 16e9, 1e-5, 2);
    p.cluster.inter_node = {"ib", "", kB, 2e-5};
    if (topology) {
      p.cluster.topology = Topology{};
      p.cluster.topology->nics_per_node = nics;
    }
    return testing::simulate(p, 3).metrics.iteration_time_s;
  };
  const double plain = iteration(0, false), four = iteration(4, true), one = iteration(1, true);
  EXPECT_NEAR(four, plain, 1e-9 * plain);
  EXPECT_GT(one, four + 0.5 * 65536 * 1024 / kB);  // at least one bucket's worth slower
}

// Without peer-to-peer, copies between two pairs of GPUs under one PCIe switch go up to the host
// and share its uplink; with it they stay below the switch.
TEST(EngineNetwork, WithoutPeerToPeerCopiesShareTheSwitchUplink) {
  auto iteration = [](bool p2p) {
    testing::PlanSpec p;
    p.model = testing::uniform(4, 1, 2, "act_kb=65536");
    p.stages = 2;
    p.dp = 2;
    p.cluster = testing::ideal_cluster(4, 16e9, 1e-5);
    p.cluster.topology = Topology{};
    p.cluster.topology->devices_per_pcie_switch = 4;
    p.cluster.topology->pcie_switch_bandwidth = 16e9;
    p.cluster.topology->p2p = p2p;
    return testing::simulate(p, 3).metrics.iteration_time_s;
  };
  EXPECT_GT(iteration(false), iteration(true) * 1.05);
}

// Alone, an all-reduce's flows take what the cost model prices it at (the chosen algorithm's
// time; hierarchical here, 2 ranks on each of 2 nodes, for the large buckets).
TEST(EngineNetwork, AloneACollectiveTakesItsAlgorithmsTime) {
  testing::PlanSpec p;
  p.model = testing::uniform(4, 1, 2, "param_kb=65536");
  p.stages = 1;  // no copies beside the all-reduces, which run one at a time
  p.dp = 4;
  p.cluster = testing::ideal_cluster(4, 16e9, 1e-5, 2);
  p.cluster.inter_node = {"ib", "", kB, 2e-5};
  p.cluster.topology = Topology{};
  p.cluster.topology->nics_per_node = 2;  // each inter-node ring of the hierarchy has its NIC
  const PlanContext ctx(testing::synthetic_plan(p), 1);
  const SimResult r = simulate_plan(ctx);
  int checked = 0;
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.action.op != Op::kAllReduce) continue;
    const double bytes = ctx.stages[static_cast<size_t>(e.action.stage)]
                             .buckets[static_cast<size_t>(e.action.bucket)]
                             .bytes;
    EXPECT_EQ(allreduce_cost(p.cluster, bytes, {0, 1, 2, 3}).algorithm,
              AllReduceAlgorithm::kHierarchical);
    EXPECT_NEAR(e.duration(), ctx.cost.allreduce_s(bytes, {0, 1, 2, 3}), 1e-12);
    ++checked;
  }
  EXPECT_GT(checked, 2);
}

}  // namespace
}  // namespace pipetwin::sim
