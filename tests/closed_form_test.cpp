// The simulator against closed forms: K equal stages of forward
// f and backward b, free transfers unless stated.
#include <gtest/gtest.h>

#include "core/schedule/generators.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

using testing::PlanSpec;
using testing::simulate;
using testing::uniform;

constexpr double kMs = 1e-3;
constexpr double kTol = 1e-9;

PlanSpec equal_stages(const std::string& schedule, int K, int M, double f, double b) {
  PlanSpec s;
  s.model = uniform(K, f, b);
  s.schedule = schedule;
  s.stages = K;
  s.chunks = M;
  return s;
}

class GPipeClosedForm : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GPipeClosedForm, IterationTimeAndBubble) {
  const auto [K, M] = GetParam();
  const double f = 1.5, b = 2.5;
  const auto r = simulate(equal_stages("gpipe", K, M, f, b), 3);
  EXPECT_NEAR(r.metrics.iteration_time_s, (M + K - 1) * (f + b) * kMs, kTol);
  EXPECT_NEAR(r.metrics.bubble_fraction, double(K - 1) / (M + K - 1), 1e-9);
  // 1F1B has the same bubble, also with fewer micro-batches than stages.
  const auto r1 = simulate(equal_stages("1f1b", K, M, f, b), 3);
  EXPECT_NEAR(r1.metrics.iteration_time_s, (M + K - 1) * (f + b) * kMs, kTol);
}

INSTANTIATE_TEST_SUITE_P(KM, GPipeClosedForm,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(1, 3, 8, 16)));

TEST(ClosedForm, NaiveIsMTimesKTimesFPlusB) {
  for (int K : {1, 2, 4}) {
    for (int M : {1, 4}) {
      const auto r = simulate(equal_stages("naive", K, M, 1, 2), 2);
      EXPECT_NEAR(r.metrics.iteration_time_s, M * K * 3 * kMs, kTol) << "K=" << K << " M=" << M;
      EXPECT_NEAR(r.metrics.bubble_fraction, 1 - 1.0 / K, 1e-9);
    }
  }
}

// EPFL report Table 1: computation time per mini-batch (M = 1) in steady state, with
// T_F = K f and T_B = K b.
TEST(ClosedForm, EpflTable1SteadyState) {
  const double f = 1, b = 2;
  for (int K : {2, 3, 4, 6}) {
    const double TF = K * f, TB = K * b;
    const int N = 6 * K + 6;
    auto time = [&](const char* s) {
      return simulate(equal_stages(s, K, 1, f, b), N).metrics.iteration_time_s / kMs;
    };
    EXPECT_NEAR(time("naive"), TF + TB, 1e-6) << "K=" << K;
    EXPECT_NEAR(time("ddg"), TF + TB / K, 1e-6) << "K=" << K;
    EXPECT_NEAR(time("feature-replay"), TF + TB / K, 1e-6) << "K=" << K;
    EXPECT_NEAR(time("pipedream"), (TF + TB) / K, 1e-6) << "K=" << K;
    // FTPipe: every stage but the last recomputes, so the slowest stage does f + f + b.
    EXPECT_NEAR(time("ftpipe-async"), 2 * f + b, 1e-6) << "K=" << K;
  }
}

TEST(ClosedForm, PipeDreamStalenessAndStashedVersions) {
  for (int K : {2, 4, 5}) {
    const auto r = simulate(equal_stages("pipedream", K, 1, 1, 2), 4 * K + 4);
    ASSERT_EQ(static_cast<int>(r.metrics.staleness.size()), K);
    for (int s = 0; s < K; ++s) {
      const int k = s + 1;  // the report's 1-based device index
      EXPECT_EQ(r.metrics.staleness[s].max, K - k) << "K=" << K << " stage " << k;
      EXPECT_EQ(r.metrics.staleness[s].gradient_max, K - k) << "weight stashing";
      EXPECT_EQ(r.metrics.staleness[s].weight_versions, K - k + 1) << "K=" << K << " stage " << k;
    }
  }
}

TEST(ClosedForm, DelayedGradientStaleness) {
  const int K = 4;
  const auto ddg = simulate(equal_stages("ddg", K, 1, 1, 2), 20);
  const auto fr = simulate(equal_stages("feature-replay", K, 1, 1, 2), 20);
  const auto ft = simulate(equal_stages("ftpipe-async", K, 1, 1, 2), 20);
  for (int s = 0; s < K; ++s) {
    const int k = s + 1;
    EXPECT_EQ(ddg.metrics.staleness[s].max, K - k);
    EXPECT_EQ(ddg.metrics.staleness[s].gradient_max, K - k);  // stashed weights
    EXPECT_EQ(fr.metrics.staleness[s].max, K - k);
    EXPECT_EQ(fr.metrics.staleness[s].gradient_max, 0);  // replays on current weights
    EXPECT_EQ(ft.metrics.staleness[s].max, K - k);       // stale loss ...
    EXPECT_EQ(ft.metrics.staleness[s].gradient_max, 0);  // ... fresh weights (FTPipe Table 1)
  }
}

TEST(ClosedForm, SynchronousSchedulesHaveNoStaleness) {
  for (const char* s : {"naive", "gpipe", "1f1b"}) {
    const auto r = simulate(equal_stages(s, 4, 8, 1, 2), 3);
    for (const auto& st : r.metrics.staleness) {
      EXPECT_EQ(st.max, 0) << s;
      EXPECT_EQ(st.gradient_max, 0) << s;
    }
  }
}

TEST(ClosedForm, CheckpointingAddsOneForwardPerMicroBatchExceptTheLast) {
  const double f = 1.25, b = 2;
  for (int K : {1, 2, 4}) {
    for (int M : {1, 2, 8}) {
      auto spec = equal_stages("gpipe", K, M, f, b);
      const double plain = simulate(spec, 2).metrics.iteration_time_s;
      spec.checkpoint = Checkpoint::kExceptLast;
      const double ckpt = simulate(spec, 2).metrics.iteration_time_s;
      EXPECT_NEAR(ckpt - plain, (M - 1) * f * kMs, kTol) << "K=" << K << " M=" << M;
      spec.checkpoint = Checkpoint::kAlways;
      const double always = simulate(spec, 2).metrics.iteration_time_s;
      EXPECT_NEAR(always - plain, M * f * kMs, kTol) << "K=" << K << " M=" << M;
    }
  }
}

TEST(ClosedForm, TransfersOverlapComputeOnCopyStreams) {
  // Each boundary transfer takes c < f: only the first activation and the last gradient wait.
  const int K = 4, M = 8;
  const double f = 2, b = 3;
  const double act_kb = 100, bw = 1e9;  // 102400 bytes / 1 GB/s = 0.1024 ms
  const double c = act_kb * 1024 / bw;
  PlanSpec s = equal_stages("gpipe", K, M, f, b);
  s.model = uniform(K, f, b, "act_kb=100");
  s.cluster = testing::ideal_cluster(8, bw, 0);
  const auto r = simulate(s, 2);
  EXPECT_NEAR(r.metrics.iteration_time_s, (M + K - 1) * (f + b) * kMs + 2 * (K - 1) * c, 1e-9);
  EXPECT_GT(r.metrics.comm_overlap_fraction, 0.5);
}

// One stage, data parallel over 2 replicas, L layers of 25 MiB each: DDP puts one layer per
// bucket. Bucket i is ready (i + 1) layer-backwards into the backward; its ring all-reduce takes
// a = bytes / bw + 2 latency (n = 2); the all-reduces queue on the communicator.
TEST(ClosedForm, BucketedAllReduceHiddenWhenBackwardIsLongExposedWhenShort) {
  const int L = 6;
  const double bw = 10e9, bytes = 25.0 * 1024 * 1024;
  const double a = bytes / bw;  // 2.62 ms, latency 0
  for (double layer_bwd_ms : {5.0, 1.0}) {
    PlanSpec s;
    s.model = uniform(L, 1, layer_bwd_ms, "param_kb=25600");
    s.schedule = "gpipe";
    s.stages = 1;
    s.chunks = 1;
    s.dp = 2;
    s.cluster = testing::ideal_cluster(2, bw, 0);
    const auto r = simulate(s, 2);
    const double f = L * 1 * kMs, bl = layer_bwd_ms * kMs;
    const double comm_end = std::max(L * bl + a, bl + L * a);  // from the backward's start
    EXPECT_NEAR(r.metrics.iteration_time_s, f + comm_end, 1e-9)
        << "layer backward " << layer_bwd_ms;
    const double exposed = comm_end - L * bl;
    if (layer_bwd_ms > a / kMs) {
      EXPECT_NEAR(exposed, a, 1e-9) << "only the last bucket is exposed";
    } else {
      EXPECT_GT(exposed, 3 * a) << "communication-bound";
    }
  }
}

// An optimizer step takes opt_ms in place and opt_new_ms when it writes a new weight version
// beside one still in use (core/schedule/weight_versions.hpp): GPipe's steps all the first,
// PipeDream's the second on every stage but the last, until its drain.
TEST(ClosedForm, StepIntoANewWeightVersionTakesItsOwnTime) {
  const int K = 3, N = 10;
  const double opt = 0.25, opt_new = 0.75;  // per layer, one layer per stage
  for (const char* schedule : {"gpipe", "pipedream"}) {
    PlanSpec s = equal_stages(schedule, K, 1, 1, 2);
    s.model = uniform(K, 1, 2, fmt::format("opt_ms={},opt_new_ms={}", opt, opt_new));
    const auto r = simulate(s, N);
    std::vector<std::vector<double>> steps(K);
    for (const auto& e : r.timeline.events) {
      if (e.action.op == Op::kOptimizerStep) steps[e.action.stage].push_back(e.duration() / kMs);
    }
    for (int k = 0; k < K; ++k) {
      ASSERT_EQ(static_cast<int>(steps[k].size()), N) << schedule << " stage " << k;
      for (int i = 0; i < N; ++i) {
        const bool pipedream_steady =
            std::string(schedule) == "pipedream" && k < K - 1 && i >= K && i < N - K;
        if (pipedream_steady) {
          EXPECT_NEAR(steps[k][i], opt_new, 1e-9) << "stage " << k << " step " << i;
        }
        if (std::string(schedule) == "gpipe" || k == K - 1 || i == N - 1) {
          EXPECT_NEAR(steps[k][i], opt, 1e-9) << schedule << " stage " << k << " step " << i;
        }
      }
    }
  }
  // Without a measured new-version step, the in-place figure stands for both.
  PlanSpec s = equal_stages("pipedream", K, 1, 1, 2);
  s.model = uniform(K, 1, 2, fmt::format("opt_ms={}", opt));
  for (const auto& e : simulate(s, N).timeline.events) {
    if (e.action.op == Op::kOptimizerStep) {
      EXPECT_NEAR(e.duration(), opt * kMs, 1e-12);
    }
  }
}

TEST(ClosedForm, EverySchedulesRunsWithFewerMicroBatchesThanStages) {
  for (const auto& info : schedule_catalog()) {
    for (int M : {1, 2, 3}) {
      PlanSpec spec = equal_stages(info.name, 4, M, 1, 2);
      PipelineShape sh = test::pipeline_shape(4, M);
      if (!test::place_for(info.name, sh)) continue;  // zbv, dualpipev: M >= 2D - 1, 2D
      const auto r = simulate(spec, 4);
      EXPECT_GT(r.metrics.iteration_time_s, 0) << info.name << " M=" << M;
      EXPECT_GE(r.metrics.bubble_fraction, 0) << info.name;
      EXPECT_LT(r.metrics.bubble_fraction, 1) << info.name;
    }
  }
}

TEST(ClosedForm, IdenticalInputGivesIdenticalOutputBytes) {
  auto spec = equal_stages("1f1b", 4, 8, 1.1, 2.3);
  spec.model = uniform(8, 1.1, 2.3, "act_kb=64,param_kb=4096");
  spec.dp = 2;
  spec.cluster = testing::ideal_cluster(8, 5e9, 2e-6);
  const auto a = simulate(spec, 3), b = simulate(spec, 3);
  EXPECT_EQ(timeline_to_chrome_trace(a.timeline).dump(),
            timeline_to_chrome_trace(b.timeline).dump());
  EXPECT_EQ(metrics_to_json(a.metrics).dump(), metrics_to_json(b.metrics).dump());
}

}  // namespace
}  // namespace pipetwin
