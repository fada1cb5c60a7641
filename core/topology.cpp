#include "core/topology.hpp"

#include <fmt/format.h>

namespace pipetwin {

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
