// Scanning a results folder for the report (report/scan.hpp): classification, the
// predicted/measured pairing convention, derived metrics, and skipped files.
#include "report/scan.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/metrics.hpp"
#include "core/timeline.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

TEST(ReportScan, RunNames) {
  auto check = [](const std::string& path, const std::string& key, std::optional<Role> role) {
    const RunName n = parse_run_name(path);
    EXPECT_EQ(n.key, key) << path;
    EXPECT_EQ(n.role, role) << path;
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
  EXPECT_EQ(x.timeline[kPredicted]->path, "a/X.predicted.timeline.json");
  ASSERT_TRUE(x.metrics[kPredicted] && x.metrics[kMeasured]);
  EXPECT_TRUE(x.metrics[kMeasured]->derived);
  // Timelines store times to the nanosecond.
  EXPECT_NEAR(x.metrics[kMeasured]->metrics.iteration_time_s,
              1.1 * x.metrics[kPredicted]->metrics.iteration_time_s, 2e-9);
  const RunGroup& y = in.runs[0];
  EXPECT_EQ(y.key, "Y");
  EXPECT_FALSE(y.paired());
  ASSERT_TRUE(y.metrics[kPredicted] && y.timeline[kMeasured]);
  EXPECT_FALSE(y.metrics[kPredicted]->derived);
  EXPECT_DOUBLE_EQ(y.samples_per_step, 32);
  // The measured side has no metrics file: derived with the plan's batch as samples per step.
  const Metrics& ym = y.metrics[kMeasured]->metrics;
  EXPECT_NEAR(ym.throughput_samples_per_s, 32 / ym.iteration_time_s, 1e-9);
  EXPECT_EQ(in.not_shown, (std::vector<std::string>{"Y.plan.json"}));
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
