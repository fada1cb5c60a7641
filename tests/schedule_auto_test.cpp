// `plan --schedule auto` (studies/sweep/evaluate.hpp search_schedules): the candidate list, the
// fastest schedule that fits chosen on synthetic models whose winner the zero-bubble closed forms
// predict (f = b = w: ZB-V has no bubble at all, 1F1B (K - 1)(f + b + w), ZB-H1 (K - 1)(f + b - w);
// Qi et al. 2024, Table 1), a leaner schedule winning when memory is tight, and the one-line reason
// of every loser.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "sim/planner.hpp"
#include "studies/sweep/evaluate.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kMs = 1e-3;

// Eight one-layer pieces of f = 1, b = 1, w = 1 ms (a backward of 2 ms, half of it W), 64 KiB
// saved per sample and layer; K = 4: two layers a device.
PlanRequest request(int M) {
  const std::string model = "uniform:layers=8,fwd_ms=1,bwd_ms=2,wgrad_ms=1,saved_kb=64";
  PlanRequest r;
  r.model = model;
  r.profile = synthetic_profile(ModelSpec::parse(model, "test"));
  r.cluster = pipetwin::testing::ideal_cluster(16);
  r.stages = 4;
  r.batch_size = M;
  r.chunks = M;
  return r;
}

std::vector<std::string> labels(const std::vector<ScheduleCandidate>& c) {
  std::vector<std::string> out;
  for (const auto& x : c) out.push_back(x.label());
  return out;
}

const ScheduleTrial& trial(const ScheduleSearch& s, const std::string& label) {
  for (const auto& t : s.trials) {
    if (t.candidate.label() == label) return t;
  }
  throw std::logic_error("no trial " + label);
}

std::string chosen(const ScheduleSearch& s) {
  return s.chosen < 0 ? "" : s.trials[static_cast<size_t>(s.chosen)].candidate.label();
}

TEST(ScheduleAuto, CandidatesAreTheSynchronousSchedulesUsersPick) {
  EXPECT_THAT(
      labels(schedule_candidates({}, 4, 8, 0)),
      ElementsAre("gpipe", "1f1b", "interleaved-1f1b v=2", "zb-h1", "zb-h2", "zbv", "dualpipev"));
  // v = 4 when the model has four layers a device.
  EXPECT_THAT(labels(schedule_candidates({"interleaved-1f1b", "zbv"}, 4, 16, 0)),
              ElementsAre("interleaved-1f1b v=2", "interleaved-1f1b v=4", "zbv"));
  // --virtual-stages sets interleaved-1f1b's v; the V schedules keep their two.
  const auto three = schedule_candidates({"zbv", "interleaved-1f1b", "pipedream"}, 4, 16, 3);
  EXPECT_THAT(labels(three), ElementsAre("zbv", "interleaved-1f1b v=3", "pipedream"));
  EXPECT_EQ(three[0].virtual_stages, 2);
  EXPECT_THAT(test::input_error([] { schedule_candidates({"zbw"}, 4, 16, 0); }),
              HasSubstr("unknown schedule \"zbw\""));
}

// With ample memory and M = 8: ZB-V runs every device without a bubble, 8 x 2 chunks x 3 ms =
// 48 ms, which nothing beats (ZB-H2 at most ties it, with more memory); 1F1B takes
// (M + K - 1) x 6 ms = 66 ms, ZB-H1 8 x 6 + 3 x (2 + 2 - 2) = 54 ms. Each trial's time is the
// simulator's for that schedule's plan.
TEST(ScheduleAuto, ZbvWinsWithAmpleMemoryWhenFEqualsBEqualsW) {
  const PlanRequest r = request(8);
  const ScheduleSearch s = search_schedules(r, schedule_candidates({}, 4, 8, 0));
  ASSERT_EQ(chosen(s), "zbv");
  EXPECT_EQ(trial(s, "zbv").verdict, "chosen");
  EXPECT_NEAR(trial(s, "zbv").evaluation.iteration_time_s, 48 * kMs, 1e-12);
  EXPECT_EQ(trial(s, "1f1b").verdict, "slower: 66.00 ms vs 48.00 ms");
  EXPECT_EQ(trial(s, "zb-h1").verdict, "slower: 54.00 ms vs 48.00 ms");
  EXPECT_THAT(trial(s, "zb-h2").verdict,
              ::testing::AnyOf(StartsWith("slower: "), StartsWith("as fast, more memory: ")));
  EXPECT_EQ(s.request.schedule, "zbv");
  EXPECT_EQ(s.request.virtual_stages, 2);
  for (const auto& t : s.trials) {
    PlanRequest q = r;
    q.schedule = t.candidate.schedule;
    q.virtual_stages = t.candidate.virtual_stages;
    const Plan plan = make_plan(q);
    EXPECT_EQ(t.evaluation.plan.num_stages(), plan.num_stages()) << t.candidate.label();
    EXPECT_EQ(t.evaluation.iteration_time_s,
              simulate_plan(PlanContext(plan, 0)).metrics.iteration_time_s)
        << t.candidate.label();
  }
}

// M = 6 on K = 4: zbv (M >= 7), dualpipev (M >= 8) and interleaved-1f1b (M a multiple of 4)
// cannot run. With ample memory ZB-H2's longer warm-up wins; on devices that hold only what ZB-H1
// needs (four micro-batches in flight on the first device, as 1F1B), ZB-H2 (six) and GPipe (six)
// do not fit and ZB-H1, 6 x 6 + 3 x (2 + 2 - 2) = 42 ms,, beats 1F1B's (6 + 3) x 6 = 54 ms.
TEST(ScheduleAuto, ALeanerScheduleWinsWhenMemoryIsTight) {
  PlanRequest r = request(6);
  const auto candidates = schedule_candidates({}, 4, 8, 0);
  const ScheduleSearch ample = search_schedules(r, candidates);
  EXPECT_EQ(chosen(ample), "zb-h2");
  EXPECT_EQ(trial(ample, "zbv").verdict,
            "cannot run: schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices "
            "(M = 6)");
  EXPECT_THAT(trial(ample, "dualpipev").verdict,
              StartsWith("cannot run: schedule dualpipev: needs at least 2D = 8"));
  EXPECT_THAT(trial(ample, "interleaved-1f1b v=2").verdict,
              HasSubstr("micro-batches must be a multiple of the 4 devices (M = 6)"));

  r.cluster.device.memory_bytes = trial(ample, "zb-h1").evaluation.peak_memory_max_bytes;
  const ScheduleSearch tight = search_schedules(r, candidates);
  ASSERT_EQ(chosen(tight), "zb-h1");
  EXPECT_NEAR(trial(tight, "zb-h1").evaluation.iteration_time_s, 42 * kMs, 1e-12);
  EXPECT_THAT(trial(tight, "zb-h2").verdict, StartsWith("does not fit: needs "));
  EXPECT_THAT(trial(tight, "zb-h2").verdict, HasSubstr("on device 0 (ideal-device #0)"));
  EXPECT_THAT(trial(tight, "gpipe").verdict, StartsWith("does not fit: "));
  EXPECT_EQ(trial(tight, "1f1b").verdict, "slower: 54.00 ms vs 42.00 ms");
}

// Nothing fits: no winner, each says what it needs; with allow_oom the fastest that runs is
// chosen anyway, and says it does not fit.
TEST(ScheduleAuto, NothingFitsUnlessAllowOom) {
  PlanRequest r = request(8);
  r.cluster.device.memory_bytes = 1024;
  const auto candidates = schedule_candidates({"1f1b", "zbv"}, 4, 8, 0);
  const ScheduleSearch none = search_schedules(r, candidates);
  EXPECT_EQ(none.chosen, -1);
  for (const auto& t : none.trials) {
    EXPECT_THAT(t.verdict, StartsWith("does not fit: needs ")) << t.candidate.label();
    EXPECT_THAT(t.verdict, HasSubstr(" of 0.00 GiB on device ")) << t.candidate.label();
  }
  r.allow_oom = true;
  const ScheduleSearch anyway = search_schedules(r, candidates);
  EXPECT_EQ(chosen(anyway), "zbv");
  EXPECT_THAT(trial(anyway, "zbv").verdict, StartsWith("chosen, does not fit: needs "));
}

}  // namespace
}  // namespace pipetwin::sim
