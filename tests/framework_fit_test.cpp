// The framework's memory (core/framework_memory.hpp, hardware/frameworks.json) in the planner, the
// simulator and sweeps (sim/memory_pools.hpp): on a GPU the file lists, a plan fits when its
// tensors plus PyTorch's reserve, workspaces and CUDA context do; CPU devices count the tensors
// alone, as before.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"
#include "studies/sweep/evaluate.hpp"
#include "tests/sim_test_util.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiBytes = 1024.0 * 1024;
constexpr double kGiBytes = 1024 * kMiBytes;
// h100-sxm in the shipped frameworks.json: PyTorch 2.x, cuBLAS's 32 MiB workspace drawn through
// the allocator, a 500 MiB context, 15% of the reserved bytes fragmented.
constexpr double kH100Fixed = 32 * kMiBytes + 500 * kMiBytes;
constexpr double kH100Fragmentation = 0.15;

double h100_process(double tensors) {
  return tensors / (1 - kH100Fragmentation) + kH100Fixed;
}

// 1F1B, K = 2, M = 4; four layers that each save 1 GiB of activations and hold nothing else:
// [2, 2] (the faster split) needs 4 GiB on stage 0, [1, 3] needs 2 and 3 GiB
// (tests/partition_memory_test.cpp).
constexpr const char* kSavedOnly = "uniform:layers=4,fwd_ms=1,bwd_ms=2,saved_kb=1048576";

sim::PlanRequest request_on(const std::string& device, const std::string& kind, double gib) {
  sim::PlanRequest r;
  r.model = kSavedOnly;
  r.profile = test::synthetic(kSavedOnly);
  r.cluster = pipetwin::testing::ideal_cluster(2);
  r.cluster.device.name = device;
  r.cluster.device.kind = kind;
  r.cluster.device.memory_bytes = gib * kGiBytes;
  r.stages = 2;
  r.schedule = "1f1b";
  r.batch_size = 4;
  r.chunks = 4;
  r.partitioner = "optimal";
  return r;
}

// The [2, 2] split, planned ignoring memory.
Plan fastest_split(const std::string& device, const std::string& kind, double gib) {
  sim::PlanRequest r = request_on(device, kind, gib);
  r.allow_oom = true;
  Plan p = sim::make_plan(r);
  EXPECT_THAT(p.stages[0].layers, ElementsAre(0, 1));
  return p;
}

TEST(FrameworkFit, CheckFitsRefusesTensorsThatFitWithoutTheFramework) {
  // 4 GiB of tensors fit 4.5 GiB; with PyTorch's memory on an H100 they need 5.23 GiB.
  EXPECT_THAT(test::input_error([] { sim::check_fits(fastest_split("h100-sxm", "gpu", 4.5)); }),
              HasSubstr(fmt::format(
                  "plan does not fit: device 0 (h100-sxm #0) needs {:.2f} GiB (4.00 GiB of "
                  "tensors + {:.2f} GiB of framework memory, pytorch-2.x-cuda12 on h100-sxm: "
                  "allocator reserve, workspaces, CUDA context; hardware/frameworks.json), it "
                  "has 4.50 GiB",
                  h100_process(4 * kGiBytes) / kGiBytes,
                  (h100_process(4 * kGiBytes) - 4 * kGiBytes) / kGiBytes)));
  // The same tensors on a device the file does not list fit.
  EXPECT_NO_THROW(sim::check_fits(fastest_split("other-gpu", "gpu", 4.5)));
}

TEST(FrameworkFit, PartitionSearchLeavesRoomForTheFramework) {
  const sim::PlanRequest r = request_on("h100-sxm", "gpu", 4.5);
  Plan p;
  p.cluster = r.cluster;
  EXPECT_DOUBLE_EQ(sim::stage_memory_limit(p, 2),
                   (4.5 * kGiBytes - kH100Fixed) * (1 - kH100Fragmentation));
  // [2, 2]'s 4 GiB is within the memory but not within what the framework leaves (3.38 GiB);
  // [1, 3]'s 3 GiB is.
  const Plan plan = sim::make_plan(r);
  EXPECT_THAT(plan.stages[0].layers, ElementsAre(0));
  EXPECT_NO_THROW(sim::check_fits(plan));
  // Where tensors alone fit nowhere once the framework is counted, the refusal names it.
  EXPECT_THAT(test::input_error([] { sim::make_plan(request_on("h100-sxm", "gpu", 3.5)); }),
              HasSubstr("does not fit"));
  EXPECT_EQ(sim::make_plan(request_on("other-gpu", "gpu", 3.5)).stages[0].layers.size(), 1u);
}

TEST(FrameworkFit, SimulatorPeakIsTheWalkPlusTheFrameworkConstants) {
  const Plan plan = sim::make_plan(request_on("h100-sxm", "gpu", 4.5));  // [1, 3]
  const PlanContext ctx(plan, 0);
  const sim::SimResult r = sim::simulate_plan(ctx);
  const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "test");
  const MemoryWalk walk = walk_memory(cs, ctx.stages);
  ASSERT_EQ(r.framework_bytes.size(), 2u);
  const double tensors[] = {2 * kGiBytes, 3 * kGiBytes};
  for (size_t d = 0; d < 2; ++d) {
    // The timeline and metrics keep the tensors (what the executor measures as allocated).
    EXPECT_DOUBLE_EQ(walk.devices[d].peak_bytes, tensors[d]);
    EXPECT_DOUBLE_EQ(r.metrics.devices[d].peak_memory_bytes, tensors[d]);
    EXPECT_DOUBLE_EQ(r.peak_with_framework(d), tensors[d] / 0.85 + 532 * kMiBytes) << d;
  }
}

TEST(FrameworkFit, SweepsCountTheFramework) {
  const Plan blind = fastest_split("h100-sxm", "gpu", 4.5);
  const sim::Evaluation e = sim::evaluate_plan(blind, 0, true);
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_FALSE(e.fits);
  EXPECT_DOUBLE_EQ(e.peak_memory_max_bytes, h100_process(4 * kGiBytes));
  EXPECT_DOUBLE_EQ(e.over_bytes, h100_process(4 * kGiBytes) - 4.5 * kGiBytes);
}

TEST(FrameworkFit, CpuClustersCountTheirTensorsAlone) {
  // A CPU device (even one named like a listed GPU) has no framework memory: peaks, fit and
  // refusal as the walk has them.
  for (const char* name : {"cpu-core", "h100-sxm"}) {
    const Plan blind = fastest_split(name, "cpu", 3.5);
    const sim::SimResult r = sim::simulate_plan(PlanContext(blind, 0));
    EXPECT_THAT(r.framework_bytes, ElementsAre(0, 0)) << name;
    EXPECT_DOUBLE_EQ(r.peak_with_framework(0), 4 * kGiBytes) << name;
    EXPECT_DOUBLE_EQ(r.metrics.devices[0].peak_memory_bytes, 4 * kGiBytes) << name;
    const std::string why = test::input_error([&] { sim::check_fits(blind); });
    EXPECT_THAT(why, HasSubstr(fmt::format("device 0 ({} #0) needs 4.00 GiB, it has 3.50 GiB "
                                           "(over by 0.50 GiB)",
                                           name)));
    EXPECT_THAT(why, Not(HasSubstr("framework")));
    const sim::Evaluation e = sim::evaluate_plan(blind, 0, true);
    EXPECT_DOUBLE_EQ(e.peak_memory_max_bytes, 4 * kGiBytes) << name;
    EXPECT_DOUBLE_EQ(e.over_bytes, 0.5 * kGiBytes) << name;
    Plan p;
    p.cluster = blind.cluster;
    EXPECT_DOUBLE_EQ(sim::stage_memory_limit(p, 2), 3.5 * kGiBytes) << name;
  }
}

}  // namespace
}  // namespace pipetwin
