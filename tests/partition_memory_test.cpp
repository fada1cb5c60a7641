// Memory inside the partition search (docs/partition-memory.md): the schedule model of
// core/partition/stage_memory.hpp against the memory walk it mirrors, the searching partitioners
// returning the partition that fits where the fastest does not, and the planner's one-line
// refusal and report.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "core/partition/range_terms.hpp"
#include "core/partition/stage_memory.hpp"
#include "core/schedule/generators.hpp"
#include "sim/planner.hpp"
#include "tests/sim_test_util.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Random sizes of K positive parts summing to L.
std::vector<int> random_split(std::mt19937& rng, int L, int K) {
  std::vector<int> cuts;
  for (int i = 1; i < L; ++i) cuts.push_back(i);
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(static_cast<size_t>(K - 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> sizes;
  int prev = 0;
  for (int c : cuts) {
    sizes.push_back(c - prev);
    prev = c;
  }
  sizes.push_back(L - prev);
  return sizes;
}

// The schedule model's peak of every stage of `plan`, from the range scanner (as the dynamic
// programs price ranges) and from the plan's stage costs, against the walk's.
void expect_model_matches_walk(const Plan& plan) {
  const PlanContext ctx(plan, 0);
  const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "test");
  const MemoryWalk walk = walk_memory(cs, ctx.stages);
  const StageMemory model({plan.schedule, plan.chunks, plan.checkpoint, plan.iterations});
  PartitionRequest r;
  r.cost = &ctx.cost;
  r.micro_batch = plan.micro_batch_size();
  r.memory = &model;
  const RangeScanner scan(r);
  const int K = plan.num_stages();
  for (int k = 0; k < K; ++k) {
    const auto& layers = plan.stages[static_cast<size_t>(k)].layers;
    RangeTerms t = scan.start(layers.front());
    while (t.end <= layers.back()) scan.extend(t);
    const StageCost& c = ctx.stages[static_cast<size_t>(k)];
    EXPECT_NEAR(t.forward_ws, c.forward_bytes, 1e-6) << "stage " << k;
    EXPECT_NEAR(t.forward_nograd_ws, c.forward_nograd_bytes, 1e-6) << "stage " << k;
    EXPECT_NEAR(t.backward_ws, c.backward_bytes, 1e-6) << "stage " << k;
    const double peak = walk.devices[static_cast<size_t>(k)].peak_bytes;
    EXPECT_NEAR(scan.memory(t, k, K), peak, 1e-6 * peak)
        << plan.schedule << " ck=" << checkpoint_name(plan.checkpoint) << " K=" << K
        << " M=" << plan.chunks << " stage " << k;
    EXPECT_NEAR(stage_memory_bytes(r, layers, k, K), peak, 1e-6 * peak) << "stage " << k;
  }
}

TEST(StageMemory, EqualsTheMemoryWalkOnChainsForEverySchedule) {
  std::mt19937 rng(7);
  int checked = 0;
  for (const auto& info : schedule_catalog()) {
    for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
      for (int trial = 0; trial < 6; ++trial) {
        const int L = std::uniform_int_distribution<int>(4, 9)(rng);
        const int K = std::uniform_int_distribution<int>(1, 4)(rng);
        const int M = std::uniform_int_distribution<int>(1, 6)(rng);
        pipetwin::testing::PlanSpec s;
        s.schedule = info.name;
        s.stages = K;
        s.chunks = M;
        s.micro_batch = trial % 2 + 1;
        s.checkpoint = ck;
        s.dp = trial == 5 ? 2 : 1;
        Plan plan = pipetwin::testing::synthetic_plan(s);
        plan.profile = test::random_chain(rng, L);
        plan.frozen_layers = trial == 4 ? 1 : 0;
        const auto sizes = random_split(rng, L, K);
        plan.stages.clear();
        int next = 0;
        for (int k = 0; k < K; ++k) {
          StagePlan st{{}, k};
          for (int i = 0; i < sizes[static_cast<size_t>(k)]; ++i) st.layers.push_back(next++);
          plan.stages.push_back(st);
        }
        try {
          plan.validate("test");
          make_schedule(plan.schedule, PlanContext(plan, 0).shape);
        } catch (const InputError&) {
          continue;  // a schedule that does not take this checkpoint mode
        }
        expect_model_matches_walk(plan);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 60);
}

TEST(StageMemory, RangeWorkingBytesEqualTheCostModelsWithSkipsAndFrozenLayers) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int L = std::uniform_int_distribution<int>(2, 9)(rng);
    Profile p = test::random_chain(rng, L);
    for (int i = 0; i + 2 < L; ++i) {
      if (rng() % 3 == 0)
        p.edges.push_back({i, i + 2, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
    }
    CostOptions o;
    o.frozen_layers = trial % 4 == 0 ? 1 : 0;
    const CostModel cm(p, pipetwin::testing::ideal_cluster(4), o);
    const StageMemory model({"1f1b", 2, Checkpoint::kNone, 0});
    PartitionRequest r;
    r.cost = &cm;
    r.micro_batch = 3;
    r.memory = &model;
    const RangeScanner scan(r);
    for (int i = 0; i < L; ++i) {
      RangeTerms t = scan.start(i);
      std::vector<int> layers;
      for (int j = i; j < L; ++j) {
        scan.extend(t);
        layers.push_back(j);
        const StageCost c = cm.stage_cost(layers, r.micro_batch);
        EXPECT_NEAR(t.forward_ws, c.forward_bytes, 1e-6);
        EXPECT_NEAR(t.forward_nograd_ws, c.forward_nograd_bytes, 1e-6);
        EXPECT_NEAR(t.backward_ws, c.backward_bytes, 1e-6) << "[" << i << ", " << j << "]";
        EXPECT_NEAR(scan.bytes(t).input, c.input_bytes, 1e-6);
      }
    }
  }
}

// 1F1B, K = 2, M = 4, one sample a micro-batch; four layers of 1 ms forward, 2 ms backward; each
// saves 1 GiB of activations; no parameters, nothing crosses a border. Stage 0 keeps K - 0 = 2
// micro-batches' activations at its peak, stage 1 one, so a stage of n layers needs 2n GiB first
// and n GiB last: [2, 2] (the fastest, 6 ms a stage) needs 4 GiB on stage 0; [1, 3] (9 ms) needs
// max(2, 3) = 3 GiB; [3, 1] 6 GiB.
constexpr const char* kSavedOnly = "uniform:layers=4,fwd_ms=1,bwd_ms=2,saved_kb=1048576";

sim::PlanRequest saved_only_request(const std::string& partitioner, double memory_gib) {
  sim::PlanRequest r;
  r.model = kSavedOnly;
  r.profile = test::synthetic(kSavedOnly);
  r.cluster = pipetwin::testing::ideal_cluster(2);
  r.cluster.device.memory_bytes = memory_gib * kGiB;
  r.stages = 2;
  r.schedule = "1f1b";
  r.batch_size = 4;
  r.chunks = 4;
  r.partitioner = partitioner;
  return r;
}

TEST(MemoryAwarePartitioners, TakeTheSlowerSplitThatFitsUnder1F1B) {
  const CostModel cm(test::synthetic(kSavedOnly), pipetwin::testing::ideal_cluster(2));
  const StageMemory model({"1f1b", 4, Checkpoint::kNone, 0});
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  r.micro_batches = 4;
  r.memory = &model;
  EXPECT_DOUBLE_EQ(stage_memory_bytes(r, {0, 1}, 0, 2), 4 * kGiB);
  EXPECT_DOUBLE_EQ(stage_memory_bytes(r, {1, 2, 3}, 1, 2), 3 * kGiB);
  for (const char* name :
       {"optimal", "balance-time", "balance-size", "pipedream-dp", "mixed-pipe"}) {
    r.memory_limit_bytes = 0;
    EXPECT_THAT(make_partitioner(name)->partition(r).balance(), ElementsAre(2, 2)) << name;
    r.memory_limit_bytes = 3.5 * kGiB;
    EXPECT_THAT(make_partitioner(name)->partition(r).balance(), ElementsAre(1, 3)) << name;
  }
  // The memory-blind program of PipeDream still returns [2, 2]; its reported need is the model's.
  const PipeDreamPlan blind = pipedream_plan(r, PipeDreamOptions{false});
  EXPECT_THAT(blind.partition.balance(), ElementsAre(2, 2));
  EXPECT_DOUBLE_EQ(blind.over_limit_bytes, 0.5 * kGiB);
}

TEST(MemoryAwarePartitioners, PlannerPicksThePartitionThatFits) {
  for (const char* name :
       {"optimal", "balance-time", "balance-size", "pipedream-dp", "mixed-pipe"}) {
    sim::PlanRequest r = saved_only_request(name, 3.5);
    const Plan plan = sim::make_plan(r);
    ASSERT_EQ(plan.num_stages(), 2) << name;
    EXPECT_THAT(plan.stages[0].layers, ElementsAre(0)) << name;
    EXPECT_THAT(plan.stages[1].layers, ElementsAre(1, 2, 3)) << name;
    // Ignoring memory the planner returns the fastest split, which the walk refuses.
    r.allow_oom = true;
    const Plan blind = sim::make_plan(r);
    EXPECT_EQ(blind.stages[0].layers.size(), 2u) << name;
    EXPECT_THAT(test::input_error([&] { sim::check_fits(blind); }),
                HasSubstr("device 0 (ideal-device #0) needs 4.00 GiB, it has 3.50 GiB"));
  }
}

TEST(MemoryAwarePartitioners, PlannerSaysInOneLineWhenNothingFits) {
  // Under 1.5 GiB: the leanest split, [1, 3], needs 3 GiB on stage 1.
  sim::PlanRequest r = saved_only_request("optimal", 1.5);
  EXPECT_EQ(test::input_error([&] { sim::make_plan(r); }),
            "plan does not fit: partitioner optimal found no partition into 2 stages within "
            "1.50 GiB a device (1f1b, M=4, micro-batch 1); the leanest needs 3.00 GiB on stage 1");
  for (const char* name : {"balance-time", "balance-size"}) {
    r.partitioner = name;
    EXPECT_THAT(test::input_error([&] { sim::make_plan(r); }),
                HasSubstr("; the leanest needs 3.00 GiB on stage 1"));
  }
  r.partitioner = "pipedream-dp";  // over one and two stages: [1, 3] again
  EXPECT_THAT(test::input_error([&] { sim::make_plan(r); }),
              HasSubstr("; the leanest needs 3.00 GiB on stage 1 of 2"));
  r.partitioner = "mixed-pipe";  // its blocks find no room; the sequential pipeline is priced
  EXPECT_THAT(test::input_error([&] { sim::make_plan(r); }),
              HasSubstr("; the leanest needs 3.00 GiB on stage 1 (sequential)"));
  // M auto over 1, 2, 4: one micro-batch of 4 samples keeps 4 GiB a layer at once ([2, 2]: 8 GiB);
  // two of 2 samples keep 2 x 2 GiB on stage 0 ([1, 3]: max(4, 6) = 6 GiB); M = 4 is the leanest.
  r.partitioner = "optimal";
  r.chunks = 0;
  EXPECT_EQ(test::input_error([&] { sim::make_plan(r); }),
            "--chunks auto: no chunk count fits: partitioner optimal tried M = 1, 2, 4 (1f1b, K=2) "
            "within 1.50 GiB a device; the leanest, M=4, needs 3.00 GiB on stage 1");
}

TEST(MemoryAwarePartitioners, PlanReportsWhatIgnoringMemoryWouldNeed) {
  // [2, 2]: (M + K - 1)(f + b) = 5 x 6 ms = 30 ms. [1, 3]: stage 1 is busy 4 x 9 ms from 1 ms
  // (stage 0's first forward) and stage 0's last backward takes 2 ms more: 39 ms.
  sim::PlanRequest r = saved_only_request("optimal", 3.5);
  std::string note;
  const Plan plan = sim::make_plan(r, &note);
  EXPECT_THAT(plan.stages[0].layers, ElementsAre(0));
  EXPECT_EQ(note,
            "the fastest partition ignoring memory (M=4, balance [2, 2]; 30.0 ms/step) needs "
            "4.00 GiB on device 0 (ideal-device #0) of 3.50 GiB; chose M=4, balance [1, 3] "
            "(39.0 ms/step), which fits");
  r.cluster.device.memory_bytes = 4 * kGiB;  // the fastest fits: nothing to say
  sim::make_plan(r, &note);
  EXPECT_EQ(note, "");
}

TEST(MemoryAwarePartitioners, PipeDreamPricesAStageAtItsPosition) {
  // PipeDream with an update every micro-batch (M = 1): stage k of K keeps K - k weight versions
  // (the EPFL report's K - k + 1, counting from 1). Three layers of 1 GiB parameters (2 GiB with
  // gradients), no activations; a backward holds its layer's 1 GiB of parameter gradients.
  const std::string spec = "uniform:layers=3,fwd_ms=1,bwd_ms=2,param_kb=1048576";
  const CostModel cm(test::synthetic(spec), test::two_level_cluster(1, 3, 1e6, 1e-3, 1e6, 1e-3));
  const StageMemory model({"pipedream", 1, Checkpoint::kNone, 0});
  EXPECT_EQ(model.held(0, 3).most_inputs(), 3);
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 3;
  r.micro_batches = 1;
  r.memory = &model;
  // [1, 1, 1]: 2 + 2 stashed + 1 = 5 GiB first, 2 + 1 + 1 = 4 GiB next, 2 + 1 = 3 GiB last.
  EXPECT_DOUBLE_EQ(stage_memory_bytes(r, {0}, 0, 3), 5 * kGiB);
  EXPECT_DOUBLE_EQ(stage_memory_bytes(r, {1}, 1, 3), 4 * kGiB);
  EXPECT_DOUBLE_EQ(stage_memory_bytes(r, {2}, 2, 3), 3 * kGiB);
  r.memory_limit_bytes = 5 * kGiB;
  const PipeDreamPlan plan = pipedream_plan(r);
  EXPECT_THAT(plan.partition.balance(), ElementsAre(1, 1, 1));
  EXPECT_THAT(plan.stage_memory_bytes, ElementsAre(5 * kGiB, 4 * kGiB, 3 * kGiB));
  // Under 4.5 GiB nothing fits: one stage needs 6 + 1 = 7 GiB; of two stages [1, 2] is the
  // leanest, 2 + 1 stashed + 1 = 4 GiB first and 4 + 1 = 5 GiB last; of three, 5 GiB first.
  r.memory_limit_bytes = 4.5 * kGiB;
  try {
    pipedream_plan(r);
    FAIL() << "nothing fits";
  } catch (const NoFitError& e) {
    EXPECT_EQ(std::string(e.what()),
              "partitioner pipedream-dp: no pipeline on 3 devices fits the 4.50 GiB limit; "
              "PipeDream's own plan needs 5.00 GiB on stage 0");
    EXPECT_DOUBLE_EQ(e.need_bytes, 5 * kGiB);
    EXPECT_EQ(e.where, "on stage 1 of 2");
  }
}

TEST(MemoryAwarePartitioners, StagesSharingOneMemoryFitTogether) {
  // The 1F1B case above on one 5 GiB memory shared by both stages: [2, 2] needs 4 + 2 = 6 GiB in
  // all, [1, 3] 2 + 3 = 5 GiB. An equal share (2.5 GiB) fits no split; the planner loosens the
  // per-stage limit until a split fits the sum.
  sim::PlanRequest r = saved_only_request("optimal", 5);
  r.cluster.device.core_sharing = 2;
  r.cluster.device.shares_memory = true;
  const Plan plan = sim::make_plan(r);
  EXPECT_THAT(plan.stages[0].layers, ElementsAre(0));
  r.cluster.device.memory_bytes = 4.5 * kGiB;  // nothing fits: the pooled check refuses
  EXPECT_THAT(test::input_error([&] { sim::make_plan(r); }),
              HasSubstr("plan does not fit: devices 0, 1 (ideal-device #0, #1, one memory)"));
}

TEST(MemoryAwarePartitioners, SharedMemoryIsSplitEquallyAmongItsStages) {
  Plan p;
  p.cluster = pipetwin::testing::ideal_cluster(4);
  p.cluster.device.memory_bytes = 80 * kGiB;
  EXPECT_DOUBLE_EQ(sim::stage_memory_limit(p, 2), 80 * kGiB);
  p.cluster.device.core_sharing = 4;
  p.cluster.device.shares_memory = true;
  EXPECT_DOUBLE_EQ(sim::stage_memory_limit(p, 2), 40 * kGiB);
  p.dp = 2;
  EXPECT_DOUBLE_EQ(sim::stage_memory_limit(p, 2), 20 * kGiB);
}

}  // namespace
}  // namespace pipetwin
