// The memory walk of a simulated run (simulate_memory_in_run: walk_memory with its times):
// received tensors held from when their copies start, against the list-read upper bound.
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "core/schedule/generators.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kKiB = 1024;
constexpr double kActKiB = 8;  // each stage's output per sample: an output gradient's size

PlanContext gpipe_context(int K, int M) {
  testing::PlanSpec s;
  s.model = fmt::format("uniform:layers={},fwd_ms=1,bwd_ms=2,act_kb={},saved_kb=40", K, kActKiB);
  s.stages = K;
  s.chunks = M;
  return PlanContext(testing::synthetic_plan(s), 1);
}

MemoryWalk untimed(const PlanContext& ctx) {
  return walk_memory(CompiledSchedule(make_schedule("gpipe", ctx.shape), "gpipe"), ctx.stages);
}

TEST(MemoryTimed, BalancedGPipeHoldsOneGradientAheadNotM) {
  // Every stage as fast as the next: stage s + 1 finishes the backward of micro-batch j - 1 while
  // stage s runs that of j, so one output gradient waits on stage s (two at the point between
  // the last forward and the first backward: the one that backward takes and the one arriving
  // while it runs), where the list-read walk (no timing) lets all M - 1 others arrive before the
  // first backward.
  const int K = 4, M = 6;
  const PlanContext ctx = gpipe_context(K, M);
  const MemoryWalk bound = untimed(ctx);
  const sim::SimResult sim = sim::simulate_plan(ctx);
  const MemoryWalk run = sim::simulate_memory_in_run(ctx);
  for (int s = 0; s < K - 1; ++s) {
    const auto& timed = run.devices[static_cast<size_t>(s)];
    const auto& upper = bound.devices[static_cast<size_t>(s)];
    const double gradient = kActKiB * kKiB;
    EXPECT_GE(upper.received_bytes, (M - 1) * gradient) << "stage " << s;
    EXPECT_GT(timed.received_bytes, 0) << "stage " << s;
    EXPECT_LE(timed.received_bytes, 2 * gradient) << "stage " << s;
    EXPECT_LE(timed.peak_bytes, upper.peak_bytes - (M - 3) * gradient) << "stage " << s;
    EXPECT_EQ(timed.max_in_flight, M);
  }
  // The last stage receives activations only, one forward ahead in both walks.
  EXPECT_DOUBLE_EQ(run.devices[K - 1].peak_bytes, bound.devices[K - 1].peak_bytes);
  // The simulator's report keeps the bound the planner judges plans by.
  for (int d = 0; d < K; ++d)
    EXPECT_DOUBLE_EQ(sim.memory.devices[static_cast<size_t>(d)].peak_bytes,
                     bound.devices[static_cast<size_t>(d)].peak_bytes);
}

TEST(MemoryTimed, AFastNextStageHandsOverEveryGradientBeforeTheFirstBackward) {
  // Stage 0's backward ten times slower than stage 1's: by the time it has run its first
  // backward, stage 1 has sent all M output gradients, as the upper bound assumes.
  const int K = 2, M = 6;
  PlanContext ctx = gpipe_context(K, M);
  for (double* t : {&ctx.stages[0].backward_s, &ctx.stages[0].backward_shared_s}) *t *= 10;
  const MemoryWalk bound = untimed(ctx);
  const MemoryWalk run = sim::simulate_memory_in_run(ctx);
  EXPECT_DOUBLE_EQ(run.devices[0].received_bytes, bound.devices[0].received_bytes);
  EXPECT_DOUBLE_EQ(run.devices[0].peak_bytes, bound.devices[0].peak_bytes);
}

}  // namespace
}  // namespace pipetwin
