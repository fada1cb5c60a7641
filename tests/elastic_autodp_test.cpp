// core/elastic/autodp and elastic_sampler: replicas per pipeline length, the process groups of
// Figure 7, the state a new replica receives, and the sampler's coverage and equal weights.
#include <map>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/elastic/autodp.hpp"
#include "core/elastic/elastic_sampler.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;
using ::testing::ElementsAre;

TEST(AutoDP, ProcessGroupsOfFigure7) {
  // 2 machines x 8 GPUs; "In T0, only process 0 and 8 are active ... process 0 activates
  // processes 1 and 9 ... The four active processes then form a new training group."
  const DataParallelLayout t0 = dp_layout(2, 8, 8), t1 = dp_layout(2, 8, 4);
  EXPECT_EQ(t0.replicas(), 2);
  EXPECT_THAT(t0.training_group(), ElementsAre(0, 8));
  EXPECT_THAT(t1.training_group(), ElementsAre(0, 1, 8, 9));
  EXPECT_THAT(newly_active(t0, t1), ElementsAre(1, 9));
  EXPECT_EQ(t1.processes(), 16);  // the message group never changes
  EXPECT_EQ(t1.device(9, 2), 8 + 4 + 2);
  EXPECT_EQ(dp_layout(2, 8, 1).replicas(), 16);
  EXPECT_EQ(dp_layout(1, 8, 2).replicas(), 4);
}

TEST(AutoDP, StateANewReplicaReceives) {
  Profile p = test::synthetic("uniform:layers=4,param_kb=1000,optimizer_kb=2000");
  const auto items = state_transfer(p, 1);
  std::map<std::string, double> bytes;
  for (const auto& i : items) bytes[i.name] = i.bytes;
  EXPECT_DOUBLE_EQ(bytes["weights of the active layers (F_pipe)"], 3 * 1000 * 1024.0);
  EXPECT_DOUBLE_EQ(bytes["weights of the frozen layers (F_frozen)"], 1000 * 1024.0);
  EXPECT_DOUBLE_EQ(bytes["optimizer state of the active layers"], 3 * 2000 * 1024.0);
  EXPECT_TRUE(bytes.count("epoch and step"));
  EXPECT_TRUE(bytes.count("learning-rate schedule state"));
  EXPECT_TRUE(bytes.count("frozen-layer boundary"));
  EXPECT_TRUE(bytes.count("pipeline device range"));
  // One sender per node, new processes served in turn: 8 -> 4 adds one per node, 8 -> 2 three.
  const CostModel cm(p, test::two_level_cluster(2, 8, 1e9, 0, 1e8, 0));
  const double B = total_bytes(items);
  EXPECT_NEAR(state_transfer_s(cm, items, dp_layout(2, 8, 8), dp_layout(2, 8, 4)), B / 1e9, 1e-12);
  EXPECT_NEAR(state_transfer_s(cm, items, dp_layout(2, 8, 8), dp_layout(2, 8, 2)), 3 * B / 1e9,
              1e-12);
  EXPECT_EQ(state_transfer_s(cm, items, dp_layout(2, 8, 4), dp_layout(2, 8, 4)), 0);
}

TEST(AutoDP, Errors) {
  EXPECT_EQ(input_error([] { dp_layout(2, 8, 16); }),
            "autodp: pipeline length must be in 1..8 (devices per node), 16 given");
  EXPECT_EQ(input_error([] { dp_layout(0, 8, 1); }),
            "autodp: cluster must have nodes and devices (0 x 8 given)");
}

// Trains `epochs` epochs of a sampler, changing the replicas per node by `width(step)`; checks
// that every sample appears once per epoch, on its own node, with weight 1 / B in its step.
void expect_coverage(long N, int nodes, int batch, int epochs, int (*width)(long)) {
  ElasticSampler s(N, nodes, 42);
  long step = 0;
  for (int e = 0; e < epochs; ++e) {
    s.begin_epoch(e);
    std::vector<int> seen(static_cast<size_t>(N), 0);
    while (!s.epoch_done()) {
      const int rpn = width(step++);
      const long before = s.consumed();
      const ElasticSampler::Step st = s.next_step(rpn, batch);
      ASSERT_GT(st.samples, 0);
      EXPECT_EQ(s.consumed() - before, st.samples);
      long total = 0;
      for (size_t r = 0; r < st.ids.size(); ++r) {
        EXPECT_LE(static_cast<long>(st.ids[r].size()), batch);
        for (long id : st.ids[r]) {
          ++seen[static_cast<size_t>(id)];
          EXPECT_EQ(s.node_of(id), static_cast<int>(r) / rpn);
        }
        total += static_cast<long>(st.ids[r].size());
      }
      EXPECT_EQ(total, st.samples);
      // DDP averages R replica gradients: each sample weighs sample_weight / R = 1 / B.
      EXPECT_DOUBLE_EQ(st.sample_weight / static_cast<double>(nodes * rpn), 1.0 / st.samples);
    }
    for (long id = 0; id < N; ++id)
      ASSERT_EQ(seen[static_cast<size_t>(id)], 1) << "epoch " << e << " id " << id;
  }
}

TEST(ElasticSampler, EverySampleOncePerEpochAcrossTransitions) {
  // Width changes mid-epoch, at odd points, and back (a resumed run may restart narrower).
  expect_coverage(1000, 2, 7, 3, [](long step) { return step < 13 ? 1 : step < 40 ? 2 : 4; });
  expect_coverage(997, 2, 5, 2, [](long step) { return static_cast<int>(1 + step % 3); });
  expect_coverage(64, 1, 4, 2, [](long) { return 2; });
  expect_coverage(10, 3, 8, 1, [](long) { return 4; });  // one short step, some replicas idle
}

TEST(ElasticSampler, ShortLastStepSplitsEvenly) {
  ElasticSampler s(20, 1, 0, false);
  s.begin_epoch(0);
  EXPECT_EQ(s.steps_left(2, 4), 3);
  s.next_step(2, 4);
  s.next_step(2, 4);
  const auto last = s.next_step(2, 4);  // 4 left over 2 replicas
  EXPECT_THAT(last.ids[0], ElementsAre(16, 17));
  EXPECT_THAT(last.ids[1], ElementsAre(18, 19));
  EXPECT_DOUBLE_EQ(last.sample_weight, 2.0 / 4);
  EXPECT_TRUE(s.epoch_done());
}

TEST(ElasticSampler, SameOrderInEveryProcessNewOrderEveryEpoch) {
  ElasticSampler a(500, 2, 7), b(500, 2, 7);
  a.begin_epoch(3);
  b.begin_epoch(3);
  EXPECT_EQ(a.next_step(2, 10).ids, b.next_step(2, 10).ids);
  ElasticSampler c(500, 2, 7);
  c.begin_epoch(4);
  a.begin_epoch(3);
  EXPECT_NE(a.next_step(2, 10).ids, c.next_step(2, 10).ids);
}

TEST(ElasticSampler, SkipCountsLikeNextAndPositionsResume) {
  ElasticSampler a(333, 2, 1), b(333, 2, 1);
  a.begin_epoch(0);
  b.begin_epoch(0);
  while (!a.epoch_done()) EXPECT_EQ(a.skip_step(3, 10), b.next_step(3, 10).samples);
  EXPECT_TRUE(b.epoch_done());
  ElasticSampler c(333, 2, 1), d(333, 2, 1);
  c.begin_epoch(2);
  c.next_step(1, 17);
  d.restore(c.position());
  EXPECT_EQ(c.next_step(2, 9).ids, d.next_step(2, 9).ids);
}

TEST(ElasticSampler, Errors) {
  EXPECT_EQ(input_error([] { ElasticSampler(1, 2); }),
            "sampler: needs at least one sample per node (1 samples, 2 nodes)");
  ElasticSampler s(10, 1);
  s.begin_epoch(0);
  EXPECT_EQ(input_error([&] { s.next_step(0, 4); }),
            "sampler: replicas per node and batch must be positive (0, 4 given)");
  EXPECT_EQ(input_error([&] {
              s.restore({0, {11}});
            }),
            "sampler: node 0 cursor 11 out of range 0..10");
}

}  // namespace
}  // namespace pipetwin::elastic
