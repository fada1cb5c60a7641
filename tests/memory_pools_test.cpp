// Memory pools (sim/memory_pools.hpp): which schedule devices share one physical memory, the
// framework's memory on top of each (core/framework_memory.hpp), and the GPUs a plan is charged
// for.
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/memory_pools.hpp"

namespace pipetwin {
namespace {

constexpr double kGiBytes = 1024.0 * 1024 * 1024;
constexpr double kMiBytes = 1024.0 * 1024;

Cluster one_gpu_as_stream_sets(bool shares_memory) {
  Cluster c;
  c.name = "one-gpu";
  c.device.name = "gpu";
  c.device.memory_bytes = 80 * kGiBytes;
  c.device.core_sharing = 4;
  c.device.shares_memory = shares_memory;
  c.devices_per_node = 4;
  return c;
}

TEST(MemoryPools, StreamSetsOfOneGpuAddTheirPeaks) {
  const Cluster c = one_gpu_as_stream_sets(true);
  const auto pools = memory_pools(c, {0, 1}, {30 * kGiBytes, 40 * kGiBytes});
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].devices, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(pools[0].need_bytes, 70 * kGiBytes);
  EXPECT_DOUBLE_EQ(pools[0].capacity_bytes, 80 * kGiBytes);
  const auto over = memory_pools(c, {0, 1}, {50 * kGiBytes, 40 * kGiBytes});
  EXPECT_DOUBLE_EQ(tightest_pool(over)->need_bytes - tightest_pool(over)->capacity_bytes,
                   10 * kGiBytes);
  EXPECT_EQ(describe_pool(over[0], c, {0, 1}), "devices 0, 1 (gpu #0, #1, one memory)");
  EXPECT_EQ(physical_units(c, {0, 1}), 1);
  EXPECT_EQ(physical_units(c, {0, 1, 2, 3}), 1);
}

TEST(MemoryPools, DevicesWithTheirOwnMemoryArePoolsOfOne) {
  const Cluster c = one_gpu_as_stream_sets(false);
  const auto pools = memory_pools(c, {0, 1}, {50 * kGiBytes, 40 * kGiBytes});
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(tightest_pool(pools), &pools[0]);
  EXPECT_EQ(describe_pool(pools[1], c, {0, 1}), "device 1 (gpu #1)");
  // Compute is still shared: one GPU is charged.
  EXPECT_EQ(physical_units(c, {0, 1}), 1);
  Cluster gpus = c;
  gpus.device.core_sharing = 0;
  EXPECT_EQ(physical_units(gpus, {0, 1, 3}), 3);
}

TEST(MemoryPools, TwoNodesOfSharedGpusAreTwoPools) {
  Cluster c = one_gpu_as_stream_sets(true);
  c.nodes = 2;
  c.devices_per_node = 2;
  c.device.core_sharing = 2;
  const auto pools = memory_pools(c, {0, 1, 2, 3}, {1, 2, 3, 4});
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_DOUBLE_EQ(pools[0].need_bytes, 3);
  EXPECT_DOUBLE_EQ(pools[1].need_bytes, 7);
  EXPECT_EQ(physical_units(c, {0, 1, 2, 3}), 2);
}

// PyTorch 1.x-like: a 300 MiB context, cuBLAS's 8.125 MiB outside the allocator, 20% fragmented.
FrameworkMemory sample_framework() {
  FrameworkMemory fw;
  fw.device = "gpu";
  fw.stack.name = "st";
  fw.context = {300 * kMiBytes, "test"};
  fw.stack.cublas_workspace = {8.125 * kMiBytes, "test"};
  fw.stack.fragmentation = {0.2, "test"};
  return fw;
}

TEST(MemoryPools, FrameworkMemoryOncePerMemoryOnTopOfItsTensors) {
  const FrameworkMemory fw = sample_framework();
  const double fixed = 308.125 * kMiBytes;
  // Stream sets of one GPU: one process, so one context; fragmentation of the tensors' sum.
  const auto shared =
      memory_pools(one_gpu_as_stream_sets(true), {0, 1}, {30 * kGiBytes, 40 * kGiBytes}, &fw);
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_DOUBLE_EQ(shared[0].tensor_bytes, 70 * kGiBytes);
  EXPECT_DOUBLE_EQ(shared[0].need_bytes, 70 * kGiBytes / 0.8 + fixed);
  EXPECT_DOUBLE_EQ(shared[0].framework_bytes, shared[0].need_bytes - 70 * kGiBytes);
  EXPECT_EQ(shared[0].framework, "st on gpu");
  EXPECT_THAT(describe_need(shared[0]),
              ::testing::StartsWith("87.80 GiB (70.00 GiB of tensors + 17.80 GiB of framework "
                                    "memory, st on gpu:"));
  // Devices with memories of their own: a process and a context each.
  const auto own =
      memory_pools(one_gpu_as_stream_sets(false), {0, 1}, {30 * kGiBytes, 40 * kGiBytes}, &fw);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_DOUBLE_EQ(own[1].need_bytes, 40 * kGiBytes / 0.8 + fixed);
  // No framework: the tensors alone, described as before.
  const auto none = memory_pools(one_gpu_as_stream_sets(true), {0, 1}, {1 * kGiBytes, 2}, nullptr);
  EXPECT_DOUBLE_EQ(none[0].need_bytes, none[0].tensor_bytes);
  EXPECT_EQ(none[0].framework_bytes, 0);
  EXPECT_EQ(describe_need(none[0]), "1.00 GiB");
}

// The shipped hardware/frameworks.json (PIPETWIN_DATA): h100-sxm runs PyTorch 2.x, a 500 MiB
// context and cuBLAS's 32 MiB workspace in the allocator, 15% fragmented.
TEST(MemoryPools, ListedGpusCountTheShippedFrameworkCpusNothing) {
  Cluster c = one_gpu_as_stream_sets(true);
  c.device.name = "h100-sxm";
  const double fixed = 532 * kMiBytes;
  ASSERT_NE(framework_memory_of(c.device), nullptr);
  const auto pools = memory_pools(c, {0, 1}, {30 * kGiBytes, 10 * kGiBytes});
  EXPECT_DOUBLE_EQ(pools[0].need_bytes, 40 * kGiBytes / 0.85 + fixed);
  EXPECT_EQ(pools[0].framework, "pytorch-2.x-cuda12 on h100-sxm");
  // Each device's part: its own fragmentation reserve and half the fixed bytes.
  const auto parts = framework_bytes_by_device(c, {0, 1}, {30 * kGiBytes, 10 * kGiBytes});
  EXPECT_DOUBLE_EQ(parts[1], 10 * kGiBytes * 0.15 / 0.85 + fixed / 2);
  EXPECT_NEAR(parts[0] + parts[1], pools[0].framework_bytes, 1e-3);
  EXPECT_DOUBLE_EQ(tensor_capacity_bytes(c), (80 * kGiBytes - fixed) * 0.85);
  // A pool of what tensor_capacity_bytes leaves fills the memory exactly.
  EXPECT_NEAR(memory_pools(c, {0}, {tensor_capacity_bytes(c)})[0].need_bytes, 80 * kGiBytes, 1);
  // CPU devices (whatever their name) and kinds the file does not list: the tensors alone.
  for (const auto& [name, kind] : {std::pair{"h100-sxm", "cpu"}, std::pair{"gpu", "gpu"}}) {
    c.device.name = name;
    c.device.kind = kind;
    EXPECT_EQ(framework_memory_of(c.device), nullptr) << name << " " << kind;
    EXPECT_DOUBLE_EQ(memory_pools(c, {0, 1}, {30 * kGiBytes, 10 * kGiBytes})[0].need_bytes,
                     40 * kGiBytes);
    EXPECT_EQ(framework_bytes_by_device(c, {0, 1}, {1, 2}), (std::vector<double>{0, 0}));
    EXPECT_DOUBLE_EQ(tensor_capacity_bytes(c), 80 * kGiBytes);
  }
}

}  // namespace
}  // namespace pipetwin
