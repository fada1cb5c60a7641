// core/topology.hpp: the optional "topology" field of a cluster file (NICs per node, PCIe switch
// groups, peer-to-peer), its one-line errors, the link resources and the routes over them.
#include "core/routes.hpp"
#include "core/topology.hpp"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "profiles/synthetic.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;

const Catalog& shipped() {
  static const Catalog catalog = Catalog::load(test::source_dir() + "/hardware");
  return catalog;
}

// 2 nodes x 4 GPUs, PCIe 16 GB/s inside a node, 10 GB/s between, and a topology.
Json doc_with(const Json& topology) {
  Json doc = Json::parse(R"({"format": "pipetwin.cluster", "version": 1, "name": "t",
      "device": "rtx-2080-ti", "nodes": 2, "devices_per_node": 4,
      "intra_node_link": {"name": "pcie", "bandwidth": 16e9, "latency": 1e-5},
      "inter_node_link": {"name": "ib", "bandwidth": 10e9, "latency": 2e-5}})");
  doc["topology"] = topology;
  return doc;
}

Cluster cluster_with(const Json& topology) {
  const Json doc = doc_with(topology);
  return cluster_from_json(JsonView(doc, "c.json"), shipped());
}

std::string error_with(const Json& topology) {
  const Json doc = doc_with(topology);
  return test::input_error([&] { cluster_from_json(JsonView(doc, "c.json"), shipped()); });
}

TEST(Topology, AbsentFieldMeansNone) {
  const Json doc = doc_with(nullptr);
  Json plain = doc;
  plain.erase("topology");
  const Cluster c = cluster_from_json(JsonView(plain, "c.json"), shipped());
  EXPECT_FALSE(c.topology.has_value());
  EXPECT_FALSE(cluster_to_json(c).contains("topology"));
  EXPECT_TRUE(topology_links(c).empty());
}

TEST(Topology, ParsesAndRoundTrips) {
  const Cluster c = cluster_with(Json::parse(R"({"nics_per_node": 2, "devices_per_pcie_switch": 2,
      "pcie_switch_bandwidth": 12e9, "p2p": false, "source": "a manual"})"));
  ASSERT_TRUE(c.topology.has_value());
  EXPECT_EQ(c.topology->nics_per_node, 2);
  EXPECT_EQ(c.topology->devices_per_pcie_switch, 2);
  EXPECT_EQ(c.topology->pcie_switch_bandwidth, 12e9);
  EXPECT_FALSE(c.topology->p2p);
  const Json back = cluster_to_json(c);
  const Cluster again = cluster_from_json(JsonView(back, "back.json"), Catalog());
  EXPECT_EQ(topology_to_json(*again.topology), topology_to_json(*c.topology));
  const Cluster defaults = cluster_with(Json::object());
  EXPECT_EQ(defaults.topology->nics_per_node, 1);
  EXPECT_TRUE(defaults.topology->p2p);
}

TEST(Topology, BadValuesAreOneLineErrorsNamingFileAndField) {
  EXPECT_EQ(error_with({{"nics_per_node", 0}}),
            "c.json: topology.nics_per_node: must be between 1 and devices_per_node (4), 0 given");
  EXPECT_EQ(error_with({{"nics_per_node", 5}}),
            "c.json: topology.nics_per_node: must be between 1 and devices_per_node (4), 5 given");
  EXPECT_EQ(error_with({{"devices_per_pcie_switch", 3}, {"pcie_switch_bandwidth", 1e9}}),
            "c.json: topology.devices_per_pcie_switch: must divide devices_per_node (4), 3 given");
  EXPECT_EQ(error_with({{"devices_per_pcie_switch", 2}}),
            "c.json: topology.devices_per_pcie_switch: needs pcie_switch_bandwidth too");
  EXPECT_EQ(error_with({{"pcie_switch_bandwidth", 1e9}}),
            "c.json: topology.pcie_switch_bandwidth: needs devices_per_pcie_switch too");
  EXPECT_EQ(error_with({{"devices_per_pcie_switch", 2}, {"pcie_switch_bandwidth", -1}}),
            "c.json: topology.pcie_switch_bandwidth: expected a positive number, got -1");
  EXPECT_EQ(error_with({{"p2p", "no"}}),
            "c.json: topology.p2p: expected true or false, got \"no\"");
  Json huge = doc_with(Json::object());
  huge["nodes"] = 1 << 20;
  EXPECT_EQ(test::input_error([&] { cluster_from_json(JsonView(huge, "c.json"), shipped()); }),
            "c.json: topology: describes at most 1048576 devices, the cluster has 4194304");
  EXPECT_THAT(error_with({{"nic", 1}}),
              ::testing::StartsWith("c.json: topology.nic: unknown field (known: "));
}

// Resources: 8 ports x 2, then 2 nodes x 2 switches x 2, then 2 nodes x 1 NIC x 2.
TEST(Topology, RoutesCrossTheSharedResources) {
  const Cluster c =
      cluster_with(Json::parse(R"({"devices_per_pcie_switch": 2, "pcie_switch_bandwidth": 12e9})"));
  const auto cap = topology_links(c);
  ASSERT_EQ(cap.size(), 16u + 8u + 4u);
  EXPECT_EQ(cap[0], 16e9);
  EXPECT_EQ(cap[16], 12e9);
  EXPECT_EQ(cap[24], 10e9);
  // Same switch, peer-to-peer: the two ports only.
  EXPECT_THAT(route(c, 0, 1).links, ElementsAre(0, 3));
  EXPECT_EQ(route(c, 0, 1).latency, 1e-5);
  // Other switch: up 0's switch, down 2's.
  EXPECT_THAT(route(c, 0, 2).links, ElementsAre(0, 16, 19, 5));
  // Other node: port, switch up, node 0's NIC out, node 1's NIC in, switch down, port.
  EXPECT_THAT(route(c, 1, 6).links, ElementsAre(2, 16, 24, 27, 23, 13));
  EXPECT_EQ(route(c, 1, 6).latency, 2e-5);
  EXPECT_TRUE(route(c, 3, 3).links.empty());
}

TEST(Topology, WithoutPeerToPeerACopyGoesThroughTheHost) {
  const Cluster c = cluster_with(Json::parse(
      R"({"devices_per_pcie_switch": 2, "pcie_switch_bandwidth": 12e9, "p2p": false})"));
  EXPECT_THAT(route(c, 0, 1).links, ElementsAre(0, 16, 17, 3));
  EXPECT_EQ(route(c, 0, 1).latency, 2e-5);
}

TEST(Topology, NicsAreSharedInBlocks) {
  const Cluster one = cluster_with(Json::object());
  const Cluster four = cluster_with({{"nics_per_node", 4}});
  const auto cap1 = topology_links(one), cap4 = topology_links(four);
  // Four GPUs of node 0 send to their peers on node 1 at once.
  std::vector<Route> r1, r4;
  for (int d = 0; d < 4; ++d) {
    r1.push_back(route(one, d, d + 4));
    r4.push_back(route(four, d, d + 4));
  }
  EXPECT_DOUBLE_EQ(slowest_rate(cap1, r1), 10e9 / 4);
  EXPECT_DOUBLE_EQ(slowest_rate(cap4, r4), 10e9);
}

TEST(Topology, CostModelPricesATransferAloneAtItsSlowestResource) {
  const Profile p = synthetic_profile(ModelSpec::parse("uniform:layers=4", "t"));
  const Cluster plain = cluster_with(Json::object());
  const CostModel cm(p, plain);
  EXPECT_DOUBLE_EQ(cm.transfer_s(16e6, 0, 1), 1e-5 + 16e6 / 16e9);
  EXPECT_DOUBLE_EQ(cm.transfer_s(10e6, 0, 5), 2e-5 + 10e6 / 10e9);
  const Cluster host = cluster_with(
      Json::parse(R"({"devices_per_pcie_switch": 4, "pcie_switch_bandwidth": 8e9, "p2p": false})"));
  EXPECT_DOUBLE_EQ(CostModel(p, host).transfer_s(16e6, 0, 1), 2e-5 + 16e6 / 8e9);
}

// Partitioners price stage s to stage s + 1 as devices s and s + 1, past the cluster's last
// device for the last stage: such a pair gets its link's figures, as without a topology.
TEST(Topology, DevicesOutsideTheClusterGetTheLinksFigures) {
  const Profile p = synthetic_profile(ModelSpec::parse("uniform:layers=4", "t"));
  const Cluster host = cluster_with(
      Json::parse(R"({"devices_per_pcie_switch": 4, "pcie_switch_bandwidth": 8e9, "p2p": false})"));
  const CostModel cm(p, host);
  EXPECT_DOUBLE_EQ(cm.transfer_s(16e6, 7, 8), 2e-5 + 16e6 / 10e9);  // node 1 to "node 2"
  EXPECT_DOUBLE_EQ(cm.allreduce_s(16e6, {7, 8}), 16e6 / 10e9 + 2 * 2e-5);
  EXPECT_FALSE(in_cluster(host, 8));
  EXPECT_FALSE(in_cluster(host, -1));
  EXPECT_THROW(route(host, 7, 8), std::out_of_range);
}

}  // namespace
}  // namespace pipetwin
