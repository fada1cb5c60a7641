// Flows over shared links in time (sim/network/flow_model.hpp): completion times against closed
// forms — equal sharing, the slower link of a path, an early finisher handing back its share.
#include "sim/network/flow_model.hpp"

#include <gtest/gtest.h>

namespace pipetwin::sim::network {
namespace {

constexpr double kS = 64e6;  // bytes
constexpr double kB = 10e9;  // bytes/s

TEST(FlowModel, TwoFlowsOnOneLinkFinishAtTwiceTheTime) {
  const auto t = completion_times({{kB, 0}}, {{0, kS, {0}}, {0, kS, {0}}});
  EXPECT_DOUBLE_EQ(t[0], 2 * kS / kB);
  EXPECT_DOUBLE_EQ(t[1], 2 * kS / kB);
}

TEST(FlowModel, LatencyOfEveryLinkIsAddedOnce) {
  const auto t = completion_times({{kB, 2e-6}, {2 * kB, 3e-6}}, {{1.0, kS, {0, 1}}});
  EXPECT_DOUBLE_EQ(t[0], 1.0 + kS / kB + 5e-6);
}

TEST(FlowModel, AFlowThroughTwoLinksIsHeldByTheSlower) {
  const auto t = completion_times({{4 * kB, 0}, {kB, 0}}, {{0, kS, {0, 1}}});
  EXPECT_DOUBLE_EQ(t[0], kS / kB);
}

// Flow a (S) and flow b (3S) share one link: a ends at 2S/B; b has sent S by then and sends its
// last 2S alone at B: (S + 3S)/B.
TEST(FlowModel, AnEarlyFinisherHandsItsShareToTheOther) {
  const auto t = completion_times({{kB, 0}}, {{0, kS, {0}}, {0, 3 * kS, {0}}});
  EXPECT_DOUBLE_EQ(t[0], 2 * kS / kB);
  EXPECT_DOUBLE_EQ(t[1], 4 * kS / kB);
}

// b starts at t0 while a (S) is under way: a has S - B t0 left at B/2 and ends at 2S/B - t0; b
// has sent S - B t0 by then and its last B t0 alone: 2S/B.
TEST(FlowModel, ALateStarterSlowsTheFlowUnderWay) {
  const double t0 = 0.25 * kS / kB;
  const auto t = completion_times({{kB, 0}}, {{0, kS, {0}}, {t0, kS, {0}}});
  EXPECT_NEAR(t[0], 2 * kS / kB - t0, 1e-15);
  EXPECT_NEAR(t[1], 2 * kS / kB, 1e-15);
}

// The two-link example in time: links of 1 and 3 (x B), a long flow over both and one short
// flow on each, S bytes each. Rates 1/2, 1/2, 5/2 (x B): the short flow on link 1 ends at
// S/(2.5B); the others keep 1/2 (link 0 holds them) and end at 2S/B.
TEST(FlowModel, ThreeFlowsOnTwoLinks) {
  const auto t =
      completion_times({{kB, 0}, {3 * kB, 0}}, {{0, kS, {0, 1}}, {0, kS, {0}}, {0, kS, {1}}});
  EXPECT_DOUBLE_EQ(t[0], 2 * kS / kB);
  EXPECT_DOUBLE_EQ(t[1], 2 * kS / kB);
  EXPECT_DOUBLE_EQ(t[2], kS / (2.5 * kB));
}

TEST(FlowModel, RatesAreRecomputedWhenAFlowStartsAndEnds) {
  FlowModel m({{kB, 0}});
  const int32_t a = m.start(kS, {0}, 0);
  EXPECT_DOUBLE_EQ(m.rate(a), kB);
  const int32_t b = m.start(kS, {0}, 0);
  EXPECT_DOUBLE_EQ(m.rate(a), kB / 2);
  EXPECT_DOUBLE_EQ(m.next_finish(), 2 * kS / kB);
  std::vector<int32_t> done;
  m.finish_due(m.next_finish(), done);
  EXPECT_EQ(done, (std::vector<int32_t>{a, b}));
  EXPECT_EQ(m.active(), 0);
  EXPECT_DOUBLE_EQ(m.rate(a), 0);
}

TEST(FlowModel, FlowsAddedTogetherShareOnceSettled) {
  FlowModel m({{kB, 0}, {kB, 0}});
  const int32_t a = m.add(kS, std::vector<int32_t>{0, 1}.data(), 2, 0);
  const int32_t b = m.add(kS, std::vector<int32_t>{1}.data(), 1, 0);
  m.settle();
  EXPECT_DOUBLE_EQ(m.rate(a), kB / 2);
  EXPECT_DOUBLE_EQ(m.rate(b), kB / 2);
  EXPECT_DOUBLE_EQ(m.next_finish(), 2 * kS / kB);
}

TEST(FlowModel, ZeroBytesFinishAtOnceAndBadInputThrows) {
  const auto t = completion_times({{kB, 1e-6}}, {{0.5, 0, {0}}});
  EXPECT_DOUBLE_EQ(t[0], 0.5 + 1e-6);
  EXPECT_THROW(FlowModel({{0, 0}}), std::invalid_argument);
  FlowModel m({{kB, 0}});
  EXPECT_THROW(m.start(1, {3}, 0), std::out_of_range);
  m.start(1, {0}, 1.0);
  EXPECT_THROW(m.start(1, {0}, 0.5), std::invalid_argument);
}

}  // namespace
}  // namespace pipetwin::sim::network
