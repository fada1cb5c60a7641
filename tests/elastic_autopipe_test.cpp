// core/elastic/transformer_layers and autopipe: Algorithm 1 on a worked example, the
// compression criterion (Equation 2), chunk choice, and the `autopipe` partitioner.
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/elastic/autopipe.hpp"
#include "core/elastic/transformer_layers.hpp"
#include "core/partition/partitioner.hpp"
#include "profiles/model_source.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

// A BERT-like profile: embedding (8 M parameters), 6 blocks of attention (2 M) and MLP (4 M),
// head (1 M); float32, so 4 bytes per parameter.
Profile worked_example() {
  Profile p = test::synthetic("uniform:layers=14");
  std::vector<std::pair<std::string, double>> layers = {{"embedding", 8}};
  for (int b = 0; b < 6; ++b) {
    layers.emplace_back("attention", 2);
    layers.emplace_back("mlp", 4);
  }
  layers.emplace_back("head", 1);
  for (size_t i = 0; i < layers.size(); ++i) {
    p.layers[i].kind = layers[i].first;
    p.layers[i].param_bytes = layers[i].second * 4e6;
  }
  return p;
}

TEST(TransformerLayers, GroupsAttentionAndMlpIntoBlocks) {
  const TransformerLayers t = TransformerLayers::from_profile(worked_example());
  EXPECT_EQ(t.layers(), 6);
  EXPECT_EQ(t.prefix_layers(), 1);
  EXPECT_EQ(t.frozen_profile_layers(0), 0);
  EXPECT_EQ(t.frozen_profile_layers(1), 3);   // embedding + block 0
  EXPECT_EQ(t.frozen_profile_layers(6), 13);  // everything but the head
  const Profile bert = load_profile(default_traces_dir() + "/cpu-core/bert-tiny.profile.json");
  const TransformerLayers b = TransformerLayers::from_profile(bert);
  EXPECT_EQ(b.layers(), 2);
  EXPECT_EQ(b.first(1), 3);
  EXPECT_EQ(b.frozen_profile_layers(2), 5);
}

TEST(TransformerLayers, OneLayerPerProfileLayerWithoutAttention) {
  Profile p = test::synthetic("uniform:layers=5");
  EXPECT_EQ(TransformerLayers::from_profile(p).layers(), 5);
  p.layers[0].kind = "embedding";
  p.layers[4].kind = "head";
  const TransformerLayers t = TransformerLayers::from_profile(p);
  EXPECT_EQ(t.layers(), 3);
  EXPECT_EQ(t.frozen_profile_layers(1), 2);
  EXPECT_EQ(input_error([&] { t.frozen_profile_layers(4); }),
            "frozen layers must be in 0..3 (4 given)");
  Profile q = test::synthetic("uniform:layers=2");
  q.layers[0].kind = "embedding";
  q.layers[1].kind = "head";
  EXPECT_EQ(input_error([&] { TransformerLayers::from_profile(q); }),
            "profile of uniform:layers=2: no layer can freeze (2 layers, all embedding or head)");
}

// load_balance on S_pipe = [8, 2,4, 2,4, 2,4, 2,4, 2,4, 2,4, 1] (sum 45), K = 4, nothing frozen.
//   k=0: mean = 45/4 = 11.25; np.var(S) = 185/14 - (45/14)^2 = 565/196 = 2.8827, / 4 = 0.7207;
//        take 8 (first), 8+2 = 10 <= 11.97, 10+4 = 14 > 11.97: B_S = 10 (2 sub-layers).
//   k=1: S_total = 35, mean = 35/3 = 11.667; var of [4, 2,4, 2,4, 2,4, 2,4, 2,4, 1] = 117/12 -
//        (35/12)^2 = 1.2431, / 3 = 0.4144; 4, 6, 10, 12 <= 12.08, 16 > : B_S = 12 (4).
//   k=2: S_total = 23, mean 11.5; var of [4,2,4,2,4,2,4,1] = 77/8 - (23/8)^2 = 1.3594, / 2 =
//        0.6797; 4, 6, 10, 12 <= 12.18, 16 > : B_S = 12 (4).
//   k=3: the rest, 4 + 2 + 4 + 1 = 11 (4).
// M_GPU(0) = 12.
TEST(AutoPipe, LoadBalanceWorkedExample) {
  const SubLayers sub = m_partition(layer_sizes(worked_example()), 0);
  EXPECT_THAT(sub.sizes, Pointwise(DoubleNear(1e-12), {8, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 2, 4, 1}));
  const Balance b = load_balance(sub.sizes, 4);
  EXPECT_THAT(b.layers, ElementsAre(2, 4, 4, 4));
  EXPECT_THAT(b.sizes, Pointwise(DoubleNear(1e-9), {10, 12, 12, 11}));
  const PipelineLayout layout = layout_pipeline(sub, 4, kDefaultLambdaFrozen);
  EXPECT_THAT(layout.stages[0], ElementsAre(0, 1));
  EXPECT_THAT(layout.stages[3], ElementsAre(10, 11, 12, 13));
  EXPECT_DOUBLE_EQ(layout.memory(), 12);
}

// Two transformer layers frozen: F_frozen = embedding + 2 blocks = 20 M, weighed 20/6 = 3.333 on
// partition 0; S_pipe = [2,4, 2,4, 2,4, 2,4, 1] (sum 25).
//   Compression to K/2 = 2: S_total = 28.333, mean 14.167, var = (81/9 - (25/9)^2) / 2 = 0.642;
//   B_S[0] = 3.333 + 2 + 4 + 2 = 11.333 (+4 = 15.333 > 14.81), B_S[1] = 17 > M_GPU(0) = 12:
//   Equation 2 fails, K stays 4.
//   K = 4: k=0 mean 7.083, threshold 7.404: 3.333 + 2 = 5.333 (+4 > ): 1 sub-layer;
//   k=1: S_total 23, mean 7.667, var (77/8 - (23/8)^2)/3 = 0.453: 4, 6 (+4 = 10 > 8.12): 2;
//   k=2: S_total 17, mean 8.5, var (57/6 - (17/6)^2)/2 = 0.736: 4, 6 (+4 > 9.24): 2;
//   k=3: 4 + 2 + 4 + 1 = 11.
TEST(AutoPipe, FrozenLayersGoToTheFirstDeviceAtLambdaFrozen) {
  const SubLayers sub = m_partition(layer_sizes(worked_example()), 5);
  EXPECT_DOUBLE_EQ(sub.frozen_size, 20);
  EXPECT_EQ(compressed_length(sub, 4, 12, kDefaultLambdaFrozen), 4);
  const PipelineLayout layout = layout_pipeline(sub, 4, kDefaultLambdaFrozen);
  EXPECT_THAT(layout.balance.layers, ElementsAre(1, 2, 2, 4));
  EXPECT_THAT(layout.balance.sizes,
              Pointwise(DoubleNear(1e-9), std::vector<double>{20.0 / 6 + 2, 6, 6, 11}));
  EXPECT_THAT(layout.stages[0], ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(layout.stages[1], ElementsAre(6, 7));
}

// Equation 2, M_GPU(T) <= M_GPU(0) = 12:
//   4 frozen (F_frozen 32 M, weight 5.333; S_pipe [2,4,2,4,1]): K = 2 gives B_S = [5.333 + 2,
//   4 + 2 + 4 + 1] = [7.333, 11] <= 12, compress; K = 1 gives 18.333 > 12, stop at 2.
//   5 frozen (weight 38/6 = 6.333; S_pipe [2,4,1]): K = 1 gives 13.333 > 12, stay at 2.
TEST(AutoPipe, CompressionCriterion) {
  const std::vector<double> sizes = layer_sizes(worked_example());
  const SubLayers four = m_partition(sizes, 9);
  EXPECT_DOUBLE_EQ(load_balance(four.sizes, 2, four.frozen_size / 6).max_size(), 11);
  EXPECT_EQ(compressed_length(four, 4, 12, kDefaultLambdaFrozen), 2);
  EXPECT_EQ(compressed_length(four, 4, 11, kDefaultLambdaFrozen), 2);  // "<=": equal fits
  EXPECT_EQ(compressed_length(four, 4, 10.99, kDefaultLambdaFrozen), 4);
  const SubLayers five = m_partition(sizes, 11);
  EXPECT_NEAR(load_balance(five.sizes, 1, five.frozen_size / 6).max_size(), 13.333333, 1e-6);
  EXPECT_EQ(compressed_length(five, 2, 12, kDefaultLambdaFrozen), 2);
  // With lambda_frozen = 0 frozen layers weigh nothing: [2, 4, 1] fits one device (7 <= 12).
  EXPECT_EQ(compressed_length(five, 2, 12, 0.0), 1);
  // Fewer active sub-layers than K: halve regardless.
  const SubLayers last = m_partition(sizes, 13);
  EXPECT_EQ(compressed_length(last, 8, 1e-9, kDefaultLambdaFrozen), 1);
}

TEST(AutoPipe, DrivenByFreezeNotifications) {
  AutoPipe ap(worked_example(), 4);
  EXPECT_DOUBLE_EQ(ap.initial_memory(), 12);
  EXPECT_EQ(ap.on_freeze(2).K, 4);
  const PipelineLayout& four = ap.on_freeze(4);
  EXPECT_EQ(four.K, 2);
  EXPECT_EQ(four.frozen_profile_layers, 9);
  EXPECT_THAT(four.stages[0], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  EXPECT_THAT(four.stages[1], ElementsAre(10, 11, 12, 13));
  EXPECT_EQ(ap.on_freeze(5).K, 2);
  EXPECT_THAT(ap.layout().balance.sizes,
              Pointwise(DoubleNear(1e-9), std::vector<double>{38.0 / 6 + 2, 5}));
}

// A state given rather than reached (a checkpoint's, or K cut to the devices left): layout_for
// partitions at the K given, without Equation 2; restore() makes it the state the next freeze
// compresses from, and M_GPU(0) stays that of T = 0.
TEST(AutoPipe, RestoredStateIsWhereTheNextFreezeStarts) {
  AutoPipe ap(worked_example(), 4);
  const PipelineLayout four = ap.layout_for(4, 4);  // on_freeze(4) would compress to K = 2
  EXPECT_EQ(four.K, 4);
  EXPECT_EQ(four.frozen_profile_layers, 9);
  EXPECT_THAT(four.stages[0], ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  EXPECT_EQ(ap.layout().K, 4);  // layout_for changes nothing
  EXPECT_THAT(ap.restore(0, 2).balance.layers, ElementsAre(6, 8));
  EXPECT_DOUBLE_EQ(ap.initial_memory(), 12);
  // From K = 4, two frozen layers keep K = 4 (FrozenLayersGoToTheFirstDeviceAtLambdaFrozen); from
  // the restored K = 2, K = 1 would hold 3.333 + 25 > 12, so K stays 2: it never grows back.
  EXPECT_EQ(ap.on_freeze(2).K, 2);
  EXPECT_EQ(ap.layout().frozen_profile_layers, 5);
}

TEST(AutoPipe, EqualSubLayersSplitEvenly) {
  EXPECT_THAT(load_balance(std::vector<double>(12, 0.1), 4).layers, ElementsAre(3, 3, 3, 3));
  EXPECT_THAT(load_balance(std::vector<double>(5, 1.0), 5).layers, ElementsAre(1, 1, 1, 1, 1));
  // One huge layer first: var (612.6) dwarfs mean (34.3), so partition 0 takes another, and
  // every later partition still gets one.
  EXPECT_THAT(load_balance({100, 1, 1, 1}, 3).layers, ElementsAre(2, 1, 1));
}

TEST(AutoPipe, ChunksFromKTo6K) {
  EXPECT_THAT(chunk_candidates(8, 400), ElementsAre(8, 10, 16, 20, 25, 40));
  EXPECT_THAT(chunk_candidates(2, 64), ElementsAre(2, 4, 8));
  EXPECT_THAT(chunk_candidates(8, 4), ElementsAre(4));  // no divisor in [8, 48]
  EXPECT_EQ(choose_chunks(8, 400, [](int m) { return std::abs(m - 18.0); }), 16);  // 16 and 20 tie
  EXPECT_EQ(choose_chunks(1, 64, [](int m) { return 1.0 / m; }), 4);
}

TEST(AutoPipe, Errors) {
  EXPECT_EQ(input_error([] {
              load_balance({1, 2}, 3);
            }),
            "autopipe: 2 active sub-layers cannot fill 3 partitions");
  EXPECT_EQ(input_error([] {
              m_partition({1, 2}, 3);
            }),
            "autopipe: frozen layers must be in 0..2 (3 given)");
  EXPECT_EQ(input_error([] { AutoPipe(worked_example(), 0); }),
            "autopipe: stages must be positive (0 < 1)");
  Profile no_head = worked_example();
  no_head.layers.pop_back();
  AutoPipe ap(no_head, 2);
  EXPECT_EQ(input_error([&] { ap.on_freeze(6); }),
            "autopipe: all 6 layers frozen; a pipeline needs an active layer");
  EXPECT_EQ(input_error([&] { ap.restore(6, 1); }),
            "autopipe: all 6 layers frozen; a pipeline needs an active layer");
  EXPECT_EQ(input_error([&] { ap.layout_for(1, 0); }), "autopipe: stages must be positive (0 < 1)");
  EXPECT_EQ(ap.layout().K, 2);  // a refused state leaves the current one
}

TEST(AutoPipePartitioner, SplitsOffTheCostModelsFrozenLayers) {
  CostOptions o;
  o.frozen_layers = 5;
  const CostModel cm(worked_example(), test::two_level_cluster(1, 4, 1e10, 0, 1e10, 0), o);
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 4;
  const Partition p = make_partitioner("autopipe")->partition(r);
  EXPECT_THAT(p.balance(), ElementsAre(6, 2, 2, 4));
  r.num_stages = 10;
  EXPECT_EQ(input_error([&] { make_partitioner("autopipe")->partition(r); }),
            "partitioner autopipe: 9 active layers cannot fill 10 stages");
}

}  // namespace
}  // namespace pipetwin::elastic
