// Routes: the link resources of a cluster's topology (core/topology.hpp) a copy between two of its
// devices crosses.
//
// Inside a node with peer-to-peer, port(a) -> [switch uplinks if a and b sit under
// different switches] -> port(b), at the intra-node latency. Without peer-to-peer (p2p: false:
// GeForce and some Quadro boards, CUDA's cudaDeviceCanAccessPeer false) a copy is staged
// through host memory: it goes up a's switch and down b's even under one switch, and pays the
// intra-node latency twice (device to host, host to device). Across nodes: port(a) -> a's switch
// uplink -> a's NIC -> b's NIC -> b's switch downlink -> port(b), at the inter-node latency.
// A route crosses each resource at most once, so that alone it runs at its slowest resource.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.hpp"

namespace pipetwin {

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

}  // namespace pipetwin
