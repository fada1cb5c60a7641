// Topology: what a cluster's devices share on their way to each other.
//
// Without a topology a cluster's transfers each get their link's whole bandwidth. A topology
// names the shared parts, as link resources a transfer crosses (its route):
//
//   port         each device's own link to the node's fabric, one per direction, at the
//                intra-node link's bandwidth (its PCIe or NVLink connection);
//   PCIe switch  consecutive devices of a node behind one switch (or host bridge), whose uplink
//                to the host, one per direction, they share (devices_per_pcie_switch,
//                pcie_switch_bandwidth);
//   NIC          the node's network interfaces, one per direction, at the inter-node link's
//                bandwidth: device i of a node (of m) uses NIC floor(i * nics / m), so the
//                node's devices share them in consecutive blocks (nics_per_node).
//
// Routes: inside a node with peer-to-peer, port(a) -> [switch uplinks if a and b sit under
// different switches] -> port(b), at the intra-node latency. Without peer-to-peer (p2p: false:
// GeForce and some Quadro boards, CUDA's cudaDeviceCanAccessPeer false) a copy is staged
// through host memory: it goes up a's switch and down b's even under one switch, and pays the
// intra-node latency twice (device to host, host to device). Across nodes: port(a) -> a's switch
// uplink -> a's NIC -> b's NIC -> b's switch downlink -> port(b), at the inter-node latency.
// A route crosses each resource at most once, so that alone it runs at its slowest resource.
//
// Thread-safety: plain value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin {

struct Cluster;

struct Topology {
  int nics_per_node = 1;
  int devices_per_pcie_switch = 0;   // 0: no switch level
  double pcie_switch_bandwidth = 0;  // bytes/s, one direction
  bool p2p = true;
  std::string source;  // where the figures come from
};

// A transfer's route: the link resources it crosses (indices into topology_links) and the
// latency it pays once.
struct Route {
  std::vector<int32_t> links;
  double latency = 0;
};

// The cluster's link resources, in a fixed order: ports (up, down per device), switch uplinks
// (up, down per switch), NICs (transmit, receive per NIC); their bandwidths in bytes/s.
std::vector<double> topology_links(const Cluster& cluster);
// Whether d numbers one of the cluster's devices. Callers that price stages as if they were
// devices (partitioners) may ask about others: they get the link's figures, as without a topology.
bool in_cluster(const Cluster& cluster, int d);
// The route of a copy from device a to device b (empty, zero latency, when a == b); throws
// std::out_of_range for a device outside the cluster.
Route route(const Cluster& cluster, int a, int b);
// The rate of the slowest of several flows that run at once over these routes (bytes/s): the
// first level of max-min progressive filling, min over links of capacity / flows crossing it
// (sim/network/max_min.hpp computes the rest of the allocation).
double slowest_rate(const std::vector<double>& capacity, const std::vector<Route>& routes);

// Field "topology" of a cluster document (format "pipetwin.cluster" v1), validated against the
// cluster's shape; errors name the file and the field.
Topology topology_from_json(const JsonView& j, int nodes, int devices_per_node);
Json topology_to_json(const Topology& t);

}  // namespace pipetwin
