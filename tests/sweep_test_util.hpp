// Helpers of the sweep tests (sweep_test.cpp, sweep_schedules_test.cpp): a one-device catalog on
// free links and the sweep inputs over it.
#pragma once

#include <filesystem>
#include <string>

#include "studies/sweep/grid.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {

using test::input_error;
using test::read_text;
using test::TempDir;
using test::write_text;

inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// A catalog of one device type (1 GiB) on free links (no latency, 1 TB/s): transfers of the
// synthetic models below (no activations) cost nothing, so GPipe's closed form holds exactly.
inline std::string write_catalog(const TempDir& dir) {
  const std::string root = dir.file("hw");
  std::filesystem::create_directories(root + "/clusters");
  write_text(root + "/devices.json", R"({"format": "pipetwin.devices", "version": 1, "devices": [
    {"name": "test-gpu", "memory_bytes": 1073741824, "memory_bandwidth": 1e12,
     "peak_flops": {"float32": 1e14}}]})");
  write_text(root + "/links.json", R"({"format": "pipetwin.links", "version": 1, "links": [
    {"name": "free", "bandwidth": 1e12, "latency": 0}]})");
  write_text(root + "/clusters/ideal8.json", R"({"format": "pipetwin.cluster", "version": 1,
    "name": "ideal8", "device": "test-gpu", "devices_per_node": 8, "intra_node_link": "free"})");
  return root;
}

inline SweepInputs inputs(const std::string& catalog, const std::string& model) {
  SweepInputs in;
  in.catalog_dir = catalog;
  in.base.model = model;
  in.base.cluster = "ideal8";
  in.base.batch = 8;
  return in;
}

inline constexpr const char* kModel = "uniform:layers=4,fwd_ms=1,bwd_ms=2";
// 256 MiB of parameters per layer: parameters + gradients = 512 MiB per layer.
inline constexpr const char* kHeavy = "uniform:layers=4,fwd_ms=1,bwd_ms=2,param_kb=262144";

inline std::string field(const SweepTable& t, size_t row, const std::string& name) {
  return t.rows.at(row).at(csv_column(t.header, name, "test"));
}

inline RunOptions to(const std::string& path, int jobs = 0) {
  RunOptions o;
  o.output = path;
  o.jobs = jobs;
  return o;
}

}  // namespace pipetwin::sim
