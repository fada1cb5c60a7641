// Planning with virtual stages (sim/planner.hpp): v x K contiguous stages placed in the schedule's
// layout, the schedule's refusals before anything is partitioned, chunks=auto trying only the M a
// schedule accepts, and the memory of a device hosting several stages — the schedule model of
// core/partition/stage_memory.hpp against the walk, check_fits() counting every chunk, and the
// memory-aware search moving a heavy layer off a device that would hold two.
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/partition/range_terms.hpp"
#include "core/partition/stage_memory.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim/planner.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

PlanRequest request(const std::string& model, const std::string& schedule, int K, int batch) {
  PlanRequest r;
  r.model = model;
  r.profile = synthetic_profile(ModelSpec::parse(model, "test"));
  r.cluster = pipetwin::testing::ideal_cluster(16);
  r.stages = K;
  r.schedule = schedule;
  r.batch_size = batch;
  return r;
}

std::vector<int> devices_of(const Plan& p) {
  std::vector<int> out;
  for (const auto& st : p.stages) out.push_back(st.device);
  return out;
}

// Every layer once, in order: the stages are contiguous ranges in stage order.
void expect_contiguous(const Plan& p) {
  int next = 0;
  for (const auto& st : p.stages) {
    for (int l : st.layers) EXPECT_EQ(l, next++);
  }
  EXPECT_EQ(next, p.profile.num_layers());
}

TEST(VirtualStages, ZbvCutsTwoStagesPerDeviceInAV) {
  PlanRequest r = request("uniform:layers=16,fwd_ms=1,bwd_ms=2", "zbv", 4, 16);
  r.chunks = 8;
  const Plan p = make_plan(r);  // v = 2 by default for zbv
  EXPECT_EQ(p.num_stages(), 8);
  EXPECT_EQ(p.devices_per_replica(), 4);
  EXPECT_THAT(devices_of(p), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
  expect_contiguous(p);
  for (const auto& st : p.stages) EXPECT_EQ(st.layers.size(), 2u);
  r.schedule = "dualpipev";
  EXPECT_THAT(devices_of(make_plan(r)), ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
}

TEST(VirtualStages, InterleavedTakesAnyVInItsLayout) {
  for (const auto& partitioner : {"uniform", "optimal", "balance-time", "balance-size"}) {
    PlanRequest r = request("uniform:layers=12,fwd_ms=1,bwd_ms=2", "interleaved-1f1b", 3, 12);
    r.partitioner = partitioner;
    r.chunks = 6;
    r.virtual_stages = 2;
    const Plan two = make_plan(r);
    EXPECT_THAT(devices_of(two), ElementsAre(0, 1, 2, 0, 1, 2)) << partitioner;
    expect_contiguous(two);
    r.virtual_stages = 4;
    const Plan four = make_plan(r);
    EXPECT_THAT(devices_of(four), ElementsAre(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2)) << partitioner;
    expect_contiguous(four);
  }
  // Without --virtual-stages interleaved-1f1b is one chunk per device: 1F1B's layout.
  PlanRequest r = request("uniform:layers=12,fwd_ms=1,bwd_ms=2", "interleaved-1f1b", 3, 12);
  r.chunks = 6;
  EXPECT_THAT(devices_of(make_plan(r)), ElementsAre(0, 1, 2));
}

TEST(VirtualStages, RefusalsAreOneLineNamingTheValue) {
  auto error = [](const PlanRequest& r) { return test::input_error([&] { make_plan(r); }); };
  PlanRequest r = request("uniform:layers=16,fwd_ms=1,bwd_ms=2", "zbv", 4, 12);
  r.chunks = 3;
  EXPECT_EQ(error(r), "schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices (M = 3)");
  r.chunks = 4;
  r.schedule = "dualpipev";
  EXPECT_THAT(error(r), HasSubstr("needs at least 2D = 8 micro-batches on 4 devices (M = 4)"));
  r.schedule = "interleaved-1f1b";
  r.virtual_stages = 2;
  r.chunks = 6;
  EXPECT_THAT(error(r), HasSubstr("micro-batches must be a multiple of the 4 devices (M = 6)"));
  r.schedule = "gpipe";
  EXPECT_THAT(error(r), HasSubstr("schedule gpipe runs one stage per device (--virtual-stages 2"));
  r.schedule = "zbv";
  r.virtual_stages = 3;
  EXPECT_THAT(error(r), HasSubstr("(--virtual-stages 2, not 3)"));
  r.virtual_stages = -1;
  EXPECT_EQ(error(r), "--virtual-stages must be positive (-1 < 1)");
  r.virtual_stages = 0;
  r.chunks = 12;
  r.partitioner = "mixed-pipe";
  EXPECT_THAT(error(r), HasSubstr("partitioner mixed-pipe places stages on devices itself"));
  r.partitioner = "uniform";
  r.stages = 9;  // 18 stages of 16 layers
  r.batch_size = r.chunks = 24;
  EXPECT_THAT(error(r), HasSubstr("fewer layers than stages (16 < 18)"));
}

TEST(VirtualStages, AutoChunksTriesOnlyTheMTheScheduleAccepts) {
  PlanRequest r = request("uniform:layers=8,fwd_ms=1,bwd_ms=2,overhead_ms=40", "zbv", 4, 48);
  // A large per-call overhead makes few micro-batches fastest; zbv still needs M >= 7.
  const Plan zbv = make_plan(r);
  EXPECT_GE(zbv.chunks, 7);
  EXPECT_EQ(48 % zbv.chunks, 0);
  r.schedule = "interleaved-1f1b";
  r.virtual_stages = 2;
  const Plan inter = make_plan(r);
  EXPECT_EQ(inter.chunks % 4, 0);
  r.schedule = "zbv";
  r.virtual_stages = 0;
  r.batch_size = 6;  // M in {1, 2, 3, 6}: all below 7
  EXPECT_EQ(test::input_error([&] { make_plan(r); }),
            "--chunks auto: no M in 1..6 dividing the per-replica batch 6 that zbv accepts "
            "(schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices (M = 6))");
}

// A plan of `schedule` on D devices of v stages each, cut at random.
Plan random_virtual_plan(std::mt19937& rng, const std::string& schedule, int D, int v, int M) {
  const int S = D * v, L = S + std::uniform_int_distribution<int>(0, 5)(rng);
  pipetwin::testing::PlanSpec spec;
  spec.schedule = schedule;
  spec.stages = S;
  spec.chunks = M;
  spec.micro_batch = std::uniform_int_distribution<int>(1, 2)(rng);
  Plan plan = pipetwin::testing::synthetic_plan(spec);
  plan.profile = test::random_chain(rng, L);
  std::vector<int> cuts;  // S - 1 distinct cut points in 1..L-1
  for (int i = 1; i < L; ++i) cuts.push_back(i);
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(static_cast<size_t>(S - 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(L);
  const auto dev = virtual_stage_layout(stage_layout_of(schedule), D, v, schedule);
  plan.stages.clear();
  int next = 0;
  for (int s = 0; s < S; ++s) {
    StagePlan st{{}, dev[static_cast<size_t>(s)]};
    while (next < cuts[static_cast<size_t>(s)]) st.layers.push_back(next++);
    plan.stages.push_back(st);
  }
  return plan;
}

// The schedule model prices a device of several stages as the walk does: device_bytes() equals its
// peak, and each stage's own share (held()) is at most that peak while their sum is at least it.
TEST(VirtualStages, DeviceMemoryOfSeveralChunksEqualsTheWalk) {
  std::mt19937 rng(5);
  int checked = 0;
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int>>{
           {"zbv", 2}, {"dualpipev", 2}, {"interleaved-1f1b", 2}, {"interleaved-1f1b", 3}}) {
    for (int trial = 0; trial < 6; ++trial) {
      const int D = std::uniform_int_distribution<int>(1, 4)(rng);
      const int M = schedule == "interleaved-1f1b"
                        ? D * std::uniform_int_distribution<int>(1, 3)(rng)
                        : 2 * D + trial % 3;
      const Plan plan = random_virtual_plan(rng, schedule, D, v, M);
      const PlanContext ctx(plan, 0);
      const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "test");
      const MemoryWalk walk = walk_memory(cs, ctx.stages);
      const StageMemory model({plan.schedule, plan.chunks, plan.checkpoint, plan.iterations, v});
      PartitionRequest r;
      r.cost = &ctx.cost;
      r.micro_batch = plan.micro_batch_size();
      r.memory = &model;
      const RangeScanner scan(r);
      const int S = plan.num_stages();
      std::vector<StageBytes> bytes;
      for (const auto& st : plan.stages) {
        RangeTerms t = scan.start(st.layers.front());
        while (t.end <= st.layers.back()) scan.extend(t);
        bytes.push_back(scan.bytes(t));
      }
      for (int d = 0; d < D; ++d) {
        const std::string where = fmt::format("{} D={} v={} M={} device {}", schedule, D, v, M, d);
        const double peak = walk.devices[static_cast<size_t>(d)].peak_bytes;
        std::vector<StageBytes> mine;
        double shares = 0;
        for (int s : model.device_stages(d, S)) {
          EXPECT_EQ(plan.stages[static_cast<size_t>(s)].device, d) << where;
          mine.push_back(bytes[static_cast<size_t>(s)]);
          const double own = model.bytes(bytes[static_cast<size_t>(s)], s, S);
          EXPECT_LE(own, peak * (1 + 1e-9)) << where << " stage " << s;
          shares += own;
        }
        ASSERT_EQ(mine.size(), static_cast<size_t>(v)) << where;
        EXPECT_NEAR(model.device_bytes(mine, d, S), peak, 1e-6 * peak) << where;
        EXPECT_GE(shares, peak * (1 - 1e-9)) << where;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 40);
}

// Layers 0, 1, 6 and 7 hold 64 MiB of parameters each, the others almost nothing. Cut evenly into
// zbv's four stages on two devices, device 0 hosts stages 0 and 3: layers 0, 1, 6 and 7, four heavy
// layers; device 1 none. On devices of room for three, check_fits() refuses that plan, naming
// device 0 (each stage alone would fit); the memory-aware planner cuts [1, 3, 3, 1] instead: two
// heavy layers on each device.
TEST(VirtualStages, MemoryCountsEveryChunkOfADevice) {
  const std::string model =
      "uniform:layers=8,fwd_ms=1,bwd_ms=2,param_kb=65536/65536/1/1/1/1/65536/65536";
  PlanRequest r = request(model, "zbv", 2, 6);
  r.chunks = 3;
  r.partitioner = "optimal";
  r.allow_oom = true;
  const Plan even = make_plan(r);
  ASSERT_THAT(even.stages.at(0).layers, ElementsAre(0, 1));
  ASSERT_THAT(even.stages.at(3).layers, ElementsAre(6, 7));
  const SimResult sim = simulate_plan(PlanContext(even, 0));
  const double four = sim.memory.devices.at(0).peak_bytes;
  const double static_per_layer = PlanContext(even, 0).cost.stage_cost({0}, 1).static_bytes();
  r.cluster.device.memory_bytes = four - 0.5 * static_per_layer;  // room for three heavy layers
  EXPECT_NO_THROW(check_fits(even));
  Plan tight = even;
  tight.cluster = r.cluster;
  EXPECT_THAT(test::input_error([&] { check_fits(tight); }),
              HasSubstr("plan does not fit: device 0 (ideal-device #0) needs"));
  r.allow_oom = false;
  const Plan fits = make_plan(r);
  EXPECT_NO_THROW(check_fits(fits));
  EXPECT_THAT(devices_of(fits), ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(fits.stages.at(0).layers, ElementsAre(0));
  EXPECT_THAT(fits.stages.at(3).layers, ElementsAre(7));
}

}  // namespace
}  // namespace pipetwin::sim
