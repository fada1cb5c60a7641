// Interleaved 1F1B (Narayanan et al., SC'21, Section 2.2.2) against its closed form: on D
// devices of v equal chunks with free transfers, "the pipeline bubble time ... reduces to
// t_pb^int = (p - 1)(t_f + t_b) / v", a bubble fraction of (D - 1) / (v M) of the ideal time.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kMs = 1e-3;

sim::SimResult simulate_interleaved(int D, int v, int M, double f, double b, int iterations) {
  testing::PlanSpec spec;
  spec.model = testing::uniform(D * v, f, b);
  spec.schedule = "interleaved-1f1b";
  spec.stages = D * v;
  spec.chunks = M;
  Plan p = testing::synthetic_plan(spec);
  const auto dev = virtual_stage_layout(StageLayout::kInterleaved, D, v, "interleaved-1f1b");
  for (size_t s = 0; s < p.stages.size(); ++s) p.stages[s].device = dev[s];
  return sim::simulate_plan(PlanContext(p, iterations));
}

TEST(Interleaved1F1B, BubbleIsDMinusOneOverVM) {
  const double f = 1, b = 2;  // per chunk
  for (int D : {2, 4}) {
    for (int v : {1, 2, 4}) {
      for (int M : {D, 2 * D, 4 * D}) {
        const auto r = simulate_interleaved(D, v, M, f, b, 3);
        // A device's ideal time is M v (f + b); the bubble adds (D - 1)(f + b) of chunk passes,
        // (D - 1)(F + B)/v in the whole-stage times F = v f, B = v b.
        const double ideal = M * v * (f + b), bubble = (D - 1) * (f + b);
        EXPECT_NEAR(r.metrics.iteration_time_s, (ideal + bubble) * kMs, 1e-9)
            << "D=" << D << " v=" << v << " M=" << M;
        EXPECT_NEAR(bubble / ideal, double(D - 1) / (v * M), 1e-12);
      }
    }
  }
}

TEST(Interleaved1F1B, OneChunkIsOneFOneB) {
  for (int D : {2, 3, 4}) {
    for (int M : {1, D, 3 * D}) {
      const auto a = simulate_interleaved(D, 1, M, 1, 2, 2);
      testing::PlanSpec spec;
      spec.model = testing::uniform(D, 1, 2);
      spec.schedule = "1f1b";
      spec.stages = D;
      spec.chunks = M;
      const auto b = testing::simulate(spec, 2);
      EXPECT_DOUBLE_EQ(a.metrics.iteration_time_s, b.metrics.iteration_time_s);
    }
  }
}

// Each device holds more micro-batches than 1F1B's stage 0 (its warm-up is longer) but of
// smaller chunks: Megatron-LM's 2(D - 1 - d) + (v - 1) D + 1 chunk passes on device d.
TEST(Interleaved1F1B, WarmUpSetsThePeak) {
  const int D = 4, v = 2, M = 8;
  const auto r = simulate_interleaved(D, v, M, 1, 2, 1);
  for (int d = 0; d < D; ++d) {
    EXPECT_EQ(r.memory.devices[static_cast<size_t>(d)].max_in_flight,
              2 * (D - 1 - d) + (v - 1) * D + 1)
        << "device " << d;
  }
}

TEST(Interleaved1F1B, RefusesMNotAMultipleOfD) {
  try {
    simulate_interleaved(4, 2, 6, 1, 2, 1);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of the 4 devices (M = 6)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pipetwin
