// Small fixtures shared by the test suites: a per-test temp folder (and a gtest fixture that
// holds one), file helpers, the message of an expected InputError, synthetic profiles and a
// two-level cluster. Not thread-safe: one test's thread uses them.
#pragma once

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/error.hpp"
#include "profiles/model_spec.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "profiles/synthetic.hpp"

namespace pipetwin::test {

// Removes `path` and everything under it, quietly (a test's scratch folder). POSIX nftw, not
// std::filesystem::remove_all: PyTorch 2.x's libtorch.so exports its own copy of remove_all, which
// a binary linked against it calls instead of libstdc++'s and which crashes (seen with the 2.11
// wheel on the GPU machine). Write bits are restored first, for tests that remove them.
inline void remove_tree(const std::filesystem::path& path) {
  ::chmod(path.c_str(), 0700);
  ::nftw(  // folders first, so that their entries can be removed
      path.c_str(),
      [](const char* p, const struct stat*, int type, struct FTW*) {
        if (type == FTW_D || type == FTW_DNR) ::chmod(p, 0700);
        return 0;
      },
      16, FTW_PHYS);
  ::nftw(  // then everything, deepest first
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p), 0; }, 16,
      FTW_DEPTH | FTW_PHYS);
}

// <temp>/pipetwin-tests/<suite>.<test>.<pid> (<temp>: TMPDIR or /tmp), created empty and removed
// when done; the suite, test and pid keep it apart from every other test, also under ctest -j.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "misc";
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = std::filesystem::temp_directory_path() / "pipetwin-tests" /
            (name + "." + std::to_string(::getpid()));
    remove_tree(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { remove_tree(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A gtest fixture whose every test has its own empty folder `dir_` (a TempDir, made before SetUp
// and removed after TearDown).
class TempDirTest : public ::testing::Test {
 protected:
  TempDir temp_;
  const std::filesystem::path dir_ = temp_.path();
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs `f` and returns the message of the InputError it throws; records a failure (and returns
// "") when it throws nothing or something else.
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return "";
}

inline Profile synthetic(const std::string& spec) {
  return synthetic_profile(ModelSpec::parse(spec, "test"));
}

// `nodes` x `per_node` devices with 1 TB of memory; intra- and inter-node links as given.
inline Cluster two_level_cluster(int nodes, int per_node, double intra_bw, double intra_lat,
                                 double inter_bw, double inter_lat) {
  Cluster c;
  c.name = "test-cluster";
  c.device.name = "test-gpu";
  c.device.memory_bytes = 1e12;
  c.device.memory_bandwidth = 1e12;
  c.device.peak_flops["float32"] = 1e14;
  c.nodes = nodes;
  c.devices_per_node = per_node;
  c.intra_node = {"intra", "", intra_bw, intra_lat};
  c.inter_node = {"inter", "", inter_bw, inter_lat};
  return c;
}

inline std::string source_dir() {
  return PIPETWIN_SOURCE_DIR;
}

// A schedule's shape: K stages, M micro-batches, N iterations, dp replicas.
inline PipelineShape pipeline_shape(int K, int M, int N = 1, int dp = 1,
                                    Checkpoint ck = Checkpoint::kNone) {
  PipelineShape s;
  s.num_stages = K;
  s.micro_batches = M;
  s.iterations = N;
  s.replicas = dp;
  s.checkpoint = ck;
  return s;
}

// A random chain of L synthetic layers in which every byte term the memory walk reads (input,
// parameters, optimizer state, outputs, saved activations, workspaces) is non-zero somewhere.
inline Profile random_chain(std::mt19937& rng, int L) {
  std::uniform_real_distribution<double> kb(1, 64), coin(0, 1);
  Profile p = synthetic(fmt::format("uniform:layers={},act_kb=8", L));
  p.input_bytes_per_sample = kb(rng) * 1024;
  for (auto& layer : p.layers) {
    layer.param_bytes = kb(rng) * 1024 * 16;
    layer.optimizer_bytes = coin(rng) < 0.5 ? layer.param_bytes : 0;
    layer.output_bytes_per_sample = kb(rng) * 1024;
    layer.saved_bytes_per_sample = kb(rng) * 1024;
    layer.forward_workspace_bytes_per_sample = coin(rng) < 0.5 ? kb(rng) * 1024 : 0;
    layer.backward_workspace_bytes_per_sample = coin(rng) < 0.5 ? kb(rng) * 1024 : 0;
  }
  p.edges.clear();
  for (int i = 0; i + 1 < L; ++i) {
    p.edges.push_back({i, i + 1, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
  }
  return p;
}

// pipeline_shape() on `devices` devices with the stages placed as `schedule` needs (two chunks
// per device for the V shapes, core/schedule/virtual_stages.hpp).
inline PipelineShape shape_for(const std::string& schedule, int devices, int M, int N = 1,
                               int dp = 1, Checkpoint ck = Checkpoint::kNone) {
  return lay_out_stages(schedule, pipeline_shape(devices, M, N, dp, ck), devices,
                        default_virtual_stages(schedule));
}

// Places the stages of `shape` (its num_stages, edges, ...) as `schedule` needs, on num_stages / v
// devices; false when the schedule cannot run it at all (schedule_refusal), which a test looping
// over every schedule skips.
inline bool place_for(const std::string& schedule, PipelineShape& shape) {
  const int v = default_virtual_stages(schedule);
  if (shape.num_stages % v != 0) return false;
  if (stage_layout_of(schedule) != StageLayout::kOnePerDevice) {
    shape.stage_device =
        virtual_stage_layout(stage_layout_of(schedule), shape.num_stages / v, v, schedule);
    shape.devices_per_replica = shape.num_stages / v;
  }
  return schedule_refusal(schedule, shape).empty();
}

}  // namespace pipetwin::test
