// Flows over shared links in time (sim/network/flow_model.hpp): completion times against closed
// forms — equal sharing, the slower link of a path, an early finisher handing back its share.
#include "sim/network/flow_model.hpp"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "sim/network/max_min.hpp"

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

// The model re-solves only the flows a start or an end can move (the connected component of its
// links); after every event of a random run, each flow's rate must still be what max-min fair
// sharing of all the flows in progress gives, bytes included: a flow ends when what it was sent
// at its successive rates adds up to its size.
TEST(FlowModel, RatesStayMaxMinFairOverEveryFlowInProgress) {
  std::mt19937 rng(7);
  std::vector<Link> links;
  std::vector<double> capacity;
  for (int l = 0; l < 12; ++l) {
    links.push_back({kB * (1 + l % 4), 0});
    capacity.push_back(links.back().bandwidth);
  }
  FlowModel m(links);
  std::vector<std::vector<int32_t>> path;
  std::vector<double> bytes, sent, last_rate;
  std::vector<char> live;
  double now = 0, prev = 0;
  int ended = 0;
  std::vector<int32_t> done;
  auto check_rates = [&] {
    FlowPaths active;
    std::vector<int32_t> ids;
    for (size_t f = 0; f < path.size(); ++f) {
      if (!live[f]) continue;
      active.add(path[f]);
      ids.push_back(static_cast<int32_t>(f));
    }
    const std::vector<double> want = max_min_rates(capacity, active);
    for (size_t k = 0; k < ids.size(); ++k)
      ASSERT_NEAR(m.rate(ids[k]), want[k], 1e-9 * want[k]) << "flow " << ids[k] << " at " << now;
  };
  auto account = [&](double t) {  // what each flow sent since the last event
    for (size_t f = 0; f < path.size(); ++f)
      if (live[f]) sent[f] += last_rate[f] * (t - prev);
    prev = t;
  };
  for (int step = 0; step < 400; ++step) {
    const bool start = path.size() < 150 && (m.active() < 3 || rng() % 3 != 0);
    const double next = m.next_finish();
    if (start) {
      now += std::uniform_real_distribution<double>(0, 2e-3)(rng);
      if (next < now) now = next;  // a finish comes first
    } else {
      now = next;
    }
    account(now);
    done.clear();
    m.finish_due(now, done);
    for (int32_t f : done) {
      live[static_cast<size_t>(f)] = 0;
      ++ended;
      EXPECT_NEAR(sent[static_cast<size_t>(f)], bytes[static_cast<size_t>(f)],
                  1e-6 * bytes[static_cast<size_t>(f)]);
    }
    if (start && now < next) {
      std::vector<int32_t> p;
      for (int32_t l = 0; l < 12; ++l)
        if (rng() % 4 == 0) p.push_back(l);
      if (p.empty()) p.push_back(static_cast<int32_t>(rng() % 12));
      bytes.push_back(std::uniform_real_distribution<double>(1e6, 4e7)(rng));
      path.push_back(p);
      sent.push_back(0);
      last_rate.push_back(0);
      live.push_back(1);
      EXPECT_EQ(m.start(bytes.back(), p, now), static_cast<int32_t>(path.size()) - 1);
    }
    check_rates();
    for (size_t f = 0; f < path.size(); ++f) last_rate[f] = live[f] ? m.rate(int32_t(f)) : 0;
  }
  EXPECT_GT(ended, 100);
}

}  // namespace
}  // namespace pipetwin::sim::network
