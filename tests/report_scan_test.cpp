// Scanning a results folder for the report (report/scan.hpp): classification, the
// predicted/measured pairing convention with repeated runs and predictions, the median run
// picked, derived metrics, and skipped files.
#include "report/scan.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "report/compare.hpp"
#include "core/metrics.hpp"
#include "core/timeline.hpp"
#include "report_test_util.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

TEST(ReportScan, RunNames) {
  auto check = [](const std::string& path, const std::string& key, std::optional<Role> role,
                  int number = -1) {
    const RunName n = parse_run_name(path);
    EXPECT_EQ(n.key, key) << path;
    EXPECT_EQ(n.role, role) << path;
    EXPECT_EQ(n.number, number) << path;
  };
  check("X.predicted.timeline.json", "X", kPredicted);
  check("X.measured.timeline.json", "X", kMeasured);
  check("sub/vit.sim.trace.json", "sub/vit", kPredicted);
  check("sub/vit.run.trace.json", "sub/vit", kMeasured);
  check("X.predicted.metrics.json", "X", kPredicted);
  check("X.plan.json", "X", std::nullopt);
  check("gpipe.trace.json", "gpipe", std::nullopt);
  check("my.run.json", "my", kMeasured);
  check("sim.json", "sim", std::nullopt);  // a bare role word is a name
  // scripts/main-job.sh's repeated runs and predictions.
  check("vit.run1.trace.json", "vit", kMeasured, 1);
  check("vit.run4.trace.json", "vit", kMeasured, 4);
  check("vit.sim-1.trace.json", "vit", kPredicted, 1);
  check("vit.sim-12.trace.json", "vit", kPredicted, 12);
  check("sub/X.measured_2.metrics.json", "sub/X", kMeasured, 2);
  check("X.predicted3.timeline.json", "X", kPredicted, 3);
  check("run3.trace.json", "run3", std::nullopt);          // bare, numbered: a name
  check("sub/run3.trace.json", "sub/run3", std::nullopt);  // likewise in a folder
  check("X.run-.trace.json", "X.run-", std::nullopt);      // "-" without a number
  check("X.v2.trace.json", "X.v2", std::nullopt);          // not a role word
  check("vit.profile-1.json", "vit.profile-1", std::nullopt);
  check("X.1f1b.trace.json", "X.1f1b", std::nullopt);
}

sim::SimResult simulate(const std::string& schedule, int iterations) {
  pipetwin::testing::PlanSpec s;
  s.model = pipetwin::testing::uniform(4, 1, 2, "act_kb=8");
  s.schedule = schedule;
  s.stages = 2;
  s.chunks = 4;
  return pipetwin::testing::simulate(s, iterations);
}

// The measured twin of a prediction: every action 10 % slower.
Timeline slowed(Timeline t) {
  t.source = "measured";
  for (auto& e : t.events) {
    e.start_s *= 1.1;
    e.end_s *= 1.1;
  }
  return t;
}

TEST(ReportScan, PairsPredictionWithMeasurement) {
  test::TempDir dir;
  const auto r = simulate("gpipe", 3);
  std::filesystem::create_directories(dir.path() / "a" / ".ipynb_checkpoints");
  save_timeline(r.timeline, dir.file("a/X.predicted.timeline.json"));
  save_timeline(slowed(r.timeline), dir.file("a/X.measured.timeline.json"));
  save_timeline(r.timeline, dir.file("a/.ipynb_checkpoints/X.predicted.timeline.json"));
  save_metrics(r.metrics, dir.file("Y.metrics.json"));             // role from "source"
  save_timeline(slowed(r.timeline), dir.file("Y.timeline.json"));  // "measured" inside
  test::write_text(dir.file("Y.plan.json"),
                   R"({"format": "pipetwin.plan", "version": 1, "batch_size": 32})");
  const ReportInputs in = scan_results(dir.path().string(), ReportOptions{});
  EXPECT_TRUE(in.warnings.empty()) << in.warnings.front();
  ASSERT_EQ(in.runs.size(), 2u);  // in key order: "Y" < "a/X"
  const RunGroup& x = in.runs[1];
  EXPECT_EQ(x.key, "a/X");
  EXPECT_TRUE(x.paired());
  EXPECT_FALSE(x.repeated());
  EXPECT_EQ(x.timeline(kPredicted)->path, "a/X.predicted.timeline.json");
  ASSERT_TRUE(x.metrics(kPredicted) && x.metrics(kMeasured));
  EXPECT_TRUE(x.metrics(kMeasured)->derived);
  // Timelines store times to the nanosecond.
  EXPECT_NEAR(x.metrics(kMeasured)->metrics.iteration_time_s,
              1.1 * x.metrics(kPredicted)->metrics.iteration_time_s, 2e-9);
  const RunGroup& y = in.runs[0];
  EXPECT_EQ(y.key, "Y");
  EXPECT_FALSE(y.paired());
  ASSERT_TRUE(y.metrics(kPredicted) && y.timeline(kMeasured));
  EXPECT_FALSE(y.metrics(kPredicted)->derived);
  EXPECT_DOUBLE_EQ(y.samples_per_step, 32);
  // The measured side has no metrics file: derived with the plan's batch as samples per step.
  const Metrics& ym = y.metrics(kMeasured)->metrics;
  EXPECT_NEAR(ym.throughput_samples_per_s, 32 / ym.iteration_time_s, 1e-9);
  EXPECT_EQ(in.not_shown, (std::vector<std::string>{"Y.plan.json"}));
}

// scripts/main-job.sh's folder: one prediction, four runs, four predictions from later profiles
// form one group; the measured side drawn is the median run by median step (the lower middle of
// an even count, as `pipetwin compare` picks it), the predicted side the unnumbered prediction.
TEST(ReportScan, RepeatedRunsAndPredictionsFormOneGroup) {
  test::TempDir dir;
  // Runs 8%, 2%, 15%, 5% slower than predicted: sorted 1.02, 1.05, 1.08, 1.15, the median
  // (lower middle) run is run 4.
  pipetwin::testing::write_main_job_folder(dir, {1.08, 1.02, 1.15, 1.05}, {0.98, 1.03, 1.01, 0.97});
  save_timeline(simulate("gpipe", 2).timeline, dir.file("gpipe.trace.json"));
  const ReportInputs in = scan_results(dir.path().string(), ReportOptions{});
  EXPECT_TRUE(in.warnings.empty()) << in.warnings.front();
  ASSERT_EQ(in.runs.size(), 2u);
  EXPECT_EQ(in.runs[0].key, "gpipe");
  EXPECT_FALSE(in.runs[0].paired());
  const RunGroup& g = in.runs[1];
  EXPECT_EQ(g.key, "vit");
  EXPECT_TRUE(g.paired());
  EXPECT_TRUE(g.repeated());
  EXPECT_DOUBLE_EQ(g.samples_per_step, 8);
  ASSERT_EQ(g.members[kPredicted].size(), 5u);
  ASSERT_EQ(g.members[kMeasured].size(), 4u);
  std::vector<int> numbers;
  for (const auto& m : g.members[kPredicted]) numbers.push_back(m.number);
  EXPECT_EQ(numbers, (std::vector<int>{-1, 1, 2, 3, 4}));
  EXPECT_EQ(g.timeline(kPredicted)->path, "vit.sim.trace.json");
  EXPECT_EQ(g.timeline(kMeasured)->path, "vit.run4.trace.json");
  EXPECT_EQ(g.pick(kMeasured)->number, 4);
  // Every member has metrics derived from its timeline, with the plan's batch.
  const double base = median_step_s(g.metrics(kPredicted)->metrics);
  for (const auto& role : g.members) {
    for (const auto& m : role) {
      ASSERT_TRUE(m.metrics) << m.timeline->path;
      EXPECT_TRUE(m.metrics->derived);
      EXPECT_DOUBLE_EQ(m.metrics->metrics.samples_per_step, 8);
    }
  }
  EXPECT_NEAR(median_step_s(g.metrics(kMeasured)->metrics), 1.05 * base, 1e-8);
}

TEST(ReportScan, WithoutAnUnnumberedPredictionTheMedianPredictionIsDrawn) {
  test::TempDir dir;
  pipetwin::testing::write_main_job_folder(dir, {1.1, 1.0, 1.2}, {1.3, 0.9, 1.05});
  std::filesystem::remove(dir.file("vit.sim.trace.json"));
  const ReportInputs in = scan_results(dir.path().string(), ReportOptions{});
  ASSERT_EQ(in.runs.size(), 1u);
  const RunGroup& g = in.runs[0];
  ASSERT_EQ(g.members[kPredicted].size(), 3u);
  EXPECT_EQ(g.timeline(kPredicted)->path, "vit.sim-3.trace.json");  // 0.9, 1.05, 1.3
  EXPECT_EQ(g.timeline(kMeasured)->path, "vit.run1.trace.json");    // 1.0, 1.1, 1.2
  // choose_member: a member without metrics (a foreign trace) is not a candidate.
  std::vector<RunMember> members(2);
  members[1].number = 2;
  members[1].metrics = g.pick(kMeasured)->metrics;
  EXPECT_EQ(choose_member(members, false), 1);
  members[1].metrics.reset();
  EXPECT_EQ(choose_member(members, false), 0);
  EXPECT_EQ(choose_member({}, true), -1);
}

TEST(ReportScan, TheSameRunTwiceIsSkippedWithAWarning) {
  test::TempDir dir;
  const Timeline t = simulate("gpipe", 2).timeline;
  save_timeline(slowed(t), dir.file("X.measured1.timeline.json"));
  save_timeline(slowed(t), dir.file("X.run1.trace.json"));
  save_timeline(t, dir.file("X.sim.trace.json"));
  save_timeline(t, dir.file("X.simulated.timeline.json"));
  const ReportInputs in = scan_results(dir.path().string(), ReportOptions{});
  ASSERT_EQ(in.warnings.size(), 2u);
  EXPECT_EQ(in.warnings[0],
            "X.run1.trace.json: run \"X\" measured 1 already has a measured timeline "
            "(X.measured1.timeline.json); skipped");
  EXPECT_EQ(in.warnings[1],
            "X.simulated.timeline.json: run \"X\" already has a predicted timeline "
            "(X.sim.trace.json); skipped");
  ASSERT_EQ(in.runs.size(), 1u);
  EXPECT_TRUE(in.runs[0].paired());
}

TEST(ReportScan, BadFilesAreSkippedWithAWarning) {
  test::TempDir dir;
  test::write_text(dir.file("broken.json"), "{\"traceEvents\": [");
  test::write_text(dir.file("other.json"), R"({"hello": 1})");
  test::write_text(dir.file("ragged.csv"), "a,b\n1\n");
  test::write_text(dir.file("header_only.csv"), "a,b\n");
  test::write_text(dir.file("notes.txt"), "not read");
  test::write_text(dir.file("bad.metrics.json"), R"({"format": "pipetwin.metrics", "version": 1})");
  test::write_text(dir.file("t.csv"), "alpha,iteration_time_s\n0.1,2\n0.2,1.5\n");
  const ReportInputs in = scan_results(dir.path().string(), ReportOptions{});
  ASSERT_EQ(in.warnings.size(), 5u);
  EXPECT_EQ(in.warnings[0], "bad.metrics.json: iteration_time_s: missing required field; skipped");
  EXPECT_EQ(in.warnings[1], "broken.json:1:18: not valid JSON; skipped");
  EXPECT_EQ(in.warnings[2], "header_only.csv: a header but no rows; skipped");
  EXPECT_EQ(in.warnings[3],
            "other.json: neither a Chrome trace nor a pipetwin metrics file; skipped");
  EXPECT_EQ(in.warnings[4], "ragged.csv: row 1 has 1 cells, the header 2; skipped");
  ASSERT_EQ(in.csvs.size(), 1u);
  EXPECT_EQ(in.csvs[0].kind, CsvKind::kSweep);
  EXPECT_FALSE(in.empty());
}

TEST(ReportScan, FolderErrors) {
  test::TempDir dir;
  EXPECT_TRUE(scan_results(dir.path().string(), ReportOptions{}).empty());
  const std::string missing = dir.file("nope");
  EXPECT_EQ(test::input_error([&] { scan_results(missing, ReportOptions{}); }),
            missing + ": not a folder (give the results folder to report on)");
}

}  // namespace
}  // namespace pipetwin::report
