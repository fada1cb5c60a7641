// Cluster: the hardware a plan runs on — devices, links and topology.
//
// A cluster is `nodes` x `devices_per_node` identical devices; devices on one node talk over the
// intra-node link (PCIe, NVLink, shared memory), devices on different nodes over the inter-node
// link (InfiniBand, Ethernet); an optional topology says which of those links they share
// (core/topology.hpp). Device and link types come from a catalog (hardware/devices.json,
// hardware/links.json); a cluster file names them, or defines one inline.
//
// Formats "pipetwin.cluster", "pipetwin.devices", "pipetwin.links" version 1 (JSON).
// Units: bytes, bytes/s, seconds, FLOP/s.
//
// Thread-safety: plain value types; Catalog is immutable after load.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/topology.hpp"

namespace pipetwin {

struct DeviceSpec {
  std::string name;
  std::string kind = "gpu";  // "gpu" or "cpu"
  std::string description;
  double memory_bytes = 0;
  double memory_bandwidth = 0;               // bytes/s
  std::map<std::string, double> peak_flops;  // per dtype: "float32", "float16", "bfloat16", ...
  std::string source;                        // where the figures come from
  // Devices of a node that share compute resources (a physical core's hyper-threads, or the
  // caches and memory bandwidth of a small VM), in consecutive groups of this size; 0 or 1:
  // devices are independent (GPUs). The profile's contention says how much they slow each other.
  int core_sharing = 0;
  // The devices of a sharing group draw on one memory of memory_bytes (stream sets of one GPU);
  // false: each device has memory_bytes of its own.
  bool shares_memory = false;
  // The devices of a sharing group run their backward passes one at a time: they are stream sets
  // of one GPU driven by PyTorch, whose autograd engine runs every backward on a GPU on the one
  // worker thread it keeps for that GPU (sim/engine.hpp "Locks").
  bool serial_backward = false;

  // Peak FLOP/s for `dtype`, falling back to float32; 0 when unknown.
  double flops(const std::string& dtype) const;
};

struct LinkSpec {
  std::string name;
  std::string description;
  double bandwidth = 0;  // bytes/s, one direction
  double latency = 0;    // seconds per message
};

struct Cluster {
  std::string name;
  DeviceSpec device;
  int nodes = 1;
  int devices_per_node = 1;
  LinkSpec intra_node;
  LinkSpec inter_node;
  // Speed of this cluster's devices relative to the device a profile was measured on; 0 means
  // "derive it" (from peak FLOP/s when both devices are in the catalog, else 1).
  double relative_speed = 0;
  // What the devices share on their way to each other (core/topology.hpp); none: every transfer
  // and collective gets its link's whole bandwidth.
  std::optional<Topology> topology;
  // The cores a node's devices run on when there are fewer than devices (more pipeline stages
  // than vCPUs): device d runs on core d mod cores_per_node of its node, as the executor pins a
  // stage's threads (exec/platform/host.hpp pin_to_core), and devices on one core take turns
  // (processor sharing at full cost: n running each get 1/n). 0: every device has its own core.
  int cores_per_node = 0;

  int num_devices() const { return nodes * devices_per_node; }
  // The core a device runs on (its own number unless cores_per_node puts several on one).
  int core_of(int d) const {
    if (cores_per_node < 1) return d;
    return node_of(d) * devices_per_node + (d % devices_per_node) % cores_per_node;
  }
  int node_of(int device) const { return device / devices_per_node; }
  // The link between two devices (intra-node when they share a node).
  const LinkSpec& link(int a, int b) const {
    return node_of(a) == node_of(b) ? intra_node : inter_node;
  }
  // The compute-sharing group of a device (-1: it shares with nobody): its core's group of
  // core_sharing cores, or its core where several devices take turns on one.
  int sharing_group(int d) const {
    if (device.core_sharing < 2) return cores_per_node > 0 ? core_of(d) : -1;
    return node_of(d) * devices_per_node + (core_of(d) % devices_per_node) / device.core_sharing;
  }
  // The physical unit a device is part of (what a price per GPU-hour counts): its sharing group
  // where devices share compute (stream sets of one GPU, hyper-threads of one core), else its core.
  int unit_of(int d) const { return device.core_sharing < 2 ? core_of(d) : sharing_group(d); }
  // The memory a device draws on: its unit's where the group shares memory, else its own.
  int memory_of(int d) const { return device.shares_memory ? unit_of(d) : d; }
};

// Device and link types by name, and the folder clusters are looked up in.
class Catalog {
 public:
  // Loads <dir>/devices.json and <dir>/links.json.
  static Catalog load(const std::string& dir);
  // The folder given by PIPETWIN_DATA (or the build's data folder) + "/hardware".
  static std::string default_dir();

  const DeviceSpec& device(const std::string& name, const std::string& origin) const;
  const LinkSpec& link(const std::string& name, const std::string& origin) const;
  const DeviceSpec* find_device(const std::string& name) const;
  const std::map<std::string, DeviceSpec>& devices() const { return devices_; }
  const std::map<std::string, LinkSpec>& links() const { return links_; }
  const std::string& dir() const { return dir_; }

  // Resolves a cluster argument: a path to a cluster file, or the name of one in <dir>/clusters.
  std::string cluster_path(const std::string& name_or_path) const;
  std::vector<std::string> cluster_names() const;

 private:
  std::string dir_;
  std::map<std::string, DeviceSpec> devices_;
  std::map<std::string, LinkSpec> links_;
};

DeviceSpec device_from_json(const JsonView& j);
LinkSpec link_from_json(const JsonView& j);
Json device_to_json(const DeviceSpec& d);
Json link_to_json(const LinkSpec& l);

// A cluster document; named device/link types are resolved through `catalog`.
Cluster cluster_from_json(const JsonView& doc, const Catalog& catalog);
// Fully resolved (inline device and links), so a plan carrying it is self-contained.
Json cluster_to_json(const Cluster& cluster);
Cluster load_cluster(const std::string& name_or_path, const Catalog& catalog);

}  // namespace pipetwin
