#include "core/routes.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace pipetwin {

namespace {

int switches_per_node(const Cluster& c, const Topology& t) {
  return t.devices_per_pcie_switch > 0 ? c.devices_per_node / t.devices_per_pcie_switch : 0;
}

// Resource indices, in topology_links' order.
struct Layout {
  int devices, switches_per_node, nics_per_node, per_node, per_switch;
  int32_t port(int d, bool up) const { return 2 * d + (up ? 0 : 1); }
  int32_t uplink(int d, bool up) const {
    const int node = d / per_node;
    const int sw = node * switches_per_node + (d % per_node) / per_switch;
    return 2 * devices + 2 * sw + (up ? 0 : 1);
  }
  int32_t nic(int d, bool tx) const {
    const int node = d / per_node;
    const int n = node * nics_per_node + (d % per_node) * nics_per_node / per_node;
    const int nodes = devices / per_node;
    return 2 * devices + 2 * nodes * switches_per_node + 2 * n + (tx ? 0 : 1);
  }
};

Layout layout(const Cluster& c) {
  const Topology& t = *c.topology;
  return {c.num_devices(), switches_per_node(c, t), t.nics_per_node, c.devices_per_node,
          std::max(1, t.devices_per_pcie_switch)};
}

}  // namespace

std::vector<double> topology_links(const Cluster& c) {
  if (!c.topology) return {};
  const Topology& t = *c.topology;
  std::vector<double> cap(static_cast<size_t>(2 * c.num_devices()), c.intra_node.bandwidth);
  cap.resize(cap.size() + static_cast<size_t>(2 * c.nodes * switches_per_node(c, t)),
             t.pcie_switch_bandwidth);
  cap.resize(cap.size() + static_cast<size_t>(2 * c.nodes * t.nics_per_node),
             c.inter_node.bandwidth);
  return cap;
}

bool in_cluster(const Cluster& c, int d) {
  return d >= 0 && d < c.num_devices();
}

Route route(const Cluster& c, int a, int b) {
  Route r;
  if (a == b || !c.topology) return r;
  if (!in_cluster(c, a) || !in_cluster(c, b)) {
    throw std::out_of_range(
        fmt::format("route between devices {} and {} of a cluster of {}", a, b, c.num_devices()));
  }
  const Topology& t = *c.topology;
  const Layout l = layout(c);
  const bool switches = l.switches_per_node > 0;
  r.links.push_back(l.port(a, true));
  if (c.node_of(a) != c.node_of(b)) {
    if (switches) r.links.push_back(l.uplink(a, true));
    r.links.push_back(l.nic(a, true));
    r.links.push_back(l.nic(b, false));
    if (switches) r.links.push_back(l.uplink(b, false));
    r.latency = c.inter_node.latency;
  } else {
    // Staged through host memory without peer-to-peer: up to the host and down again.
    const bool via_host = !t.p2p;
    if (switches && (via_host || l.uplink(a, true) != l.uplink(b, true))) {
      r.links.push_back(l.uplink(a, true));
      r.links.push_back(l.uplink(b, false));
    }
    r.latency = (via_host ? 2 : 1) * c.intra_node.latency;
  }
  r.links.push_back(l.port(b, false));
  return r;
}

double slowest_rate(const std::vector<double>& capacity, const std::vector<Route>& routes) {
  std::vector<int> crossing(capacity.size(), 0);
  for (const Route& r : routes) {
    for (int32_t k : r.links) ++crossing[static_cast<size_t>(k)];
  }
  double rate = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < capacity.size(); ++k) {
    if (crossing[k] > 0) rate = std::min(rate, capacity[k] / crossing[k]);
  }
  return rate;
}

}  // namespace pipetwin
