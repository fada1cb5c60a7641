// A hand-checkable priced catalog for the capacity tests (studies/capacity.hpp): one device type
// of 1 GiB, a link of 1 ms latency (so data parallelism and pipelining cost something), and
// clusters of one device at speed 1, 2 and 4, two and four devices at speed 1, and two stream
// sets of one GPU (they share its compute and its 1 GiB, sim/memory_pools.hpp).
// Not thread-safe: one test's thread uses it.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/cluster.hpp"
#include "studies/capacity.hpp"
#include "test_util.hpp"

namespace pipetwin::sim::test_capacity {

inline std::string cluster_json(const std::string& name, int devices, double speed) {
  return fmt::format(
      R"({{"format": "pipetwin.cluster", "version": 1, "name": "{}", "device": "test-gpu",
    "devices_per_node": {}, "intra_node_link": "slow-start", "relative_speed": {}}})",
      name, devices, speed);
}

struct Catalogue {
  explicit Catalogue(const pipetwin::test::TempDir& dir) : root(dir.file("hw")) {
    using pipetwin::test::write_text;
    std::filesystem::create_directories(root + "/clusters");
    write_text(root + "/devices.json", R"({"format": "pipetwin.devices", "version": 1, "devices": [
      {"name": "test-gpu", "memory_bytes": 1073741824, "memory_bandwidth": 1e12,
       "peak_flops": {"float32": 1e14}}]})");
    write_text(root + "/links.json", R"({"format": "pipetwin.links", "version": 1, "links": [
      {"name": "slow-start", "bandwidth": 1e12, "latency": 1e-3}]})");
    write_text(root + "/clusters/slow1.json", cluster_json("slow1", 1, 1));
    write_text(root + "/clusters/fast2.json", cluster_json("fast2", 1, 2));
    write_text(root + "/clusters/fast4.json", cluster_json("fast4", 1, 4));
    write_text(root + "/clusters/pair.json", cluster_json("pair", 2, 1));
    write_text(root + "/clusters/quad.json", cluster_json("quad", 4, 1));
    write_text(root + "/clusters/streams.json", R"({"format": "pipetwin.cluster", "version": 1,
      "name": "streams", "devices_per_node": 2, "intra_node_link": "slow-start",
      "device": {"name": "test-gpu", "memory_bytes": 1073741824, "memory_bandwidth": 1e12,
                 "peak_flops": {"float32": 1e14}, "core_sharing": 2, "shares_memory": true}})");
    write_text(root + "/prices.json", R"({"format": "pipetwin.prices", "version": 1,
      "note": "example prices, edit them", "prices": [
      {"cluster": "slow1", "price_per_gpu_hour": 2}, {"cluster": "fast2", "price_per_gpu_hour": 5},
      {"cluster": "fast4", "price_per_gpu_hour": 12}, {"cluster": "pair", "price_per_gpu_hour": 2},
      {"cluster": "quad", "price_per_gpu_hour": 2}, {"cluster": "streams", "price_per_gpu_hour": 2}]})");
    catalog = Catalog::load(root);
  }
  // Batch 8, 8000 samples (1000 optimizer steps per epoch), two threads.
  CapacityRequest request(const std::string& model, std::vector<std::string> clusters) const {
    CapacityRequest r;
    r.model = model;
    r.catalog = &catalog;
    r.prices = load_prices(default_prices_path(catalog), catalog);
    r.clusters = std::move(clusters);
    r.batch = 8;
    r.samples = 8000;
    r.jobs = 2;
    return r;
  }
  std::string root;
  Catalog catalog;
};

}  // namespace pipetwin::sim::test_capacity
