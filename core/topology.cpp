#include "core/topology.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "core/cluster.hpp"

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

Topology topology_from_json(const JsonView& j, int nodes, int devices_per_node) {
  // Its resources are listed per device: a bound keeps a typo from asking for gigabytes.
  constexpr int64_t kMaxDevices = int64_t{1} << 20;
  const int64_t devices = int64_t{nodes} * devices_per_node;
  if (devices > kMaxDevices) {
    j.fail(fmt::format("describes at most {} devices, the cluster has {}", kMaxDevices, devices));
  }
  j.allow_only(
      {"nics_per_node", "devices_per_pcie_switch", "pcie_switch_bandwidth", "p2p", "source"});
  Topology t;
  t.nics_per_node = j.int32_or("nics_per_node", 1);
  if (t.nics_per_node < 1 || t.nics_per_node > devices_per_node) {
    j.at("nics_per_node")
        .fail(fmt::format("must be between 1 and devices_per_node ({}), {} given", devices_per_node,
                          t.nics_per_node));
  }
  t.devices_per_pcie_switch = j.int32_or("devices_per_pcie_switch", 0);
  if (j.has("devices_per_pcie_switch") &&
      (t.devices_per_pcie_switch < 1 || devices_per_node % t.devices_per_pcie_switch != 0)) {
    j.at("devices_per_pcie_switch")
        .fail(fmt::format("must divide devices_per_node ({}), {} given", devices_per_node,
                          t.devices_per_pcie_switch));
  }
  if (j.has("devices_per_pcie_switch") != j.has("pcie_switch_bandwidth")) {
    const char* missing =
        j.has("devices_per_pcie_switch") ? "pcie_switch_bandwidth" : "devices_per_pcie_switch";
    const char* given =
        j.has("devices_per_pcie_switch") ? "devices_per_pcie_switch" : "pcie_switch_bandwidth";
    j.at(given).fail(fmt::format("needs {} too", missing));
  }
  if (j.has("pcie_switch_bandwidth")) t.pcie_switch_bandwidth = j.positive("pcie_switch_bandwidth");
  t.p2p = j.bool_or("p2p", true);
  t.source = j.string_or("source", "");
  return t;
}

Json topology_to_json(const Topology& t) {
  Json j;
  j["nics_per_node"] = t.nics_per_node;
  if (t.devices_per_pcie_switch > 0) {
    j["devices_per_pcie_switch"] = t.devices_per_pcie_switch;
    j["pcie_switch_bandwidth"] = t.pcie_switch_bandwidth;
  }
  j["p2p"] = t.p2p;
  if (!t.source.empty()) j["source"] = t.source;
  return j;
}

}  // namespace pipetwin
