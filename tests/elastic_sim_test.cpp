// sim/elastic_sim: a whole elastic run on a synthetic transformer, against totals computed by
// hand from GPipe's closed form.
//
// The model: 4 blocks of attention (1 M parameters) and MLP (2 M), every sub-layer 1 ms forward
// and 2 ms backward per sample; 1 node of 4 devices with links so fast that transfers and
// all-reduces cost nothing; 64 samples per epoch, 4 samples per replica per step, K0 = 4.
//
// GPipe with stage times f_k, b_k per micro-batch and M micro-batches (a flow shop of identical
// jobs, forward then backward): iteration = sum f + (M - 1) max f + sum b + (M - 1) max b.
//
// AutoPipe (sizes 1, 2, 1, 2, 1, 2, 1, 2; lambda_frozen = 1/6):
//   0 frozen: stages [0,1] [2,3] [4,5] [6,7] (3 M each, M_GPU(0) = 3); M in [4, 24] dividing 4:
//     M = 4, f = 2, b = 4 on every stage: 4*2 + 3*2 + 4*4 + 3*4 = 42 ms; 16 steps = 672 ms.
//   2 frozen (profile layers 0..3, 6 M, weight 1): K = 2 would need [1 + 1, 2 + 1 + 2] = 5 > 3,
//     so K = 4: stages [0..4] [5] [6] [7]; f = 5, 1, 1, 1; b = 2, 2, 2, 2; M = 4:
//     8 + 3*5 + 8 + 3*2 = 37 ms; 16 steps = 592 ms.
//   3 frozen (0..5, 9 M, weight 1.5): K = 2 gives [2.5, 2] <= 3, K = 1 gives 4.5 > 3: K = 2,
//     2 replicas; stages [0..6] [7]. M = 2: f = 14, 2, b = 4, 4: 16 + 14 + 8 + 4 = 42; M = 4:
//     f = 7, 1, b = 2, 2: 8 + 21 + 4 + 6 = 39 ms. M = 4; 64 / (2 * 4) = 8 steps = 312 ms.
// With AutoPipe, F_frozen runs outside the Pipe, on the replica's whole batch before it: a step is
// that forward plus the Pipe's iteration. Where stage 0's active part is the Pipe's slowest
// forward (above: 2 frozen, F_frozen 4 samples x 4 layers = 16 ms, Pipe f = 1, 1, 1, 1:
// 16 + 4 + 3 + 8 + 6 = 37 ms; 3 frozen: 24 ms + Pipe M = 4 f = b/2 = 1, 1: 24 + 15 = 39 ms) this
// equals running F_frozen per micro-batch on stage 0; FrozenLayersRunOutsideThePipe below is a
// case where the two differ.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/elastic_sim.hpp"
#include "tests/sim_test_util.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::sim {
namespace {

using elastic::FreezeTrace;
using elastic::FreezeUnit;
using elastic::TransitionOverheads;
using test::input_error;

constexpr double kMs = 1e-3;

Profile transformer() {
  Profile p = test::synthetic("uniform:layers=8,fwd_ms=1,bwd_ms=2,act_kb=1");
  for (int l = 0; l < 8; ++l) {
    p.layers[static_cast<size_t>(l)].kind = l % 2 == 0 ? "attention" : "mlp";
    p.layers[static_cast<size_t>(l)].param_bytes = (l % 2 == 0 ? 1 : 2) * 4e6;
  }
  return p;
}

FreezeTrace trace(std::vector<elastic::FreezeEvent> events) {
  FreezeTrace t;
  t.layers = 4;
  t.events = std::move(events);
  return t;
}

ElasticConfig config() {
  ElasticConfig c;
  c.profile = transformer();
  c.cluster = testing::ideal_cluster(4, 1e30, 0, 1);
  c.stages = 4;
  c.batch = 4;
  c.epochs = 3;
  c.samples = 64;
  c.trace = trace({{1, 0, -1, 2}, {2, 0, -1, 3}});
  c.autocache = false;
  c.overheads = TransitionOverheads::none();
  c.state_transfer = false;
  return c;
}

TEST(ElasticSim, HandComputedTotal) {
  const ElasticReport r = simulate_elastic(config());
  EXPECT_NEAR(r.baseline.total_s, 3 * 672 * kMs, 1e-9);
  EXPECT_NEAR(r.elastic.total_s, (672 + 592 + 312) * kMs, 1e-9);
  EXPECT_NEAR(r.speedup, 2016.0 / 1576.0, 1e-9);
  const auto& e = r.elastic.log.epochs;
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].K, 4);
  EXPECT_EQ(e[0].dp, 1);
  EXPECT_EQ(e[0].chunks, 4);
  EXPECT_EQ(e[0].steps, 16);
  EXPECT_EQ(e[1].frozen_layers, 2);
  EXPECT_EQ(e[1].K, 4);
  EXPECT_EQ(e[2].frozen_layers, 3);
  EXPECT_EQ(e[2].K, 2);
  EXPECT_EQ(e[2].dp, 2);
  EXPECT_EQ(e[2].chunks, 4);
  EXPECT_EQ(e[2].steps, 8);
  EXPECT_EQ(e[2].samples, 64);
  EXPECT_NEAR(e[2].throughput_samples_per_s, 64 / (312 * kMs), 1e-6);
  ASSERT_EQ(r.elastic.trace.events.size(), 2u);
  EXPECT_EQ(r.elastic.trace.events[1].frozen_layers, 3);
  // Each transition keeps get_optimal_chunks' profile: at 3 frozen, M = 2 and 4 take 18 and
  // 15 ms in the Pipe (F_frozen's 24 ms comes before it and does not depend on M).
  ASSERT_EQ(r.elastic.transitions.size(), 3u);
  const auto& chunks = r.elastic.transitions[2].chunk_times;
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].first, 2);
  EXPECT_NEAR(chunks[0].second, 18 * kMs, 1e-12);
  EXPECT_EQ(chunks[1].first, 4);
  EXPECT_NEAR(chunks[1].second, 15 * kMs, 1e-12);
  EXPECT_EQ(r.baseline.transitions[0].chunk_times.size(), 1u);  // M = 4 only at K = 4
}

TEST(ElasticSim, Figure9Breakdown) {
  // Freeze only keeps [0,1] [2,3] [4,5] [6,7] and M = 4: with 2 frozen, stages 0 and 1 have no
  // backward: f = 2 each, b = 0, 0, 4, 4: 8 + 6 + 8 + 12 = 34 ms; with 3 frozen b = 0, 0, 0, 4:
  // 8 + 6 + 4 + 12 = 30 ms. + AutoPipe without AutoDP: epoch 2 at K = 2 but one replica:
  // 16 steps of 39 ms.
  const ElasticReport r = simulate_elastic(config(), true);
  ASSERT_EQ(r.breakdown.size(), 4u);
  EXPECT_EQ(r.breakdown[0].name, "freeze only");
  EXPECT_NEAR(r.breakdown[0].total_s, (672 + 16 * 34 + 16 * 30) * kMs, 1e-9);
  EXPECT_EQ(r.breakdown[1].name, "freeze + AutoPipe");
  EXPECT_NEAR(r.breakdown[1].total_s, (672 + 592 + 16 * 39) * kMs, 1e-9);
  EXPECT_EQ(r.breakdown[2].name, "freeze + AutoPipe + AutoDP");
  EXPECT_NEAR(r.breakdown[2].total_s, (672 + 592 + 312) * kMs, 1e-9);
  EXPECT_EQ(r.breakdown[3].name, "freeze + AutoPipe + AutoDP + AutoCache");
  EXPECT_EQ(r.elastic.name, "freeze + AutoPipe + AutoDP");  // AutoCache is off
}

TEST(ElasticSim, AutoCacheFillsThenReplacesLazily) {
  // Reading costs nothing on these links, so AutoCache turns on at the first freeze. Epoch 1
  // fills the cache: every sample still runs layers 0..3 (37 ms, as without it). Epoch 2: each
  // sample reads layer 3's output and runs layers 4 and 5 only: stage 0 forward 2 + 1 = 3 ms,
  // 4 + 9 + 4 + 6 = 23 ms (M = 4, best also with the cache: 15 ms against 18 for M = 2).
  // Epoch 3 only reads: f = 1, 1: 2 + 3 + 4 + 6 = 15 ms.
  ElasticConfig c = config();
  c.autocache = true;
  c.epochs = 4;
  const ElasticRun run = simulate_elastic_run(c);
  EXPECT_EQ(run.name, "freeze + AutoPipe + AutoDP + AutoCache");
  const auto& e = run.log.epochs;
  EXPECT_FALSE(e[0].cache);
  EXPECT_TRUE(e[1].cache);
  EXPECT_NEAR(e[1].compute_s, 16 * 37 * kMs, 1e-6);
  EXPECT_NEAR(e[2].compute_s, 8 * 23 * kMs, 1e-6);
  EXPECT_NEAR(e[3].compute_s, 8 * 15 * kMs, 1e-6);
  // When reading is slower than the frozen layers, AutoCache stays off.
  c.cache_costs.host_bandwidth = 1;
  const ElasticRun off = simulate_elastic_run(c);
  EXPECT_FALSE(off.log.epochs[3].cache);
  EXPECT_NEAR(off.total_s, (672 + 592 + 312 + 312) * kMs, 1e-9);
}

TEST(ElasticSim, MidEpochTransitionAndAlphaBound) {
  ElasticConfig c = config();
  c.trace = trace({{1, 32, -1, 2}, {2, 0, -1, 3}});  // half-way through epoch 1
  EXPECT_NEAR(simulate_elastic_run(c).total_s, (672 + 8 * 42 + 8 * 37 + 312) * kMs, 1e-9);
  // The alpha bound alone, alpha = 1/2 over L = 4: floor(2) = 2 at epoch 1, floor(3) = 3 at 2.
  c.trace.reset();
  c.alpha = 0.5;
  EXPECT_NEAR(simulate_elastic_run(c).total_s, (672 + 592 + 312) * kMs, 1e-9);
  // Every 8 steps: 2 frozen after step 8, 3 after step 16 (the end of epoch 0), then the bound
  // (3.5, 3.75) stays at 3.
  c.unit = FreezeUnit::kStep;
  c.interval = 8;
  const ElasticRun steps = simulate_elastic_run(c);
  EXPECT_NEAR(steps.total_s, (8 * 42 + 8 * 37 + 16 * 39) * kMs, 1e-9);
  ASSERT_EQ(steps.transitions.size(), 3u);  // start-up, then two freezes
  EXPECT_EQ(steps.transitions[1].step, 8);
  EXPECT_EQ(steps.transitions[1].sample, 32);
  EXPECT_EQ(steps.transitions[2].K, 2);
}

TEST(ElasticSim, Table4TransitionOverheads) {
  // Start-up at length 4 takes the length-4 row (10.2 s); the re-partition at epoch 1 keeps
  // K = 4 (P + D = 1.9 s); the compression to 2 starts new processes (5.5 s).
  ElasticConfig c = config();
  c.overheads = TransitionOverheads::table4();
  const ElasticReport r = simulate_elastic(c);
  EXPECT_NEAR(r.baseline.total_s, 2.016 + 10.2, 1e-9);
  EXPECT_NEAR(r.elastic.total_s, 1.576 + 10.2 + 1.9 + 5.5, 1e-9);
  EXPECT_NEAR(r.elastic.log.epochs[0].transition_s, 10.2, 1e-12);
  EXPECT_NEAR(r.elastic.log.epochs[2].transition_s, 5.5, 1e-12);
}

TEST(ElasticSim, FrozenLayersRunOutsideThePipe) {
  // 1 frozen (profile layers 0, 1; weight 3/6 = 0.5). load_balance over K = 4 of the active
  // sizes 1, 2, 1, 2, 1, 2: mean 9.5 / 4 = 2.375, var 0.25 / 4: stage 0 = F_frozen + layer 2
  // (1.5; + 2 would pass 2.4375), then [3], [4, 5], [6, 7]; K = 2 would need >= 4.75 > 3.
  // F_frozen on the batch: 4 samples x 2 layers = 8 ms; the Pipe (M = 4, one sample each):
  // f = 1, 1, 2, 2, b = 2, 2, 4, 4: 6 + 3 * 2 + 12 + 3 * 4 = 36 ms; a step 44 ms. Run per
  // micro-batch on stage 0 instead, F_frozen would make f0 = 3: 8 + 9 + 12 + 12 = 41 ms.
  ElasticConfig c = config();
  c.epochs = 2;
  c.trace = trace({{1, 0, -1, 1}});
  const ElasticRun run = simulate_elastic_run(c);
  ASSERT_EQ(run.log.epochs.size(), 2u);
  EXPECT_EQ(run.log.epochs[1].K, 4);
  EXPECT_NEAR(run.log.epochs[1].compute_s, 16 * 44 * kMs, 1e-9);
  // Freeze only keeps F_frozen's layers in stage 0 ([0, 1]: f = 2, b = 0; then f = 2, b = 4):
  // 8 + 6 + 12 + 12 = 38 ms.
  c.autopipe = c.autodp = false;
  EXPECT_NEAR(simulate_elastic_run(c).log.epochs[1].compute_s, 16 * 38 * kMs, 1e-9);
}

TEST(ElasticSim, CommunicationIsTheReplicasAllReduceTime) {
  // K = 1 on 2 nodes x 4 devices: 8 replicas, one ring over the 1 GB/s inter-node link:
  // 2 (n - 1) / n = 1.75 bytes per gradient byte. One replica's buckets run one after another,
  // so per step the all-reduce time is 1.75 x the active parameter bytes / 1 GB/s: 48 MB of
  // parameters, 84 ms; with 2 frozen (24 MB active) 42 ms; with 3 (12 MB) 21 ms. 64 samples in
  // steps of 8 x 4: 2 steps per epoch.
  ElasticConfig c = config();
  c.cluster = test::two_level_cluster(2, 4, 1e30, 0, 1e9, 0);
  c.stages = 1;
  const ElasticReport r = simulate_elastic(c);
  EXPECT_NEAR(r.baseline.comm_s, 3 * 2 * 84 * kMs, 1e-9);
  EXPECT_NEAR(r.elastic.comm_s, 2 * (84 + 42 + 21) * kMs, 1e-9);
  EXPECT_EQ(r.elastic.log.epochs[2].dp, 8);
}

TEST(ElasticSim, ChunkProfileAndCacheThreshold) {
  // profile_chunks: at 3 frozen the state is K = 2 with 2 replicas; M in {2, 4}: the Pipe takes
  // 18 and 15 ms (see the top), F_frozen is not part of it. 8 samples per step.
  const std::vector<ChunkPoint> points = profile_chunks(config(), 3);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].K, 2);
  EXPECT_EQ(points[0].dp, 2);
  EXPECT_EQ(points[0].chunks, 2);
  EXPECT_NEAR(points[0].iteration_s, 18 * kMs, 1e-12);
  EXPECT_NEAR(points[1].iteration_s, 15 * kMs, 1e-12);
  EXPECT_NEAR(points[1].throughput, 8 / (15 * kMs), 1e-6);
  EXPECT_FALSE(points[0].best);
  EXPECT_TRUE(points[1].best);
  // cache_threshold_layers: f frozen layers cost 2 f ms per sample; reading one activation
  // costs bytes / bandwidth. Reading in 3 ms pays off from 2 layers (4 ms), in 5 ms from 3.
  ElasticConfig c = config();
  const double bytes = c.profile.layers[0].output_bytes_per_sample;
  EXPECT_EQ(cache_threshold_layers(c), 1);  // reading is free on these links
  c.cache_costs.host_bandwidth = bytes / 3e-3;
  EXPECT_EQ(cache_threshold_layers(c), 2);
  c.cache_costs.host_bandwidth = bytes / 5e-3;
  EXPECT_EQ(cache_threshold_layers(c), 3);
  c.cache_costs.host_bandwidth = bytes / 7e-3;  // 3 frozen (6 ms) is the most that may freeze
  EXPECT_EQ(cache_threshold_layers(c), 0);
}

TEST(ElasticSimErrors, NameTheProblem) {
  ElasticConfig c = config();
  c.trace->layers = 12;
  EXPECT_EQ(input_error([&] { simulate_elastic(c); }),
            "elastic simulation: the freeze trace counts 12 layers, the model has 4");
  c = config();
  c.autopipe = false;
  EXPECT_EQ(input_error([&] { simulate_elastic_run(c); }),
            "elastic simulation: AutoDP needs AutoPipe (replicas come from shorter pipelines)");
  c = config();
  c.stages = 8;
  EXPECT_EQ(input_error([&] { simulate_elastic(c); }),
            "autodp: pipeline length must be in 1..4 (devices per node), 8 given");
  c = config();
  c.trace.reset();
  c.alpha = 1;
  EXPECT_EQ(input_error([&] { simulate_elastic(c); }),
            "elastic simulation: alpha must be in (0, 1) (1 given)");
  c = config();
  c.samples = 0;
  EXPECT_EQ(input_error([&] { simulate_elastic(c); }),
            "elastic simulation: samples per epoch must be at least the nodes (0 < 1)");
}

}  // namespace
}  // namespace pipetwin::sim
