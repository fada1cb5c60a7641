// Split-backward schedules against the closed forms of their papers, on K equal stages with
// free transfers: f, b and w are one stage's forward, input-gradient (I) and weight-gradient (W)
// times per micro-batch, so a whole backward is b + w.
#include <algorithm>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

using testing::PlanSpec;

constexpr double kMs = 1e-3;
constexpr double kTol = 1e-9;

// K stages (v chunks on each of K / v devices), each one layer of f + (b + w), w of it W.
PlanSpec split_stages(const std::string& schedule, int stages, int M, double f, double b,
                      double w) {
  PlanSpec s;
  s.model = testing::uniform(stages, f, b + w, fmt::format("wgrad_ms={},saved_kb=64", w));
  s.schedule = schedule;
  s.stages = stages;
  s.chunks = M;
  return s;
}

// Places the plan's stages as the schedule's layout needs (devices = stages / v).
sim::SimResult simulate_split(const PlanSpec& spec, int v, int iterations) {
  Plan p = testing::synthetic_plan(spec);
  const int devices = spec.stages / v;
  const std::vector<int> dev =
      virtual_stage_layout(stage_layout_of(spec.schedule), devices, v, spec.schedule);
  for (size_t s = 0; s < p.stages.size(); ++s) p.stages[s].device = dev[s];
  return sim::simulate_plan(PlanContext(p, iterations));
}

struct Times {
  double f, b, w;
};
const Times kTimes[] = {{1, 1, 1}, {2, 2, 1}, {1, 2, 1}, {3, 2, 1}, {1, 1, 0.5}};

// 1F1B: (M + K - 1)(f + b + w) per mini-batch, (K - 1)(f + b + w) of it bubble (Qi et al. 2024,
// Table 1).
TEST(ZeroBubble, OneFOneBBubbleIsKMinusOneTimesFPlusBPlusW) {
  for (const Times& t : kTimes) {
    for (int K : {2, 4}) {
      const int M = 2 * K;
      const auto r = testing::simulate(split_stages("1f1b", K, M, t.f, t.b, t.w), 3);
      EXPECT_NEAR(r.metrics.iteration_time_s, (M + K - 1) * (t.f + t.b + t.w) * kMs, kTol);
    }
  }
}

// ZB-H1: the bubble is (K - 1)(f + b - w) (Qi et al. 2024, Section 3.1 and Table 1), a third of
// 1F1B's when f = b = w; checked for w <= b, where the paper states it.
TEST(ZeroBubble, ZbH1BubbleIsKMinusOneTimesFPlusBMinusW) {
  for (const Times& t : kTimes) {
    for (int K : {2, 3, 4, 8}) {
      for (int M : {K, 2 * K, 16}) {
        const auto r = simulate_split(split_stages("zb-h1", K, M, t.f, t.b, t.w), 1, 3);
        const double bubble = (K - 1) * (t.f + t.b - t.w);
        EXPECT_NEAR(r.metrics.iteration_time_s, (M * (t.f + t.b + t.w) + bubble) * kMs, kTol)
            << "K=" << K << " M=" << M << " f=" << t.f << " b=" << t.b << " w=" << t.w;
      }
    }
  }
}

// ZB-H2: (K - 1)(f + b - 2w) in the steady state (Qi et al. 2024, Table 1), zero when
// f = b = w; needs enough micro-batches for its 2(K - 1) warm-up forwards.
TEST(ZeroBubble, ZbH2BubbleIsKMinusOneTimesFPlusBMinusTwoW) {
  for (const Times& t : kTimes) {
    for (int K : {2, 3, 4}) {
      const int M = 3 * K;
      const auto r = simulate_split(split_stages("zb-h2", K, M, t.f, t.b, t.w), 1, 4);
      const double bubble = (K - 1) * std::max(0.0, t.f + t.b - 2 * t.w);
      EXPECT_NEAR(r.metrics.iteration_time_s, (M * (t.f + t.b + t.w) + bubble) * kMs, kTol)
          << "K=" << K << " f=" << t.f << " b=" << t.b << " w=" << t.w;
    }
  }
}

// ZB-V: no bubble in the steady state when f = b = w (Qi et al. 2024, Section 6): on D devices
// of two chunks each, a mini-batch takes exactly M * 2(f + b + w) per device.
TEST(ZeroBubble, ZbvHasNoSteadyBubbleWhenFEqualsBEqualsW) {
  for (int D : {2, 3, 4}) {
    for (int M : {2 * D - 1, 2 * D, 4 * D}) {
      const auto r = simulate_split(split_stages("zbv", 2 * D, M, 1, 1, 1), 2, 4);
      EXPECT_NEAR(r.metrics.iteration_time_s, M * 2 * 3 * kMs, kTol) << "D=" << D << " M=" << M;
    }
  }
}

TEST(ZeroBubble, ZbH2HasNoSteadyBubbleWhenFEqualsBEqualsW) {
  for (int K : {2, 4, 8}) {
    const int M = 4 * K;
    const auto r = simulate_split(split_stages("zb-h2", K, M, 1, 1, 1), 1, 4);
    EXPECT_NEAR(r.metrics.iteration_time_s, M * 3 * kMs, kTol) << "K=" << K;
  }
}

double peak_activations(const sim::SimResult& r) {
  double most = 0;
  for (const auto& d : r.memory.devices) most = std::max(most, d.activation_bytes);
  return most;
}

// Peak activation memory against Qi et al. 2024, Table 1 (p M_B for 1F1B, ZB-H1 and ZB-V,
// (2p - 1) M_B for ZB-H2), M_B being one micro-batch's activations of a device's share of the
// model. Every stage of the 1F1B-memory schedules holds its whole W-pending graph, so ZB-H1 and
// ZB-V reach 1F1B's peak, never more.
TEST(ZeroBubbleMemory, PeakActivationsMatchTheTable) {
  for (int K : {2, 4}) {
    const int M = 4 * K;
    const double MB = 64 * 1024.0;  // saved per micro-batch per one-layer stage
    const auto one = testing::simulate(split_stages("1f1b", K, M, 1, 1, 1), 2);
    const auto h1 = simulate_split(split_stages("zb-h1", K, M, 1, 1, 1), 1, 2);
    const auto h2 = simulate_split(split_stages("zb-h2", K, M, 1, 1, 1), 1, 2);
    EXPECT_DOUBLE_EQ(peak_activations(one), K * MB);
    EXPECT_DOUBLE_EQ(peak_activations(h1), K * MB);
    EXPECT_DOUBLE_EQ(peak_activations(h2), (2 * K - 1) * MB);
    // ZB-H1 has every stage at the peak; 1F1B only the first.
    for (const auto& d : h1.memory.devices) EXPECT_DOUBLE_EQ(d.activation_bytes, K * MB);
    // ZB-V on K devices of two one-layer chunks against 1F1B on K devices of two-layer stages.
    PlanSpec two_layer = split_stages("1f1b", K, M, 1, 1, 1);
    two_layer.model = testing::uniform(2 * K, 1, 2, "wgrad_ms=1,saved_kb=64");
    const auto one2 = testing::simulate(two_layer, 2);
    const auto v = simulate_split(split_stages("zbv", 2 * K, M, 1, 1, 1), 2, 2);
    EXPECT_DOUBLE_EQ(peak_activations(one2), K * 2 * MB);
    EXPECT_DOUBLE_EQ(peak_activations(v), K * 2 * MB);
    // DualPipeV holds one chunk more than ZB-V: 2K + 1 chunk-micro-batches (DeepSeek-V3's
    // PP + 1 activations, counted in chunks).
    const auto dv = simulate_split(split_stages("dualpipev", 2 * K, M, 1, 1, 1), 2, 2);
    EXPECT_DOUBLE_EQ(peak_activations(dv), (2 * K + 1) * MB);
  }
}

// The split halves take the profile's times: W its wgrad_ms, I the rest of the backward.
TEST(ZeroBubble, SplitHalvesTakeTheirProfiledTimes) {
  const auto r = simulate_split(split_stages("zb-h1", 2, 4, 1, 3, 0.5), 1, 1);
  int seen = 0;
  for (const auto& e : r.timeline.events) {
    if (e.action.op == Op::kBackwardInput) {
      EXPECT_NEAR(e.duration(), 3 * kMs, kTol);
      ++seen;
    } else if (e.action.op == Op::kBackwardWeight) {
      EXPECT_NEAR(e.duration(), 0.5 * kMs, kTol);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2 * 2 * 4);
}

// A schedule that needs a layout says so when the plan does not carry it.
TEST(ZeroBubble, LayoutAndMicroBatchErrors) {
  PlanSpec one_per_device = split_stages("zbv", 4, 8, 1, 1, 1);
  one_per_device.lay_out = false;
  EXPECT_THROW(testing::simulate(one_per_device, 1), InputError);
  try {
    testing::simulate(one_per_device, 1);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("needs its stages placed a V"), std::string::npos)
        << e.what();
  }
  try {
    simulate_split(split_stages("zbv", 8, 3, 1, 1, 1), 2, 1);
    FAIL() << "zbv with M < 2D - 1 must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2D - 1 = 7 micro-batches"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(simulate_split(split_stages("dualpipev", 4, 3, 1, 1, 1), 2, 1), InputError);
}

}  // namespace
}  // namespace pipetwin
