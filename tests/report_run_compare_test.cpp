// The verdict of a group of runs and predictions on the report (report/run_compare.hpp):
// compare's spreads and noise verdict (report/compare.hpp) over the group's members, checked
// against closed forms of the timelines' scale factors.
#include "report/run_compare.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "report_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

using pipetwin::testing::write_main_job_folder;

ReportInputs scan(const test::TempDir& dir) {
  return scan_results(dir.path().string(), ReportOptions{});
}

// Runs 8%, 2%, 15%, 5% slower than the prediction (median run: 1.05), predictions from later
// profiles 0.98, 1.03, 1.01, 0.97 of it: the predictions' range 0.97 .. 1.03 (with the
// prediction itself, 1.0) meets the runs' 1.02 .. 1.15.
TEST(ReportRunCompare, MainJobFolderIsWithinTheNoise) {
  test::TempDir dir;
  write_main_job_folder(dir, {1.08, 1.02, 1.15, 1.05}, {0.98, 1.03, 1.01, 0.97});
  const ReportInputs in = scan(dir);
  ASSERT_EQ(in.runs.size(), 1u);
  const auto rc = compare_run_group(in.runs[0]);
  ASSERT_TRUE(rc);
  const double base = median_step_s(in.runs[0].metrics(kPredicted)->metrics);
  const Comparison& c = rc->comparison;
  EXPECT_EQ(c.spread.runs, 4);
  EXPECT_NEAR(c.spread.low_s, 1.02 * base, 1e-8);
  EXPECT_NEAR(c.spread.median_s, 1.05 * base, 1e-8);
  EXPECT_NEAR(c.spread.high_s, 1.15 * base, 1e-8);
  EXPECT_EQ(c.predictions.runs, 5);
  EXPECT_NEAR(c.predictions.low_s, 0.97 * base, 1e-8);
  EXPECT_NEAR(c.predictions.median_s, 1.0 * base, 1e-8);  // 0.97 0.98 [1.0] 1.01 1.03
  EXPECT_NEAR(c.predictions.high_s, 1.03 * base, 1e-8);
  const NoiseVerdict& v = rc->verdict;
  EXPECT_EQ(v.kind, NoiseVerdict::kRanges);
  EXPECT_TRUE(v.within);
  EXPECT_NEAR(v.error, 1 / 1.05 - 1, 1e-6);  // the prediction against the median run
  EXPECT_NEAR(v.predictions_median_error, 1 / 1.05 - 1, 1e-6);
  EXPECT_NEAR(v.apart_probability, 2.0 / 126, 1e-12);  // 2 / C(9, 5)
  EXPECT_NE(v.text.find("4 runs"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("5 predictions from profiles measured at different times"),
            std::string::npos)
      << v.text;
  EXPECT_NE(v.text.find("the error -4.8% (-4.8% for the predictions' median) is within the "
                        "noise: the two ranges overlap; ranges of 5 and 4 draws of one noise are "
                        "apart 1.6% of the time"),
            std::string::npos)
      << v.text;
  EXPECT_EQ(verdict_summary(*rc), "within the noise (4 runs, 5 predictions)");
  // The rows compare the prediction with the median run: every compute action 1/1.05 of it
  // (transfers of a few microseconds and the empty optimizer step lose that to the timeline's
  // nanosecond resolution).
  int compute_rows = 0;
  for (const auto& r : c.actions) {
    if (r.quantity.find("ward") == std::string::npos) continue;  // forward, backward
    EXPECT_NEAR(r.error(), 1 / 1.05 - 1, 1e-6) << r.quantity;
    ++compute_rows;
  }
  EXPECT_EQ(compute_rows, 4);  // 2 stages x forward, backward
  // The verdict is render_comparison's last line, as `pipetwin compare` prints it.
  EXPECT_NE(render_comparison(c).find(v.text + "\n"), std::string::npos);
}

TEST(ReportRunCompare, ATightModelErrorIsOutsideTheNoise) {
  test::TempDir dir;
  // Runs 20-30% slower; the later profiles agree with the first within 1%.
  write_main_job_folder(dir, {1.2, 1.25, 1.3}, {1.01, 0.995});
  const auto rc = compare_run_group(scan(dir).runs.at(0));
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->verdict.kind, NoiseVerdict::kRanges);
  EXPECT_FALSE(rc->verdict.within);
  EXPECT_NEAR(rc->verdict.error, 1 / 1.25 - 1, 1e-6);
  EXPECT_NEAR(rc->verdict.apart_probability, 0.1, 1e-12);  // 2 / C(6, 3)
  EXPECT_NE(rc->verdict.text.find("is outside the noise: the two ranges do not overlap"),
            std::string::npos);
  EXPECT_EQ(verdict_summary(*rc), "outside the noise (3 runs, 3 predictions)");
}

TEST(ReportRunCompare, RunsAloneJudgeTheErrorByTheirSpread) {
  test::TempDir dir;
  // Median run 1.05, spread +-(1.12 - 1.0) / (2 x 1.05) = +-5.7%: an error of -4.8% is inside.
  write_main_job_folder(dir, {1.0, 1.05, 1.12}, {});
  auto rc = compare_run_group(scan(dir).runs.at(0));
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->verdict.kind, NoiseVerdict::kRunSpread);
  EXPECT_TRUE(rc->verdict.within);
  EXPECT_EQ(rc->comparison.predictions.runs, 0);
  EXPECT_EQ(verdict_summary(*rc), "within the noise (3 runs)");
  test::TempDir far;
  write_main_job_folder(far, {1.2, 1.25, 1.3}, {});  // -20% against +-4%
  rc = compare_run_group(scan(far).runs.at(0));
  ASSERT_TRUE(rc);
  EXPECT_FALSE(rc->verdict.within);
  EXPECT_NE(rc->verdict.text.find("is outside it"), std::string::npos);
}

TEST(ReportRunCompare, OneRunOrOneSide) {
  test::TempDir dir;
  write_main_job_folder(dir, {1.1}, {});
  auto rc = compare_run_group(scan(dir).runs.at(0));
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->verdict.kind, NoiseVerdict::kOneRun);
  EXPECT_EQ(verdict_summary(*rc), "one run");
  EXPECT_NEAR(rc->comparison.summary.at(1).error(), 1 / 1.1 - 1, 1e-6);  // median step
  std::filesystem::remove(dir.file("vit.run1.trace.json"));
  EXPECT_FALSE(compare_run_group(scan(dir).runs.at(0)));  // nothing measured
}

}  // namespace
}  // namespace pipetwin::report
