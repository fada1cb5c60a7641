#include "core/cluster.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"

#ifndef PIPETWIN_DATA_DIR
#define PIPETWIN_DATA_DIR "."
#endif

namespace pipetwin {

namespace fs = std::filesystem;

double DeviceSpec::flops(const std::string& dtype) const {
  auto it = peak_flops.find(dtype);
  if (it != peak_flops.end()) return it->second;
  it = peak_flops.find("float32");
  return it != peak_flops.end() ? it->second : 0;
}

DeviceSpec device_from_json(const JsonView& j) {
  j.allow_only({"name", "kind", "description", "memory_bytes", "memory_bandwidth", "peak_flops",
                "source", "core_sharing", "shares_memory", "serial_backward"});
  DeviceSpec d;
  d.name = j.string("name");
  d.kind = j.string_or("kind", "gpu");
  if (d.kind != "gpu" && d.kind != "cpu") {
    j.at("kind").fail(fmt::format("expected \"gpu\" or \"cpu\", got \"{}\"", d.kind));
  }
  d.description = j.string_or("description", "");
  d.memory_bytes = j.positive("memory_bytes");
  d.memory_bandwidth = j.positive("memory_bandwidth");
  const JsonView flops = j.at("peak_flops");
  for (const auto& key : flops.keys()) d.peak_flops[key] = flops.at(key).as_positive();
  if (d.peak_flops.empty()) flops.fail("needs at least one dtype");
  d.source = j.string_or("source", "");
  d.core_sharing = j.int32_or("core_sharing", 0);
  if (d.core_sharing < 0) j.at("core_sharing").fail("must not be negative");
  d.shares_memory = j.bool_or("shares_memory", false);
  if (d.shares_memory && d.core_sharing < 2)
    j.at("shares_memory").fail("needs core_sharing of 2 or more (the devices that share it)");
  d.serial_backward = j.bool_or("serial_backward", false);
  if (d.serial_backward && d.core_sharing < 2)
    j.at("serial_backward").fail("needs core_sharing of 2 or more (the devices that share it)");
  return d;
}

LinkSpec link_from_json(const JsonView& j) {
  j.allow_only({"name", "description", "bandwidth", "latency"});
  LinkSpec l;
  l.name = j.string("name");
  l.description = j.string_or("description", "");
  l.bandwidth = j.positive("bandwidth");
  l.latency = j.nonneg("latency");
  return l;
}

Json device_to_json(const DeviceSpec& d) {
  Json j;
  j["name"] = d.name;
  j["kind"] = d.kind;
  if (!d.description.empty()) j["description"] = d.description;
  j["memory_bytes"] = d.memory_bytes;
  j["memory_bandwidth"] = d.memory_bandwidth;
  Json flops = Json::object();
  for (const auto& [k, v] : d.peak_flops) flops[k] = v;
  j["peak_flops"] = flops;
  if (!d.source.empty()) j["source"] = d.source;
  if (d.core_sharing > 1) j["core_sharing"] = d.core_sharing;
  if (d.shares_memory) j["shares_memory"] = true;
  if (d.serial_backward) j["serial_backward"] = true;
  return j;
}

Json link_to_json(const LinkSpec& l) {
  Json j;
  j["name"] = l.name;
  if (!l.description.empty()) j["description"] = l.description;
  j["bandwidth"] = l.bandwidth;
  j["latency"] = l.latency;
  return j;
}

std::string Catalog::default_dir() {
  if (const char* env = std::getenv("PIPETWIN_DATA"); env && *env) {
    return (fs::path(env) / "hardware").string();
  }
  return (fs::path(PIPETWIN_DATA_DIR) / "hardware").string();
}

namespace {

// <dir>/<kind>s.json ({"format": "pipetwin.<kind>s", "version": 1, "<kind>s": [...]}) read into
// `out` by name, each entry through `from_json`; a name given twice is an InputError naming it.
template <class Spec>
void load_specs(const std::string& dir, const std::string& kind, Spec (*from_json)(const JsonView&),
                std::map<std::string, Spec>& out) {
  const std::string path = (fs::path(dir) / (kind + "s.json")).string();
  const Json doc = load_json_file(path);
  const JsonView v(doc, path);
  v.check_format("pipetwin." + kind + "s", 1);
  for (const auto& j : v.at(kind + "s").items()) {
    Spec spec = from_json(j);
    if (out.count(spec.name))
      j.at("name").fail(fmt::format("duplicate {} \"{}\"", kind, spec.name));
    out[spec.name] = std::move(spec);
  }
}

// The entry `name` of `specs`, read from <dir>/<kind>s.json; an InputError naming `origin` and
// where the name was looked for otherwise.
template <class Spec>
const Spec& find_spec(const std::map<std::string, Spec>& specs, const std::string& name,
                      const std::string& origin, const std::string& kind, const std::string& dir) {
  auto it = specs.find(name);
  if (it == specs.end()) {
    const std::string where =
        dir.empty() ? "no catalog here: define it inline" : "not in " + dir + "/" + kind + "s.json";
    throw InputError(fmt::format("{}: unknown {} \"{}\" ({})", origin, kind, name, where));
  }
  return it->second;
}

}  // namespace

Catalog Catalog::load(const std::string& dir) {
  Catalog c;
  c.dir_ = dir;
  load_specs(dir, "device", device_from_json, c.devices_);
  load_specs(dir, "link", link_from_json, c.links_);
  return c;
}

const DeviceSpec* Catalog::find_device(const std::string& name) const {
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : &it->second;
}

const DeviceSpec& Catalog::device(const std::string& name, const std::string& origin) const {
  return find_spec(devices_, name, origin, "device", dir_);
}

const LinkSpec& Catalog::link(const std::string& name, const std::string& origin) const {
  return find_spec(links_, name, origin, "link", dir_);
}

std::string Catalog::cluster_path(const std::string& name_or_path) const {
  if (fs::exists(name_or_path)) return name_or_path;
  const fs::path named = fs::path(dir_) / "clusters" / (name_or_path + ".json");
  if (!dir_.empty() && fs::exists(named)) return named.string();
  throw InputError(fmt::format("--cluster: \"{}\" is neither a file nor a cluster in {}/clusters",
                               name_or_path, dir_));
}

std::vector<std::string> Catalog::cluster_names() const {
  std::vector<std::string> out;
  const fs::path dir = fs::path(dir_) / "clusters";
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Cluster cluster_from_json(const JsonView& doc, const Catalog& catalog) {
  doc.check_format("pipetwin.cluster", 1);
  doc.allow_only({"format", "version", "name", "description", "device", "nodes", "devices_per_node",
                  "intra_node_link", "inter_node_link", "relative_speed", "topology",
                  "cores_per_node"});
  Cluster c;
  c.name = doc.string("name");
  const JsonView dev = doc.at("device");
  c.device = dev.raw().is_string()
                 ? catalog.device(dev.as_string(), doc.origin() + ": " + dev.path())
                 : device_from_json(dev);
  const int64_t nodes = doc.integer_or("nodes", 1);
  const int64_t per_node = doc.integer("devices_per_node");
  if (nodes < 1) doc.at("nodes").fail(fmt::format("must be at least 1 ({} given)", nodes));
  if (per_node < 1) {
    doc.at("devices_per_node").fail(fmt::format("must be at least 1 ({} given)", per_node));
  }
  // Device numbers are ints: nodes x devices_per_node must fit one.
  constexpr int64_t kMaxDevices = std::numeric_limits<int>::max();
  if (nodes > kMaxDevices) doc.at("nodes").fail(fmt::format("too many nodes ({} given)", nodes));
  if (per_node > kMaxDevices / nodes) {
    doc.at("devices_per_node")
        .fail(fmt::format("{} nodes x {} devices is more than {} devices", nodes, per_node,
                          kMaxDevices));
  }
  c.nodes = static_cast<int>(nodes);
  c.devices_per_node = static_cast<int>(per_node);
  auto read_link = [&](const char* key) {
    const JsonView l = doc.at(key);
    return l.raw().is_string() ? catalog.link(l.as_string(), doc.origin() + ": " + l.path())
                               : link_from_json(l);
  };
  c.intra_node = read_link("intra_node_link");
  if (c.nodes > 1 || doc.has("inter_node_link")) {
    c.inter_node = read_link("inter_node_link");
  } else {
    c.inter_node = c.intra_node;
  }
  c.relative_speed = doc.nonneg_or("relative_speed", 0);
  const int64_t cores = doc.integer_or("cores_per_node", 0);
  if (doc.has("cores_per_node") && (cores < 1 || cores > c.devices_per_node)) {
    doc.at("cores_per_node")
        .fail(fmt::format("must be between 1 and devices_per_node ({} given, {} devices)", cores,
                          c.devices_per_node));
  }
  c.cores_per_node = cores < c.devices_per_node ? static_cast<int>(cores) : 0;
  if (doc.has("topology")) {
    c.topology = topology_from_json(doc.at("topology"), c.nodes, c.devices_per_node);
  }
  return c;
}

Json cluster_to_json(const Cluster& c) {
  Json j = json_document("pipetwin.cluster", 1);
  j["name"] = c.name;
  j["device"] = device_to_json(c.device);
  j["nodes"] = c.nodes;
  j["devices_per_node"] = c.devices_per_node;
  j["intra_node_link"] = link_to_json(c.intra_node);
  j["inter_node_link"] = link_to_json(c.inter_node);
  if (c.relative_speed > 0) j["relative_speed"] = c.relative_speed;
  if (c.cores_per_node > 0) j["cores_per_node"] = c.cores_per_node;
  if (c.topology) j["topology"] = topology_to_json(*c.topology);
  return j;
}

Cluster load_cluster(const std::string& name_or_path, const Catalog& catalog) {
  const std::string path = catalog.cluster_path(name_or_path);
  const Json doc = load_json_file(path);
  return cluster_from_json(JsonView(doc, path), catalog);
}

}  // namespace pipetwin
