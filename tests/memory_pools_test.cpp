// Memory pools (core/memory_pools.hpp): which schedule devices share one physical memory, and the
// GPUs a plan is charged for.
#include <gtest/gtest.h>

#include "core/memory_pools.hpp"

namespace pipetwin {
namespace {

constexpr double kGiBytes = 1024.0 * 1024 * 1024;

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

}  // namespace
}  // namespace pipetwin
