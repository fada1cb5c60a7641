// core/cluster.hpp: the shipped hardware catalog and clusters (with the papers' figures), links
// between devices, inline definitions, and errors.
#include "core/cluster.hpp"
#include "sim/memory_pools.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string hardware_dir() {
  return test::source_dir() + "/hardware";
}

const Catalog& shipped() {
  static const Catalog catalog = Catalog::load(hardware_dir());
  return catalog;
}

// A single-node cluster document naming catalog entries; tests change one field at a time.
Json named_doc() {
  return Json::parse(R"({"format": "pipetwin.cluster", "version": 1, "name": "mine",
                         "device": "v100-32gb", "nodes": 1, "devices_per_node": 4,
                         "intra_node_link": "nvlink2-v100"})");
}

Json inline_device() {
  return Json::parse(R"({"name": "npu", "kind": "gpu", "memory_bytes": 8e9,
                         "memory_bandwidth": 1e12, "peak_flops": {"float32": 2e13,
                         "bfloat16": 8e13}})");
}

Json inline_link(double bw, double lat) {
  return Json{{"name", "wire"}, {"bandwidth", bw}, {"latency", lat}};
}

std::string cluster_error(const Json& doc, const Catalog& catalog = shipped()) {
  return input_error([&] { cluster_from_json(JsonView(doc, "c.json"), catalog); });
}

TEST(Catalog, ShippedCatalogLoads) {
  const Catalog& c = shipped();
  for (const char* d :
       {"quadro-rtx-5000", "rtx-2080-ti", "tesla-p40", "v100-16gb", "v100-32gb", "a100-40gb",
        "a100-80gb", "h100-sxm", "h200-sxm", "l4", "rtx-4090", "cpu-core"}) {
    EXPECT_NE(c.find_device(d), nullptr) << d;
  }
  for (const char* l : {"pcie3-x16", "pcie4-x16", "nvlink2-v100", "nvlink3-a100", "nvlink4-h100",
                        "infiniband-5GBps", "infiniband-hdr", "shared-memory"}) {
    EXPECT_NO_THROW(c.link(l, "test")) << l;
  }
  EXPECT_EQ(c.dir(), hardware_dir());
  for (const auto& [name, d] : c.devices()) {
    EXPECT_EQ(d.name, name);
    EXPECT_GT(d.memory_bytes, 0) << name;
    EXPECT_GT(d.flops("float32"), 0) << name;
  }
}

TEST(Catalog, ThePapersGpuMemories) {
  const Catalog& c = shipped();
  // PipeTransformer: Quadro RTX 5000 16 GB; FTPipe: RTX 2080 Ti 11 GB; torchgpipe: P40 with
  // 22 GiB usable; V100 16 and 32 GB.
  EXPECT_EQ(c.device("quadro-rtx-5000", "t").memory_bytes, 16 * kGiB);
  EXPECT_EQ(c.device("rtx-2080-ti", "t").memory_bytes, 11 * kGiB);
  EXPECT_EQ(c.device("tesla-p40", "t").memory_bytes, 22 * kGiB);
  EXPECT_EQ(c.device("v100-16gb", "t").memory_bytes, 16 * kGiB);
  EXPECT_EQ(c.device("v100-32gb", "t").memory_bytes, 32 * kGiB);
}

TEST(Catalog, ThePapersLinks) {
  const Catalog& c = shipped();
  EXPECT_EQ(c.link("pcie3-x16", "t").bandwidth, 15.754e9);    // PCIe 3.0 x16, 15.754 GB/s
  EXPECT_EQ(c.link("infiniband-5GBps", "t").bandwidth, 5e9);  // PipeTransformer's InfiniBand
}

TEST(Catalog, FlopsFallBackToFloat32) {
  DeviceSpec d;
  d.peak_flops["float32"] = 1e13;
  d.peak_flops["float16"] = 8e13;
  EXPECT_EQ(d.flops("float16"), 8e13);
  EXPECT_EQ(d.flops("bfloat16"), 1e13);
  EXPECT_EQ(DeviceSpec{}.flops("float32"), 0);
}

TEST(Catalog, EveryShippedClusterLoads) {
  const Catalog& c = shipped();
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(hardware_dir() + "/clusters")) {
    if (e.path().extension() == ".json") ++files;
  }
  const auto names = c.cluster_names();
  EXPECT_EQ(names.size(), files);
  EXPECT_GE(names.size(), 10u);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    Cluster cl;
    ASSERT_NO_THROW(cl = load_cluster(name, c));
    // `--cluster NAME` finds the file whose own name is NAME.
    EXPECT_EQ(cl.name, name);
    EXPECT_GE(cl.num_devices(), 1);
    EXPECT_GT(cl.intra_node.bandwidth, 0);
    EXPECT_GT(cl.inter_node.bandwidth, 0);
    // A loaded cluster written out is self-contained: it reloads without any catalog.
    const Json doc = cluster_to_json(cl);
    const Cluster again = cluster_from_json(JsonView(doc, "mem"), Catalog());
    EXPECT_EQ(again.device.memory_bytes, cl.device.memory_bytes);
    EXPECT_EQ(again.intra_node.bandwidth, cl.intra_node.bandwidth);
    EXPECT_EQ(again.inter_node.latency, cl.inter_node.latency);
    EXPECT_EQ(again.num_devices(), cl.num_devices());
  }
}

TEST(Cluster, PipeTransformerClusterAndItsLinks) {
  const Cluster c = load_cluster("pipetransformer-2x8-rtx5000", shipped());
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.devices_per_node, 8);
  EXPECT_EQ(c.num_devices(), 16);
  EXPECT_EQ(c.device.name, "quadro-rtx-5000");
  EXPECT_EQ(c.device.memory_bytes, 16 * kGiB);
  EXPECT_EQ(c.intra_node.bandwidth, 15.754e9);
  EXPECT_EQ(c.inter_node.bandwidth, 5e9);
  // Devices 0..7 share node 0, 8..15 node 1.
  EXPECT_EQ(c.node_of(7), 0);
  EXPECT_EQ(c.node_of(8), 1);
  EXPECT_EQ(&c.link(0, 7), &c.intra_node);
  EXPECT_EQ(&c.link(8, 15), &c.intra_node);
  EXPECT_EQ(&c.link(7, 8), &c.inter_node);
  EXPECT_EQ(&c.link(15, 0), &c.inter_node);
}

TEST(Cluster, OtherPaperClusters) {
  const Cluster ftpipe = load_cluster("ftpipe-8x-2080ti", shipped());
  EXPECT_EQ(ftpipe.num_devices(), 8);
  EXPECT_EQ(ftpipe.device.memory_bytes, 11 * kGiB);
  EXPECT_EQ(ftpipe.intra_node.bandwidth, 15.754e9);
  const Cluster gpipe = load_cluster("torchgpipe-8x-p40", shipped());
  EXPECT_EQ(gpipe.num_devices(), 8);
  EXPECT_EQ(gpipe.device.memory_bytes, 22 * kGiB);
  // A single-node cluster without an inter-node link uses its intra-node link everywhere.
  EXPECT_EQ(gpipe.inter_node.bandwidth, gpipe.intra_node.bandwidth);
  EXPECT_EQ(gpipe.inter_node.latency, gpipe.intra_node.latency);
}

TEST(Cluster, OneGpuHostsFourStreamSets) {
  // h100-1gpu: K <= 4 stages on one H100 (torchgpipe's stream sets, `run --device cuda`): four
  // schedule devices in one compute-sharing group drawing on the GPU's one memory (one memory
  // pool, one GPU to pay for), the H100's figures otherwise.
  const Cluster c = load_cluster("h100-1gpu", shipped());
  ASSERT_EQ(c.num_devices(), 4);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(c.sharing_group(d), 0) << d;
  const DeviceSpec& h100 = shipped().device("h100-sxm", "test");
  EXPECT_EQ(c.device.name, h100.name);
  EXPECT_EQ(c.device.kind, "gpu");
  EXPECT_EQ(c.device.memory_bytes, h100.memory_bytes);
  EXPECT_TRUE(c.device.shares_memory);
  EXPECT_TRUE(c.device.serial_backward);  // one autograd thread for the GPU
  for (int d = 0; d < 4; ++d) EXPECT_EQ(c.memory_of(d), c.memory_of(0)) << d;
  EXPECT_EQ(physical_units(c, {0, 1, 2, 3}), 1);
  EXPECT_EQ(c.device.memory_bandwidth, h100.memory_bandwidth);
  EXPECT_EQ(c.device.peak_flops, h100.peak_flops);
  EXPECT_EQ(c.intra_node.name, "same-gpu");
  EXPECT_GT(c.intra_node.bandwidth, 1e12);
}

TEST(Cluster, MoreDevicesThanCoresTakeTurns) {
  // experiments/local-cpu-4.json: four stages on two vCPUs, stage s on vCPU s mod 2 as the
  // executor pins it. Devices 0 and 2, 1 and 3 share a core; the two cores share caches
  // (cpu-core's core_sharing 2), so all four are one contention group and one physical unit.
  const Cluster c = load_cluster(test::source_dir() + "/experiments/local-cpu-4.json", shipped());
  ASSERT_EQ(c.cores_per_node, 2);
  EXPECT_EQ(c.core_of(0), c.core_of(2));
  EXPECT_EQ(c.core_of(1), c.core_of(3));
  EXPECT_NE(c.core_of(0), c.core_of(1));
  for (int d = 0; d < 4; ++d) EXPECT_EQ(c.sharing_group(d), c.sharing_group(0)) << d;
  EXPECT_EQ(physical_units(c, {0, 1, 2, 3}), 1);
  // Without core sharing, each core is its own group; the field round-trips.
  Json doc = named_doc();
  doc["devices_per_node"] = 6;
  doc["cores_per_node"] = 4;
  const Cluster v = cluster_from_json(JsonView(doc, "c.json"), shipped());
  EXPECT_EQ(v.core_of(5), 1);
  EXPECT_EQ(v.sharing_group(5), v.sharing_group(1));
  EXPECT_NE(v.sharing_group(2), v.sharing_group(1));
  EXPECT_EQ(cluster_from_json(JsonView(cluster_to_json(v), "back"), shipped()).cores_per_node, 4);
  // As many cores as devices is no sharing at all.
  doc["cores_per_node"] = 6;
  EXPECT_EQ(cluster_from_json(JsonView(doc, "c.json"), shipped()).sharing_group(5), -1);
}

TEST(Cluster, LoadsByPathToo) {
  const std::string path = hardware_dir() + "/clusters/dgx1-v100.json";
  EXPECT_EQ(shipped().cluster_path(path), path);
  EXPECT_EQ(load_cluster(path, shipped()).device.memory_bytes, 16 * kGiB);
  EXPECT_EQ(input_error([] { shipped().cluster_path("no-such-cluster"); }),
            "--cluster: \"no-such-cluster\" is neither a file nor a cluster in " + hardware_dir() +
                "/clusters");
}

TEST(Cluster, InlineDeviceAndLinks) {
  Json doc = named_doc();
  doc["device"] = inline_device();
  doc["nodes"] = 2;
  doc["devices_per_node"] = 2;
  doc["intra_node_link"] = inline_link(1e11, 1e-6);
  doc["inter_node_link"] = inline_link(1e10, 2e-5);
  doc["relative_speed"] = 1.5;
  const Cluster c = cluster_from_json(JsonView(doc, "c.json"), Catalog());
  EXPECT_EQ(c.device.name, "npu");
  EXPECT_EQ(c.device.memory_bytes, 8e9);
  EXPECT_EQ(c.device.flops("bfloat16"), 8e13);
  EXPECT_EQ(c.intra_node.bandwidth, 1e11);
  EXPECT_EQ(c.inter_node.latency, 2e-5);
  EXPECT_EQ(c.relative_speed, 1.5);
  EXPECT_EQ(c.link(0, 1).bandwidth, 1e11);
  EXPECT_EQ(c.link(1, 2).bandwidth, 1e10);
  // Round trip through JSON keeps everything.
  const Json out = cluster_to_json(c);
  const Cluster back = cluster_from_json(JsonView(out, "out"), Catalog());
  EXPECT_EQ(back.name, "mine");
  EXPECT_EQ(back.device.peak_flops, c.device.peak_flops);
  EXPECT_EQ(back.device.memory_bandwidth, c.device.memory_bandwidth);
  EXPECT_EQ(back.nodes, 2);
  EXPECT_EQ(back.devices_per_node, 2);
  EXPECT_EQ(back.intra_node.latency, 1e-6);
  EXPECT_EQ(back.inter_node.bandwidth, 1e10);
  EXPECT_EQ(back.relative_speed, 1.5);
}

TEST(ClusterErrors, UnknownNames) {
  Json doc = named_doc();
  doc["device"] = "gtx-9999";
  EXPECT_EQ(cluster_error(doc), "c.json: device: unknown device \"gtx-9999\" (not in " +
                                    hardware_dir() + "/devices.json)");
  doc = named_doc();
  doc["intra_node_link"] = "carrier-pigeon";
  EXPECT_EQ(cluster_error(doc),
            "c.json: intra_node_link: unknown link \"carrier-pigeon\" (not in " + hardware_dir() +
                "/links.json)");
}

TEST(ClusterErrors, SerialBackwardNeedsASharingGroup) {
  Json doc = named_doc();
  doc["device"] = inline_device();
  doc["device"]["serial_backward"] = true;
  EXPECT_EQ(cluster_error(doc),
            "c.json: device.serial_backward: needs core_sharing of 2 or more (the devices that "
            "share it)");
  doc["device"]["core_sharing"] = 2;
  EXPECT_TRUE(cluster_from_json(JsonView(doc, "c.json"), shipped()).device.serial_backward);
}

TEST(ClusterErrors, NamedDeviceWithoutACatalog) {
  // Plans carry their cluster inline and are read without a catalog.
  EXPECT_EQ(cluster_error(named_doc(), Catalog()),
            "c.json: device: unknown device \"v100-32gb\" (no catalog here: define it inline)");
}

TEST(ClusterErrors, BadFields) {
  Json doc = named_doc();
  doc["nodes"] = 0;
  EXPECT_EQ(cluster_error(doc), "c.json: nodes: must be at least 1 (0 given)");
  doc = named_doc();
  doc["devices_per_node"] = -2;
  EXPECT_EQ(cluster_error(doc), "c.json: devices_per_node: must be at least 1 (-2 given)");
  doc.erase("devices_per_node");
  EXPECT_EQ(cluster_error(doc), "c.json: devices_per_node: missing required field");
  doc = named_doc();
  doc["devices_per_node"] = 4294967300LL;  // 2^32 + 4 must not wrap to 4
  EXPECT_EQ(cluster_error(doc),
            "c.json: devices_per_node: 1 nodes x 4294967300 devices is more "
            "than 2147483647 devices");
  doc["nodes"] = 65536;
  doc["devices_per_node"] = 65536;  // 2^32 devices in all
  EXPECT_THAT(cluster_error(doc), StartsWith("c.json: devices_per_node: 65536 nodes x 65536 "));
  doc = named_doc();
  doc["nodes"] = 2;  // more than one node needs an inter-node link
  EXPECT_EQ(cluster_error(doc), "c.json: inter_node_link: missing required field");
  doc = named_doc();
  doc["racks"] = 3;
  EXPECT_THAT(cluster_error(doc), StartsWith("c.json: racks: unknown field (known: format, "));
  doc = named_doc();
  doc["format"] = "pipetwin.devices";
  EXPECT_EQ(cluster_error(doc),
            "c.json: format: expected \"pipetwin.cluster\", got \"pipetwin.devices\"");
  doc = named_doc();
  doc["cores_per_node"] = 5;
  EXPECT_EQ(cluster_error(doc),
            "c.json: cores_per_node: must be between 1 and devices_per_node (5 given, 4 devices)");
  doc = named_doc();
  doc["relative_speed"] = -1;
  EXPECT_EQ(cluster_error(doc), "c.json: relative_speed: expected a non-negative number, got -1");
}

TEST(ClusterErrors, BadInlineDevice) {
  struct Case {
    std::string key;
    Json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"memory_bytes", -1, "c.json: device.memory_bytes: expected a positive number, got -1"},
      {"memory_bandwidth", 0, "c.json: device.memory_bandwidth: expected a positive number, got 0"},
      {"kind", "tpu", "c.json: device.kind: expected \"gpu\" or \"cpu\", got \"tpu\""},
      {"peak_flops", Json::object(), "c.json: device.peak_flops: needs at least one dtype"},
      {"peak_flops", Json{{"float32", 0}},
       "c.json: device.peak_flops.float32: expected a positive number, got 0"},
  };
  for (const auto& k : cases) {
    Json doc = named_doc();
    doc["device"] = inline_device();
    doc["device"][k.key] = k.value;
    EXPECT_EQ(cluster_error(doc, Catalog()), k.expected) << k.key;
  }
  Json doc = named_doc();
  doc["device"] = inline_device();
  doc["device"].erase("name");
  EXPECT_EQ(cluster_error(doc, Catalog()), "c.json: device.name: missing required field");
}

TEST(ClusterErrors, BadInlineLink) {
  Json doc = named_doc();
  doc["intra_node_link"] = inline_link(0, 1e-6);
  EXPECT_EQ(cluster_error(doc),
            "c.json: intra_node_link.bandwidth: expected a positive number, got 0.0");
  doc["intra_node_link"] = inline_link(1e9, -1e-6);
  EXPECT_THAT(cluster_error(doc),
              StartsWith("c.json: intra_node_link.latency: expected a non-negative number"));
}

TEST(CatalogErrors, DuplicatesAndMissingFiles) {
  test::TempDir dir;
  const Json dev = inline_device();
  test::write_text(
      dir.file("devices.json"),
      Json{{"format", "pipetwin.devices"}, {"version", 1}, {"devices", {dev, dev}}}.dump());
  test::write_text(
      dir.file("links.json"),
      Json{{"format", "pipetwin.links"}, {"version", 1}, {"links", Json::array()}}.dump());
  EXPECT_EQ(input_error([&] { Catalog::load(dir.path().string()); }),
            dir.file("devices.json") + ": devices[1].name: duplicate device \"npu\"");
  test::write_text(dir.file("devices.json"),
                   Json{{"format", "pipetwin.devices"}, {"version", 1}, {"devices", {dev}}}.dump());
  const Json link = inline_link(1e9, 0);
  test::write_text(
      dir.file("links.json"),
      Json{{"format", "pipetwin.links"}, {"version", 1}, {"links", {link, link}}}.dump());
  EXPECT_EQ(input_error([&] { Catalog::load(dir.path().string()); }),
            dir.file("links.json") + ": links[1].name: duplicate link \"wire\"");
  std::filesystem::remove(dir.file("links.json"));
  EXPECT_THAT(input_error([&] { Catalog::load(dir.path().string()); }),
              StartsWith(dir.file("links.json") + ": cannot open"));
}

TEST(Catalog, DefaultDirFollowsPipetwinData) {
  const char* old = std::getenv("PIPETWIN_DATA");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("PIPETWIN_DATA", "/opt/somewhere", 1);
  EXPECT_EQ(Catalog::default_dir(), "/opt/somewhere/hardware");
  if (saved) {
    ::setenv("PIPETWIN_DATA", saved->c_str(), 1);
  } else {
    ::unsetenv("PIPETWIN_DATA");
  }
}

}  // namespace
}  // namespace pipetwin
