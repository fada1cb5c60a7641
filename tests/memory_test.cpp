// Peak memory read off the schedule (core/memory.hpp) against closed forms per schedule:
// how many micro-batches' activations each stage holds, checkpointing, and weight stashing.
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "core/schedule/generators.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kKiB = 1024;

// K stages of one layer each: output act_kb per sample (the next stage's input), saved_kb saved
// for backward, param_kb parameters, optimizer_kb optimizer state.
struct Mem {
  double in, saved, params, opt;
};
constexpr Mem kLayer{8, 40, 100, 200};

MemoryWalk walk(const std::string& schedule, int K, int M, Checkpoint ck, int N = 2) {
  testing::PlanSpec s;
  s.model = fmt::format("uniform:layers={},act_kb={},saved_kb={},param_kb={},optimizer_kb={}", K,
                        kLayer.in, kLayer.saved, kLayer.params, kLayer.opt);
  s.schedule = schedule;
  s.stages = K;
  s.chunks = M;
  s.checkpoint = ck;
  const PlanContext ctx(testing::synthetic_plan(s), N);
  const CompiledSchedule cs(make_schedule(schedule, ctx.shape), schedule);
  return walk_memory(cs, ctx.stages);
}

double static_bytes() { return (2 * kLayer.params + kLayer.opt) * kKiB; }
double act(int n_full, int n_inputs_only = 0, int working = 0) {
  return (n_full * (kLayer.in + kLayer.saved) + n_inputs_only * kLayer.in + working * kLayer.saved) * kKiB;
}

TEST(Memory, GPipeHoldsAllMicroBatches) {
  const int K = 4, M = 6;
  const auto w = walk("gpipe", K, M, Checkpoint::kNone);
  for (int s = 0; s < K; ++s) {
    EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes, static_bytes() + act(M)) << "stage " << s;
    EXPECT_EQ(w.devices[s].max_in_flight, M);
  }
}

TEST(Memory, CheckpointingKeepsInputsAndOneWorkingSet) {
  // torchgpipe: memory reduced by a factor of about M: M inputs plus one set of saved activations.
  const int K = 3, M = 8;
  for (Checkpoint ck : {Checkpoint::kExceptLast, Checkpoint::kAlways}) {
    const auto w = walk("gpipe", K, M, ck);
    for (int s = 0; s < K; ++s) {
      EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes, static_bytes() + act(0, M, 1)) << "stage " << s;
    }
  }
}

TEST(Memory, OneFOneBHoldsKMinusSMicroBatches) {
  const int K = 4;
  for (int M : {2, 8}) {
    const auto w = walk("1f1b", K, M, Checkpoint::kNone);
    for (int s = 0; s < K; ++s) {
      const int n = std::min(K - s, M);
      EXPECT_EQ(w.devices[s].max_in_flight, n) << "M=" << M << " stage " << s;
      EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes, static_bytes() + act(n));
    }
  }
}

TEST(Memory, NaiveHoldsOne) {
  const auto w = walk("naive", 3, 5, Checkpoint::kNone);
  for (const auto& d : w.devices) EXPECT_DOUBLE_EQ(d.peak_bytes, static_bytes() + act(1));
}

TEST(Memory, PipeDreamStashesKMinusKPlusOneVersions) {
  // EPFL Section 2.4: device k stores K - k + 1 intermediate states (inputs, activations, weights).
  const int K = 4;
  const auto w = walk("pipedream", K, 1, Checkpoint::kNone, 4 * K);
  for (int s = 0; s < K; ++s) {
    const int n = K - s;  // K - k + 1 with k = s + 1
    EXPECT_EQ(w.devices[s].max_in_flight, n);
    EXPECT_EQ(w.devices[s].max_weight_versions, n);
    EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes,
                     static_bytes() + act(n) + (n - 1) * kLayer.params * kKiB) << "stage " << s;
  }
}

TEST(Memory, DdgStoresStatesFeatureReplayOnlyInputs) {
  const int K = 4;
  const auto ddg = walk("ddg", K, 1, Checkpoint::kNone, 4 * K);
  const auto fr = walk("feature-replay", K, 1, Checkpoint::kNone, 4 * K);
  const auto ft = walk("ftpipe-async", K, 1, Checkpoint::kNone, 4 * K);
  for (int s = 0; s < K; ++s) {
    const int n = K - s;
    EXPECT_DOUBLE_EQ(ddg.devices[s].peak_bytes,
                     static_bytes() + act(n) + (n - 1) * kLayer.params * kKiB) << "ddg stage " << s;
    // Features Replay and FTPipe: inputs only, plus the recomputed working set; the last stage
    // does not recompute and holds one full micro-batch; no weight stash.
    const double expect = s == K - 1 ? static_bytes() + act(1) : static_bytes() + act(0, n, 1);
    EXPECT_DOUBLE_EQ(fr.devices[s].peak_bytes, expect) << "feature-replay stage " << s;
    EXPECT_DOUBLE_EQ(ft.devices[s].peak_bytes, expect) << "ftpipe stage " << s;
  }
}

TEST(Memory, FrozenLayersCountLambdaOfTheirFootprint) {
  testing::PlanSpec s;
  s.model = "uniform:layers=2,param_kb=600,optimizer_kb=1200";
  s.stages = 1;
  s.chunks = 1;
  Plan p = testing::synthetic_plan(s);
  p.frozen_layers = 1;
  const PlanContext ctx(p, 1);
  const CompiledSchedule cs(make_schedule("gpipe", ctx.shape), "gpipe");
  const auto w = walk_memory(cs, ctx.stages);
  const double active = (2 * 600 + 1200) * kKiB;
  EXPECT_DOUBLE_EQ(w.devices[0].static_bytes, active + active / 6);
}

}  // namespace
}  // namespace pipetwin
