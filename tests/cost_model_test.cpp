// core/cost_model.hpp against the closed forms of docs/design.md "Cost model terms": transfers,
// ring all-reduce, DDP buckets, frozen layers, stage costs and stage edges.
#include "core/cost_model.hpp"

#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;

constexpr double kMs = 1e-3;
constexpr double kKiB = 1024;
constexpr double kTol = 1e-15;

// 2 nodes x 2 devices: intra-node 10 GB/s and 1 us, inter-node 1 GB/s and 10 us.
Cluster cluster() {
  return test::two_level_cluster(2, 2, 10e9, 1e-6, 1e9, 1e-5);
}

// Layers with the given parameter sizes in MiB (and nothing else of note).
Profile with_params(const std::vector<double>& mib) {
  Profile p;
  for (size_t i = 0; i < mib.size(); ++i) {
    LayerProfile l;
    l.name = "l" + std::to_string(i);
    l.timings = {{1, 1e-3, 2e-3, 1e-3}};
    l.param_bytes = mib[i] * kMiB;
    p.layers.push_back(l);
  }
  return p;
}

// A bucket as (first layer, last layer, MiB).
using B = std::tuple<int, int, double>;
std::vector<B> buckets(const std::vector<double>& mib, CostOptions o = {}) {
  const CostModel cm(with_params(mib), cluster(), o);
  std::vector<int> all;
  for (size_t i = 0; i < mib.size(); ++i) all.push_back(static_cast<int>(i));
  std::vector<B> out;
  for (const auto& b : cm.ddp_buckets(all))
    out.emplace_back(b.first_layer, b.last_layer, b.bytes / kMiB);
  return out;
}

// Four layers, t(b) = 0.5 ms + per-sample * b; a skip edge 0 -> 2 besides the chain.
Profile four_layers() {
  Profile p = test::synthetic(
      "uniform:fwd_ms=1/2/3/4,bwd_ms=2/4/6/8,overhead_ms=0.5,saved_kb=1/2/3/4,param_kb=10/20/30/40,"
      "optimizer_kb=20/40/60/80,opt_ms=0.1/0.2/0.3/0.4");
  p.input_bytes_per_sample = 10;
  p.edges = {{0, 1, 100}, {1, 2, 200}, {0, 2, 50}, {2, 3, 300}};
  return p;
}

TEST(CostModel, ComputeTimesFollowTheFittedLine) {
  const CostModel cm(four_layers(), cluster());
  // Layer 1: forward 0.5 + 2b ms, backward 0.5 + 4b ms, recompute = forward; at profiled and
  // unprofiled sizes alike.
  EXPECT_NEAR(cm.forward_s(1, 1), 2.5 * kMs, kTol);
  EXPECT_NEAR(cm.forward_s(1, 3), 6.5 * kMs, kTol);
  EXPECT_NEAR(cm.forward_s(1, 32), 64.5 * kMs, 1e-13);
  EXPECT_NEAR(cm.backward_s(1, 3), 12.5 * kMs, kTol);
  EXPECT_NEAR(cm.recompute_s(1, 3), 6.5 * kMs, kTol);
  EXPECT_NEAR(cm.optimizer_s(3), 0.4 * kMs, kTol);
}

TEST(CostModel, StepIntoANewWeightVersionHasItsOwnTimeOrTheInPlaceOne) {
  Profile p = four_layers();
  p.layers[1].optimizer_new_version_s = 0.7 * kMs;  // measured on layer 1 only
  CostOptions o;
  o.compute_scale = 2;
  const CostModel cm(p, cluster(), o);
  EXPECT_NEAR(cm.optimizer_new_version_s(1), 1.4 * kMs, kTol);
  EXPECT_NEAR(cm.optimizer_new_version_s(2), cm.optimizer_s(2), kTol);
  const StageCost c = cm.stage_cost({1, 2}, 1);
  EXPECT_NEAR(c.optimizer_s, 2 * (0.2 + 0.3) * kMs, kTol);
  EXPECT_NEAR(c.optimizer_new_version_s, 2 * (0.7 + 0.3) * kMs, kTol);
  o.frozen_layers = 2;  // a frozen layer takes no step of either kind
  EXPECT_EQ(CostModel(p, cluster(), o).optimizer_new_version_s(1), 0);
}

TEST(CostModel, ComputeScaleMultipliesEveryTime) {
  CostOptions o;
  o.compute_scale = 2.5;
  const CostModel fast(four_layers(), cluster());
  const CostModel slow(four_layers(), cluster(), o);
  for (int l = 0; l < 4; ++l) {
    EXPECT_NEAR(slow.forward_s(l, 3), 2.5 * fast.forward_s(l, 3), kTol);
    EXPECT_NEAR(slow.backward_s(l, 3), 2.5 * fast.backward_s(l, 3), kTol);
    EXPECT_NEAR(slow.recompute_s(l, 3), 2.5 * fast.recompute_s(l, 3), kTol);
    EXPECT_NEAR(slow.optimizer_s(l), 2.5 * fast.optimizer_s(l), kTol);
  }
  // Links are not the device: transfers do not scale.
  EXPECT_EQ(slow.transfer_s(1e6, 0, 1), fast.transfer_s(1e6, 0, 1));
  o.compute_scale = 0;
  EXPECT_EQ(input_error([&] { CostModel(four_layers(), cluster(), o); }),
            "compute scale must be positive (0 given)");
}

TEST(CostModel, TransferIsLatencyPlusBytesOverBandwidth) {
  const CostModel cm(four_layers(), cluster());
  EXPECT_NEAR(cm.transfer_s(1e6, 0, 1), 1e-6 + 1e6 / 10e9, kTol);  // same node
  EXPECT_NEAR(cm.transfer_s(1e6, 3, 2), 1e-6 + 1e6 / 10e9, kTol);
  EXPECT_NEAR(cm.transfer_s(1e6, 1, 2), 1e-5 + 1e6 / 1e9, kTol);  // across nodes
  EXPECT_EQ(cm.transfer_s(1e6, 2, 2), 0);                         // same device
  EXPECT_EQ(cm.transfer_s(0, 0, 3), 0);                           // nothing to send
}

TEST(CostModel, RingAllReduce) {
  const CostModel cm(four_layers(), cluster());
  const double bytes = 8e6;
  // n = 2 inside a node: 2(n-1)/n * bytes / bw + 2(n-1) * latency.
  EXPECT_NEAR(cm.allreduce_s(bytes, {0, 1}), 1.0 * bytes / 10e9 + 2 * 1e-6, kTol);
  EXPECT_NEAR(cm.allreduce_s(bytes, {2, 3}), 1.0 * bytes / 10e9 + 2 * 1e-6, kTol);
  // A ring over both nodes runs at its slowest link, the inter-node one.
  EXPECT_NEAR(cm.allreduce_s(bytes, {0, 1, 2, 3}), 1.5 * bytes / 1e9 + 6 * 1e-5, kTol);
  EXPECT_NEAR(cm.allreduce_s(bytes, {0, 1, 2}), 4.0 / 3.0 * bytes / 1e9 + 4 * 1e-5, kTol);
  EXPECT_NEAR(cm.allreduce_s(bytes, {0, 2}), 1.0 * bytes / 1e9 + 2 * 1e-5, kTol);
  EXPECT_EQ(cm.allreduce_s(bytes, {1}), 0);
  EXPECT_EQ(cm.allreduce_s(bytes, {}), 0);
}

TEST(DdpBuckets, SmallFirstBucketThenCapped) {
  // Reverse order: 20 (>= 1 MiB closes bucket 0), then 10 + 0.5 + 0.5 + 0.5 < 25 MiB stays open.
  EXPECT_THAT(buckets({0.5, 0.5, 0.5, 10, 20}), ElementsAre(B{4, 4, 20}, B{0, 3, 11.5}));
  // Six 10 MiB layers: {5}; 10 + 10 + 10 >= 25 closes {2..4}; {0, 1} is what is left.
  EXPECT_THAT(buckets({10, 10, 10, 10, 10, 10}),
              ElementsAre(B{5, 5, 10}, B{2, 4, 30}, B{0, 1, 20}));
}

TEST(DdpBuckets, LayersBiggerThanTheCapGetABucketOfTheirOwn) {
  EXPECT_THAT(buckets({40, 40}), ElementsAre(B{1, 1, 40}, B{0, 0, 40}));
  // A big layer joins the bucket that is open when it comes, and closes it.
  EXPECT_THAT(buckets({30, 0, 0.25, 0.25, 0.25, 0.25, 0.25}),
              ElementsAre(B{3, 6, 1}, B{0, 2, 30.25}));
}

TEST(DdpBuckets, ZeroParameterLayersHaveNoGradient) {
  EXPECT_THAT(buckets({1, 1, 0}), ElementsAre(B{1, 1, 1}, B{0, 0, 1}));
  EXPECT_TRUE(buckets({0, 0, 0}).empty());
}

TEST(DdpBuckets, CapsComeFromTheOptions) {
  CostOptions o;
  o.first_bucket_bytes = 2 * kMiB;
  o.bucket_cap_bytes = 3 * kMiB;
  EXPECT_THAT(buckets({1, 1, 1, 1, 1, 1}, o), ElementsAre(B{4, 5, 2}, B{1, 3, 3}, B{0, 0, 1}));
}

TEST(DdpBuckets, FrozenLayersHaveNoGradient) {
  CostOptions o;
  o.frozen_layers = 2;
  EXPECT_THAT(buckets({1, 1, 1, 1}, o), ElementsAre(B{3, 3, 1}, B{2, 2, 1}));
}

TEST(DdpBuckets, OnlyTheStagesLayers) {
  const CostModel cm(with_params({10, 10, 10, 10, 10, 10}), cluster());
  const auto b = cm.ddp_buckets({2, 3});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first_layer, 3);
  EXPECT_EQ(b[1].first_layer, 2);
  EXPECT_EQ(b[1].bytes, 10 * kMiB);
}

TEST(StageCost, SumsTheLayersAtTheMicroBatchSize) {
  const CostModel cm(four_layers(), cluster());
  const StageCost c = cm.stage_cost({1, 2}, 4);
  // forward (0.5 + 2*4) + (0.5 + 3*4) ms; backward (0.5 + 4*4) + (0.5 + 6*4) ms.
  EXPECT_NEAR(c.forward_s, 21 * kMs, kTol);
  EXPECT_NEAR(c.backward_s, 41 * kMs, kTol);
  EXPECT_NEAR(c.recompute_s, 21 * kMs, kTol);
  EXPECT_NEAR(c.optimizer_s, 0.5 * kMs, kTol);
  EXPECT_EQ(c.param_bytes, 50 * kKiB);
  EXPECT_EQ(c.grad_bytes, 50 * kKiB);
  EXPECT_EQ(c.optimizer_bytes, 100 * kKiB);
  EXPECT_EQ(c.frozen_bytes, 0);
  EXPECT_EQ(c.static_bytes(), 200 * kKiB);
  EXPECT_EQ(c.saved_bytes, (2 + 3) * kKiB * 4);
  EXPECT_THAT(c.layers, ElementsAre(1, 2));
}

TEST(StageCost, InputBytesCountEveryEdgeFromOutsideIncludingSkips) {
  const CostModel cm(four_layers(), cluster());
  const double b = 4;
  EXPECT_EQ(cm.stage_cost({0}, b).input_bytes, 10 * b);             // the model input
  EXPECT_EQ(cm.stage_cost({0, 1}, b).input_bytes, 10 * b);          // 0 -> 1 stays inside
  EXPECT_EQ(cm.stage_cost({1, 2}, b).input_bytes, (100 + 50) * b);  // 0 -> 1 and skip 0 -> 2
  EXPECT_EQ(cm.stage_cost({2, 3}, b).input_bytes, (200 + 50) * b);  // 1 -> 2 and skip 0 -> 2
  EXPECT_EQ(cm.stage_cost({3}, b).input_bytes, 300 * b);
  EXPECT_EQ(cm.stage_cost({0, 1, 2, 3}, b).input_bytes, 10 * b);
}

// The gradient of a skip waits, from the backward of the layer that reads it to the backward of
// the layer that made it, on top of what the layers in between hold.
TEST(StageCost, SkipGradientsWaitForTheirProducersBackward) {
  Profile p = four_layers();
  for (auto& l : p.layers) {
    l.saved_bytes_per_sample = 0;  // nothing released: the working memory is a sum of terms
    l.param_bytes = 0;
    l.output_bytes_per_sample = 1;
  }
  p.layers[2].output_bytes_per_sample = 5000;
  p.layers[2].param_bytes = 10000;
  p.edges = {{0, 1, 1}, {1, 2, 1}, {2, 3, 5000}, {0, 3, 1000}};
  const CostModel cm(p, cluster());
  // Layer 3: its output gradient 1 and input gradients 5000 + 1000 = 6001. Layer 2: output
  // gradient 5000, input gradient 1, parameter gradients 10000, less its own output 5000, and the
  // skip gradient 1000 still waiting for layer 0 = 11001.
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({1, 2, 3}, 1), 11001);
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({2, 3}, 1), 11001);
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({3}, 1), 6001);
  // A stage whose layer 0 also sends to another stage (the skip 0 -> 3) holds that output's
  // gradient, received with the last layer's, through its whole backward: 15001 + 1000.
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({0, 1, 2}, 1), 16001);
}

// A layer that reads a skip counts its measured backward where the profile has one (a U-Net
// decoder block's concatenation); a chain layer keeps the estimate.
TEST(StageCost, AMeasuredBackwardCountsForLayersThatReadASkip) {
  Profile p = four_layers();
  for (auto& l : p.layers) {
    l.saved_bytes_per_sample = 0;
    l.param_bytes = 0;
    l.output_bytes_per_sample = 1;
  }
  p.edges = {{0, 1, 1}, {1, 2, 1}, {2, 3, 5000}, {0, 3, 1000}};
  p.layers[3].backward_bytes_per_sample = 9000;
  p.layers[2].backward_bytes_per_sample = 90000;
  const CostModel cm(p, cluster());
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({3}, 1), 1 + 9000);  // not the estimate's 6000
  EXPECT_DOUBLE_EQ(cm.backward_working_bytes({2}, 1), 1 + 1);     // the estimate
  p.layers[3].backward_bytes_per_sample = 10;  // below the estimate: the estimate is a floor
  EXPECT_DOUBLE_EQ(CostModel(p, cluster()).backward_working_bytes({3}, 1), 1 + 6000);
}

TEST(StageCost, FrozenLayersHaveNoBackwardAndCountLambdaOfTheirFootprint) {
  CostOptions o;
  o.frozen_layers = 2;
  o.lambda_frozen = 1.0 / 6.0;
  const CostModel cm(four_layers(), cluster(), o);
  EXPECT_TRUE(cm.frozen(1));
  EXPECT_FALSE(cm.frozen(2));
  EXPECT_EQ(cm.backward_s(0, 4), 0);
  EXPECT_EQ(cm.recompute_s(1, 4), 0);
  EXPECT_EQ(cm.optimizer_s(1), 0);
  EXPECT_NEAR(cm.forward_s(0, 4), 4.5 * kMs, kTol);  // frozen layers still run forward
  const StageCost c = cm.stage_cost({0, 1, 2}, 4);
  EXPECT_NEAR(c.forward_s, (4.5 + 8.5 + 12.5) * kMs, kTol);
  EXPECT_NEAR(c.backward_s, 24.5 * kMs, kTol);  // layer 2 only
  EXPECT_NEAR(c.recompute_s, 12.5 * kMs, kTol);
  EXPECT_NEAR(c.optimizer_s, 0.3 * kMs, kTol);
  EXPECT_EQ(c.param_bytes, 30 * kKiB);
  EXPECT_EQ(c.grad_bytes, 30 * kKiB);
  EXPECT_EQ(c.optimizer_bytes, 60 * kKiB);
  // Footprint = parameters + gradients + optimizer state: (2*10 + 20) + (2*20 + 40) KiB.
  EXPECT_NEAR(c.frozen_bytes, (40 + 80) * kKiB / 6, 1e-9);
  // No backward runs through them, so they keep no activations for it.
  EXPECT_EQ(c.saved_bytes, 3 * kKiB * 4);
  ASSERT_EQ(c.buckets.size(), 1u);
  EXPECT_EQ(c.buckets[0].first_layer, 2);
}

TEST(StageCost, ColdStartExtrasAreFittedSummedAndTakenToTheUnsharedSpeed) {
  // Layer l, at b = 1 and 4: forward extras {0.1, 0.4} ms * (l + 1) after 1 ms and twice that
  // after 4 ms; backward extras three times the forward's; contention 1.25 (forward) and 1.5
  // (backward). The fit through b = 1 and 4 is exact, so at b = 2 layer l's forward extra after
  // 1 ms is 0.2 (l + 1) ms as measured beside the co-runner, 0.2 (l + 1) / 1.25 alone.
  Profile p = test::synthetic("uniform:layers=3,fwd_ms=1,bwd_ms=2");
  p.cold_pauses_s = {1 * kMs, 4 * kMs};
  for (size_t l = 0; l < 3; ++l) {
    const double k = static_cast<double>(l + 1) * kMs;
    p.layers[l].timings = {{1, 1 * kMs, 2 * kMs, 1 * kMs, 1.25, 1.5},
                           {4, 4 * kMs, 8 * kMs, 4 * kMs, 1.25, 1.5}};
    p.layers[l].timings[0].cold_forward_s = {0.1 * k, 0.2 * k};
    p.layers[l].timings[0].cold_backward_s = {0.3 * k, 0.6 * k};
    p.layers[l].timings[1].cold_forward_s = {0.4 * k, 0.8 * k};
    p.layers[l].timings[1].cold_backward_s = {1.2 * k, 2.4 * k};
  }
  CostOptions o;
  o.frozen_layers = 1;  // no backward, so no cold backward either
  const CostModel cm(p, cluster(), o);
  const StageCost c = cm.stage_cost({0, 1, 2}, 2);
  ASSERT_EQ(c.cold_forward_s.size(), 2u);
  ASSERT_EQ(c.cold_backward_s.size(), 2u);
  EXPECT_NEAR(c.cold_forward_s[0], 0.2 * (1 + 2 + 3) / 1.25 * kMs, 1e-12);
  EXPECT_NEAR(c.cold_forward_s[1], 0.4 * (1 + 2 + 3) / 1.25 * kMs, 1e-12);
  EXPECT_NEAR(c.cold_backward_s[0], 0.6 * (2 + 3) / 1.5 * kMs, 1e-12);
  EXPECT_NEAR(c.cold_backward_s[1], 1.2 * (2 + 3) / 1.5 * kMs, 1e-12);
  // Without cold figures, none.
  const StageCost plain = CostModel(four_layers(), cluster()).stage_cost({0, 1}, 2);
  EXPECT_TRUE(plain.cold_forward_s.empty());
  EXPECT_TRUE(plain.cold_backward_s.empty());
}

TEST(StageCost, BucketsAreReadyWhenTheirLowestLayersBackwardEnds) {
  // Backward 1, 2, 3, 4 ms (b = 1), 1 MiB per layer: buckets {3} and {0..2}. Backward runs from
  // layer 3 down: {3} is ready after 4 ms, {0..2} after 4 + 3 + 2 + 1 = 10 ms.
  Profile p = test::synthetic("uniform:bwd_ms=1/2/3/4,param_kb=1024");
  const CostModel cm(p, cluster());
  const StageCost c = cm.stage_cost({0, 1, 2, 3}, 1);
  ASSERT_EQ(c.buckets.size(), 2u);
  ASSERT_EQ(c.bucket_ready_s.size(), 2u);
  EXPECT_NEAR(c.bucket_ready_s[0], 4 * kMs, kTol);
  EXPECT_NEAR(c.bucket_ready_s[1], 10 * kMs, kTol);
}

TEST(StageEdges, SumEdgesCrossingBetweenTwoStages) {
  const CostModel cm(four_layers(), cluster());
  const auto two = cm.stage_edges({0, 0, 1, 1});
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].from, 0);
  EXPECT_EQ(two[0].to, 1);
  EXPECT_EQ(two[0].bytes_per_sample, 200 + 50);  // 1 -> 2 and the skip 0 -> 2
  const auto three = cm.stage_edges({0, 1, 2, 2});
  ASSERT_EQ(three.size(), 3u);
  std::vector<std::tuple<int, int, double>> got;
  for (const auto& e : three) got.emplace_back(e.from, e.to, e.bytes_per_sample);
  // The skip goes straight from stage 0 to stage 2, not through stage 1.
  EXPECT_THAT(got, ::testing::UnorderedElementsAre(std::tuple(0, 1, 100.0), std::tuple(0, 2, 50.0),
                                                   std::tuple(1, 2, 200.0)));
  EXPECT_TRUE(cm.stage_edges({0, 0, 0, 0}).empty());
}

TEST(StageEdges, AProducerReadByTwoLayersOfOneStageTravelsOnce) {
  // Layer 0's output is read by layers 1 and 2, both on stage 1: the executor sends it once
  // (exec/runtime/stage_io.hpp), so the edge carries it once, not 100 + 50. This fixture gives the
  // two edges of layer 0 different sizes; the larger counts.
  const CostModel cm(four_layers(), cluster());
  const auto one = cm.stage_edges({0, 1, 1, 1});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].bytes_per_sample, 100);
  // A ResNet-style block input, read by the block's first layer and by its residual add, both on
  // the next stage: once.
  Profile p = four_layers();
  p.edges = {{0, 1, 64}, {1, 2, 64}, {0, 2, 64}, {2, 3, 64}};
  const auto block = CostModel(p, cluster()).stage_edges({0, 1, 1, 1});
  ASSERT_EQ(block.size(), 1u);
  EXPECT_EQ(block[0].bytes_per_sample, 64);
  // Readers on two different stages: once to each.
  const auto apart = CostModel(p, cluster()).stage_edges({0, 1, 2, 2});
  ASSERT_EQ(apart.size(), 3u);
  EXPECT_EQ(apart[0].bytes_per_sample + apart[1].bytes_per_sample + apart[2].bytes_per_sample,
            3 * 64);
}

TEST(StageEdges, RejectBackwardEdges) {
  const CostModel cm(four_layers(), cluster());
  EXPECT_EQ(input_error([&] {
              cm.stage_edges({0, 1, 0, 1});
            }),
            "partition: edge from layer 1 (stage 1) to layer 2 (stage 0) runs backwards; stages "
            "must follow the model's data flow");
}

TEST(CostModel, FrozenLayersOutOfRange) {
  CostOptions o;
  o.frozen_layers = 5;
  EXPECT_EQ(input_error([&] { CostModel(four_layers(), cluster(), o); }),
            "frozen layers must be in 0..4 (5 given)");
  o.frozen_layers = 4;  // everything frozen is allowed
  EXPECT_NO_THROW(CostModel(four_layers(), cluster(), o));
}

}  // namespace
}  // namespace pipetwin
