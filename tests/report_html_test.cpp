// The report page (report/html.hpp, html_tables.hpp): self-contained, escaped, with the
// data its script draws. The drawing itself is checked in a browser by tests/report_test.sh.
#include "report/html.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "report/html_tables.hpp"
#include "report/run_compare.hpp"
#include "report_test_util.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(ReportHtml, Escaping) {
  EXPECT_EQ(html_escape("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;");
  const std::string js = script_safe_json(Json{{"k", "</script><!-- & \xff"}});
  EXPECT_EQ(js.find('<'), std::string::npos);
  EXPECT_EQ(js.find('>'), std::string::npos);
  EXPECT_EQ(js.find('&'), std::string::npos);
  EXPECT_NE(js.find("\\u003c/script\\u003e"), std::string::npos);
  // Invalid UTF-8 becomes U+FFFD, and the rest parses back to the same text.
  EXPECT_EQ(parse_json_text(js, "x")["k"].get<std::string>(), "</script><!-- & \xEF\xBF\xBD");
}

TEST(ReportHtml, Formatting) {
  EXPECT_EQ(fmt_seconds(0.0123), "12.300 ms");
  EXPECT_EQ(fmt_seconds(2.5), "2.500 s");
  EXPECT_EQ(fmt_seconds(5e-6), "5.0 us");
  EXPECT_EQ(fmt_bytes(3 * 1024.0 * 1024 * 1024), "3.00 GiB");
  EXPECT_EQ(fmt_percent(0.4567), "45.7 %");
  EXPECT_EQ(error_cell(0.042), "<td class=\"num err ok\">+4.2 %</td>");
  EXPECT_EQ(error_cell(-0.1), "<td class=\"num err warn\">-10.0 %</td>");
  EXPECT_EQ(error_cell(0.5), "<td class=\"num err bad\">+50.0 %</td>");
  EXPECT_EQ(error_cell(INFINITY), "<td class=\"num\">n/a</td>");
}

class ReportPage : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "run");
    pipetwin::testing::PlanSpec s;
    s.model = pipetwin::testing::uniform(4, 1, 2, "act_kb=8");
    s.stages = 2;
    s.chunks = 4;
    const auto r = pipetwin::testing::simulate(s, 2);
    events_ = r.timeline.events.size();
    save_timeline(r.timeline, dir_.file("run/X.predicted.timeline.json"));
    Timeline measured = r.timeline;
    measured.source = "measured";
    save_timeline(measured, dir_.file("run/X.measured.timeline.json"));
    test::write_text(dir_.file("sweep.csv"),
                     "stages,chunks,iteration_time_s,bubble_fraction\n"
                     "2,1,3,0.5\n2,2,2,0.33\n2,4,1.5,0.2\n4,1,5,0.75\n4,2,4,0.6\n");
    test::write_text(dir_.file("repro.csv"),
                     "item,paper,ours\n<img src=x onerror=alert(1)>,10,12\nsafe,4,4\n");
  }
  std::string render(ReportOptions opt = {}) {
    return render_report(scan_results(dir_.path().string(), opt), opt);
  }
  test::TempDir dir_;
  size_t events_ = 0;
};

TEST_F(ReportPage, SelfContainedWithItsData) {
  ReportOptions opt;
  opt.title = "<title>";
  const std::string page = render(opt);
  EXPECT_NE(page.find("<title>&lt;title&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("href=\"http"), std::string::npos);
  EXPECT_NE(page.find(kReportJs), std::string::npos);
  EXPECT_NE(page.find(kReportCss), std::string::npos);
  // Two Gantt hosts side by side, two sweep charts (one per metric column).
  EXPECT_EQ(count(page, "data-gantt=\""), 2u);
  EXPECT_EQ(count(page, "class=\"gantt-group pair\""), 1u);
  EXPECT_EQ(count(page, "data-chart=\""), 2u);
  // The data block holds every event of both timelines.
  const size_t a = page.find("id=\"pt-data\">") + 13;
  const Json data = parse_json_text(page.substr(a, page.find("</script>", a) - a), "pt-data");
  ASSERT_EQ(data["gantts"].size(), 2u);
  EXPECT_EQ(data["gantts"][0]["events"].size() + data["gantts"][1]["events"].size(), 2 * events_);
  EXPECT_EQ(data["gantts"][0]["scale_end_us"], data["gantts"][1]["scale_end_us"]);
  ASSERT_EQ(data["charts"].size(), 2u);
  EXPECT_EQ(data["charts"][0]["x"], "chunks");
  EXPECT_EQ(data["charts"][0]["series"].size(), 2u);  // stages=2, stages=4
}

TEST_F(ReportPage, TextFromFilesIsEscaped) {
  const std::string page = render();
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  // The comparison headline: errors +20 % and 0 %.
  EXPECT_NE(page.find("2 rows compared (ours vs paper): median |error| 10.0 %, worst 20.0 %"),
            std::string::npos);
}

// scripts/main-job.sh's ViT files: one group, its prediction beside its median run, the verdict
// line of `pipetwin compare`, the members and the per-action error table.
TEST(ReportPageRepeats, MainJobFolderShowsThePairAndTheVerdict) {
  test::TempDir dir;
  pipetwin::testing::write_main_job_folder(dir, {1.08, 1.02, 1.15, 1.05}, {0.98, 1.03, 1.01, 0.97});
  const ReportInputs in = scan_results(dir.path().string(), {});
  const std::string page = render_report(in, {});
  EXPECT_EQ(count(page, "class=\"gantt-group pair\""), 1u);
  EXPECT_EQ(count(page, "data-gantt=\""), 2u);  // the other runs are listed, not drawn
  EXPECT_EQ(count(page, "<article class=\"run\""), 1u);
  const auto rc = compare_run_group(in.runs.at(0));
  ASSERT_TRUE(rc);
  EXPECT_NE(page.find("<p class=\"verdict within\" data-verdict=\"within\">" +
                      html_escape(rc->verdict.text) + "</p>"),
            std::string::npos);
  EXPECT_NE(page.find("<td>within the noise (4 runs, 5 predictions)</td>"), std::string::npos);
  EXPECT_NE(page.find("<b>measured</b> · median of 4 runs <code>vit.run4.trace.json</code>"),
            std::string::npos);
  EXPECT_NE(page.find("<b>predicted</b> · 1 of 5 predictions <code>vit.sim.trace.json</code>"),
            std::string::npos);
  // The members: 5 predictions and 4 runs; the median run's row marked, 0 against itself.
  EXPECT_EQ(count(page, "<tr class=\"chosen\">"), 2u);
  EXPECT_NE(page.find("<td>median run (compared)</td><td><code>vit.run4.trace.json</code></td>"),
            std::string::npos);
  EXPECT_NE(page.find("<code>vit.run3.trace.json</code></td><td class=\"num\">"),
            std::string::npos);
  EXPECT_NE(page.find("<details class=\"actions\" open>"), std::string::npos);
  EXPECT_NE(page.find("<td>stage 1 backward</td>"), std::string::npos);
  // Both drawn timelines share one time axis: the median run's end.
  const size_t a = page.find("id=\"pt-data\">") + 13;
  const Json data = parse_json_text(page.substr(a, page.find("</script>", a) - a), "pt-data");
  ASSERT_EQ(data["gantts"].size(), 2u);
  EXPECT_EQ(data["gantts"][0]["scale_end_us"], data["gantts"][1]["scale_end_us"]);
  EXPECT_NEAR(data["gantts"][1]["scale_end_us"].get<double>(),
              1e6 * in.runs[0].timeline(kMeasured)->gantt.end_s, 1e-3);
}

TEST_F(ReportPage, RunShowsItsPlansLayout) {
  EXPECT_EQ(render().find("<p class=\"layout\">"), std::string::npos);  // no plan file yet
  test::write_text(dir_.file("run/X.plan.json"),
                   R"({"format": "pipetwin.plan", "version": 1, "schedule": "1f1b",
                       "batch_size": 64, "chunks": 16, "dp": 2, "stages": [{}, {}, {}, {}],
                       "tensor_parallel": {"size": 2, "sequence_parallel": true},
                       "distributed_optimizer": true})");
  EXPECT_NE(render().find("<p class=\"layout\">layout: 1f1b, K=4 x dp 2 x t=2 (sequence "
                          "parallel), M=16, distributed optimizer</p>"),
            std::string::npos);
}

TEST_F(ReportPage, WrittenAtomically) {
  const std::string out = dir_.file("out/report.html");
  std::filesystem::create_directories(dir_.path() / "out");
  const ReportInputs in = scan_results(dir_.path().string(), {});
  write_report(in, {}, out);
  EXPECT_EQ(test::read_text(out), render_report(in, {}));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path() / "out")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);  // no temporary left behind
  EXPECT_NE(test::input_error([&] {
              write_report(in, {}, dir_.file("no/such/dir/r.html"));
            }).find("r.html"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin::report
