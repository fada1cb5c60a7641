// core/compare: prediction next to measurement (what `pipetwin compare` prints).
#include "report/compare.hpp"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sim_test_util.hpp"

namespace pipetwin {
namespace {

constexpr int kStages = 2;

// A simulated GPipe timeline: 2 stages, M = 4, 6 iterations.
Timeline predicted_timeline() {
  testing::PlanSpec s;
  s.stages = kStages;
  s.chunks = 4;
  return testing::simulate(s, 6).timeline;
}

// `t` with every time multiplied by `factor`: a run uniformly slower (factor > 1) than predicted.
Timeline scaled(Timeline t, double factor) {
  for (auto& e : t.events) {
    e.start_s *= factor;
    e.end_s *= factor;
  }
  t.source = "measured";
  return t;
}

Comparison compare(const Timeline& p, const Timeline& m, int skip = 1) {
  return compare_timelines(p, m, kStages, /*async=*/false, /*samples_per_step=*/4, skip);
}

const CompareRow& row(const std::vector<CompareRow>& rows, const std::string& quantity) {
  for (const auto& r : rows) {
    if (r.quantity == quantity) return r;
  }
  throw std::runtime_error("no row " + quantity);
}

TEST(Compare, IdenticalTimelinesHaveNoError) {
  const Timeline t = predicted_timeline();
  const Comparison c = compare(t, t);
  ASSERT_EQ(c.iterations.size(), 6u);
  EXPECT_EQ(c.median_abs_iteration_error, 0);
  EXPECT_EQ(c.worst_abs_iteration_error, 0);
  EXPECT_FALSE(c.actions.empty());
  for (const auto& r : c.actions) EXPECT_EQ(r.error(), 0) << r.quantity;
}

TEST(Compare, UniformlySlowerRunGivesTheClosedFormError) {
  // predicted / measured - 1 = 1 / 1.1 - 1 on every iteration, every action, and throughput
  // inverted.
  const Timeline p = predicted_timeline();
  const Comparison c = compare(p, scaled(p, 1.1));
  const double e = 1 / 1.1 - 1;
  EXPECT_NEAR(c.median_abs_iteration_error, -e, 1e-12);
  EXPECT_NEAR(c.worst_abs_iteration_error, -e, 1e-12);
  for (const auto& r : c.iterations) EXPECT_NEAR(r.error(), e, 1e-12) << r.quantity;
  for (const auto& r : c.actions) {
    if (r.predicted > 0) {  // sends are free on the ideal cluster
      EXPECT_NEAR(r.error(), e, 1e-12) << r.quantity;
    }
  }
  EXPECT_NEAR(row(c.actions, "stage 0 forward").error(), e, 1e-12);
  EXPECT_NEAR(row(c.summary, "iteration time (steady)").error(), e, 1e-12);
  EXPECT_NEAR(row(c.summary, "throughput").error(), 0.1, 1e-12);
  EXPECT_NEAR(row(c.summary, "bubble fraction").error(), 0, 1e-12);
}

TEST(Compare, WarmUpIterationIsLeftOutOfTheHeadline) {
  // A measured first iteration twice as long (every event of step 0 stretched, later ones
  // shifted): the headline skips it, but it stays in the per-iteration table.
  const Timeline p = predicted_timeline();
  Timeline m = p;
  double step0_end = 0;
  for (const auto& e : p.events) {
    if (e.action.step == 0) step0_end = std::max(step0_end, e.end_s);
  }
  for (auto& e : m.events) {
    if (e.action.step == 0) {
      e.start_s *= 2;
      e.end_s *= 2;
    } else {
      e.start_s += step0_end;
      e.end_s += step0_end;
    }
  }
  const Comparison c = compare(p, m);
  EXPECT_NEAR(c.iterations[0].error(), -0.5, 1e-9);
  EXPECT_NEAR(c.median_abs_iteration_error, 0, 1e-9);
  EXPECT_NEAR(c.worst_abs_iteration_error, 0, 1e-9);
  const Comparison all = compare(p, m, /*skip=*/0);
  EXPECT_NEAR(all.worst_abs_iteration_error, 0.5, 1e-9);
  EXPECT_EQ(all.worst_iteration, 0);
}

TEST(Compare, ActionTableIsTheMedianSoOneStallDoesNotMoveIt) {
  // One forward of stage 0 in step 3 stalls for 10x its length (a host stall): the median of
  // that stage's forwards over steps 1..5 stays the predicted one.
  const Timeline p = predicted_timeline();
  Timeline m = p;
  for (auto& e : m.events) {
    if (e.action.step == 3 && e.action.stage == 0 && e.action.op == Op::kForward) {
      e.end_s = e.start_s + 10 * e.duration();
      break;
    }
  }
  const Comparison c = compare(p, m);
  EXPECT_EQ(row(c.actions, "stage 0 forward").error(), 0);
  EXPECT_EQ(row(c.actions, "stage 1 backward").error(), 0);
}

TEST(Compare, RenderedTableNamesTheHeadline) {
  const Timeline p = predicted_timeline();
  const std::string out = render_comparison(compare(p, scaled(p, 1.1)));
  EXPECT_NE(out.find("iteration time (steady)"), std::string::npos);
  EXPECT_NE(out.find("stage 1 backward"), std::string::npos);
  EXPECT_NE(out.find("-9.1%"), std::string::npos);
  EXPECT_NE(out.find("iteration-time error: median 9.1%, worst 9.1%"), std::string::npos);
}

// Four runs of one plan, as a VM gave them (304, 357, 342, 315 ms): the median run is the lower
// middle one (315 ms), the spread +-(357 - 304) / (2 x 315) = +-8.4%.
TEST(Compare, RunSpreadIsTheRangeAroundTheMedianRun) {
  size_t mid = 99;
  const RunSpread s = run_spread({0.304, 0.357, 0.342, 0.315}, &mid);
  EXPECT_EQ(s.runs, 4);
  EXPECT_EQ(mid, 3u);
  EXPECT_DOUBLE_EQ(s.low_s, 0.304);
  EXPECT_DOUBLE_EQ(s.median_s, 0.315);
  EXPECT_DOUBLE_EQ(s.high_s, 0.357);
  EXPECT_NEAR(s.half_width(), 0.053 / 0.630, 1e-12);
  EXPECT_EQ(run_spread({}, &mid).runs, 0);
}

TEST(Compare, RenderedSpreadSaysWhetherTheErrorIsNoise) {
  const Timeline p = predicted_timeline();
  Comparison c = compare(p, scaled(p, 1.05));  // predicted 4.8% under the median run
  c.spread = run_spread({1.0, 1.05, 1.12}, nullptr);  // +-5.7%
  EXPECT_NE(render_comparison(c).find("3 runs"), std::string::npos);
  EXPECT_NE(render_comparison(c).find("is within it: not told from noise"), std::string::npos);
  c = compare(p, scaled(p, 1.25));  // 20% under
  c.spread = run_spread({1.0, 1.05, 1.12}, nullptr);
  EXPECT_NE(render_comparison(c).find("is outside it"), std::string::npos);
  c.spread = {};
  EXPECT_NE(render_comparison(c).find("one measured run"), std::string::npos);
}

TEST(Compare, ADriftBetweenProfileAndRunsIsNoiseWhereThePredictionsReachTheRuns) {
  // Runs 25% slower than the profile measured before them predicted: outside their own spread,
  // but a profile measured after them predicts 20% more, so the predictions' range (1.0 .. 1.2)
  // meets the runs' (1.2 .. 1.3): the machine drifted.
  const Timeline p = predicted_timeline();
  Comparison c = compare(p, scaled(p, 1.25));
  c.spread = run_spread({1.2, 1.25, 1.3}, nullptr);
  c.predictions = run_spread({1.0, 1.2}, nullptr);
  const std::string drifted = render_comparison(c);
  EXPECT_NE(drifted.find("2 predictions from profiles measured at different times"),
            std::string::npos)
      << drifted;
  EXPECT_NE(drifted.find("is within the noise: the two ranges overlap"), std::string::npos)
      << drifted;
  // The predictions' median (the lower middle one of two: 1.0) against the median run's 1.25.
  EXPECT_NE(
      drifted.find("(median 1000.000 ms); the error -20.0% (-20.0% for the predictions' median)"),
      std::string::npos)
      << drifted;
  EXPECT_NE(drifted.find("ranges of 2 and 3 draws of one noise are apart 20.0% of the time"),
            std::string::npos)
      << drifted;
  // The second profile agrees with the first: the ranges stay apart, a model error.
  c.predictions = run_spread({1.0, 1.02}, nullptr);
  EXPECT_NE(render_comparison(c).find("is outside the noise: the two ranges do not overlap"),
            std::string::npos);
}

// Every order of m + n draws of one noise is equally likely: counted over all orders, the share
// where the m draws' range and the n draws' range do not meet.
double apart_share_by_enumeration(int m, int n) {
  std::vector<int> order(static_cast<size_t>(m + n));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  int apart = 0, all = 0;
  do {
    const auto mine = [&](size_t i) { return order[i] < m; };  // draw i is a prediction
    bool predictions_first = true, runs_first = true;
    for (size_t i = 0; i < order.size(); ++i) {
      for (size_t j = i + 1; j < order.size(); ++j) {
        if (!mine(i) && mine(j)) predictions_first = false;
        if (mine(i) && !mine(j)) runs_first = false;
      }
    }
    apart += predictions_first || runs_first;
    ++all;
  } while (std::next_permutation(order.begin(), order.end()));
  return static_cast<double>(apart) / all;
}

TEST(Compare, RangesOfDrawsOfOneNoiseAreApartTwoInChooseMPlusNM) {
  EXPECT_DOUBLE_EQ(ranges_apart_probability(2, 3), 0.2);  // the main job's old protocol
  EXPECT_NEAR(ranges_apart_probability(5, 4), 2.0 / 126, 1e-15);
  EXPECT_DOUBLE_EQ(ranges_apart_probability(1, 1), 1.0);  // two single draws never overlap
  for (int m = 1; m <= 4; ++m) {
    for (int n = 1; n <= 4; ++n) {
      EXPECT_NEAR(ranges_apart_probability(m, n), apart_share_by_enumeration(m, n), 1e-12)
          << m << " and " << n;
    }
  }
}

TEST(Compare, OneStalledStepMovesTheMeanNotTheSpreadsStatistic) {
  // A run as predicted but for one step that stalled (the VM's host took the core away for a
  // while): everything after the middle of the run starts 40% of a run's length later.
  const Timeline p = predicted_timeline();
  double end = 0;
  for (const auto& e : p.events) end = std::max(end, e.end_s);
  Timeline m = scaled(p, 1.0);
  for (auto& e : m.events) {
    if (e.start_s >= end / 2) {
      e.start_s += 0.4 * end;
      e.end_s += 0.4 * end;
    }
  }
  Comparison c = compare(p, m);
  EXPECT_LT(row(c.summary, "iteration time (steady)").error(), -0.1);
  EXPECT_NEAR(row(c.summary, "iteration time (median step)").error(), 0, 1e-9);
  c.spread = run_spread({1.0, 1.01, 1.02}, nullptr);
  EXPECT_NE(render_comparison(c).find("the error +0.0% is within"), std::string::npos)
      << render_comparison(c);
}

TEST(Compare, MetricsAloneCompareIterationsButNoActions) {
  const Timeline p = predicted_timeline();
  const Metrics mp = compute_metrics(p, kStages, false, 4);
  const Metrics mm = compute_metrics(scaled(p, 1.25), kStages, false, 4);
  const Comparison c = compare_metrics(mp, mm);
  EXPECT_TRUE(c.actions.empty());
  EXPECT_NEAR(c.median_abs_iteration_error, 0.2, 1e-12);
  EXPECT_NEAR(row(c.summary, "iteration time (median step)").error(), -0.2, 1e-12);
}

}  // namespace
}  // namespace pipetwin
