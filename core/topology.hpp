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
// The routes over these resources are core/routes.hpp.
//
// Thread-safety: plain value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin {

struct Topology {
  int nics_per_node = 1;
  int devices_per_pcie_switch = 0;   // 0: no switch level
  double pcie_switch_bandwidth = 0;  // bytes/s, one direction
  bool p2p = true;
  std::string source;  // where the figures come from
};

// Field "topology" of a cluster document (format "pipetwin.cluster" v1), validated against the
// cluster's shape; errors name the file and the field.
Topology topology_from_json(const JsonView& j, int nodes, int devices_per_node);
Json topology_to_json(const Topology& t);

}  // namespace pipetwin
