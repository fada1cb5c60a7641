// The report's "Schedule choice by micro-batch count" (report/schedule_choice.hpp,
// html_schedule_choice.hpp): the winner per M is the fastest schedule that fits, a point over
// memory never wins, flips are marked, groups split on the other inputs, a one-schedule sweep
// gives no section, and the page draws the section in headless Chromium without errors.
#include "report/schedule_choice.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "report/html.hpp"
#include "report/html_schedule_choice.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// One point of a hand-written sweep: time 0 (and an error) when it could not run.
struct P {
  const char* schedule;
  int m;
  double time_s;
  double peak_gib;
  int stages = 8;
  const char* error = "";
};

// `pipetwin sweep`'s layout (studies/sweep/sweep.hpp) with a device of 80 GiB: fits = peak <= 80.
std::string sweep_csv(const std::vector<P>& points) {
  std::string out =
      "point,points,schedule,chunks,model,cluster,stages,batch,plan_M,plan_micro_batch,"
      "plan_batch,plan_devices,iteration_time_s,throughput_samples_per_s,bubble_fraction,"
      "peak_memory_max_bytes,memory_capacity_bytes,fits,oom_device,over_bytes,error\n";
  for (size_t i = 0; i < points.size(); ++i) {
    const P& p = points[i];
    const bool ran = *p.error == '\0';
    const bool fits = ran && p.peak_gib <= 80;
    out += fmt::format("{},{},{},{},gpt2:1.5b,dgx-h100,{},64,", i, points.size(), p.schedule, p.m,
                       p.stages);
    if (!ran) {
      out += fmt::format("{},,,,,,,,,no,,,\"{}\"\n", p.m, p.error);
      continue;
    }
    out += fmt::format("{},{},64,{},{},{},0.1,{:.0f},{:.0f},{},{},{:.0f},\n", p.m, 64 / p.m,
                       p.stages, p.time_s, 64 / p.time_s, p.peak_gib * kGiB, 80 * kGiB,
                       fits ? "yes" : "no", fits ? "" : "0", fits ? 0.0 : (p.peak_gib - 80) * kGiB);
  }
  return out;
}

// M = 8: zb-h2 wins, zbv refused (M < 2K - 1). M = 16: zb-h2 is fastest but over memory, zbv
// wins (flip). M = 24: zbv again. M = 32: zbv over memory too, 1f1b wins (flip).
const std::vector<P> kFlipping = {
    {"1f1b", 8, 2.00, 40},  {"zb-h2", 8, 1.60, 70},  {"zbv", 8, 0, 0, 8, "zbv needs M >= 15"},
    {"1f1b", 16, 1.60, 50}, {"zb-h2", 16, 1.20, 85}, {"zbv", 16, 1.30, 60},
    {"1f1b", 24, 1.50, 60}, {"zb-h2", 24, 1.10, 95}, {"zbv", 24, 1.20, 75},
    {"1f1b", 32, 1.45, 70}, {"zb-h2", 32, 1.05, 99}, {"zbv", 32, 1.10, 90},
};

ScheduleChoice choice_of(const std::string& csv) {
  const auto c = schedule_choice(parse_csv(csv, "sweep.csv"));
  EXPECT_TRUE(c.has_value());
  return c.value_or(ScheduleChoice{});
}

TEST(ScheduleChoice, FastestThatFitsPerMAndTheFlips) {
  const ScheduleChoice c = choice_of(sweep_csv(kFlipping));
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_TRUE(c.group_columns.empty());
  const ScheduleChoiceGroup& g = c.groups[0];
  EXPECT_EQ(g.label, "all");
  EXPECT_EQ(g.candidates, (std::vector<std::string>{"1f1b", "zb-h2", "zbv"}));
  EXPECT_DOUBLE_EQ(g.capacity_bytes, 80 * kGiB);
  ASSERT_EQ(g.rows.size(), 4u);
  const std::vector<std::string> winners = {"zb-h2", "zbv", "zbv", "1f1b"};
  const std::vector<bool> flips = {false, true, false, true};
  for (size_t i = 0; i < g.rows.size(); ++i) {
    const ScheduleChoiceRow& r = g.rows[i];
    EXPECT_EQ(r.m, 8.0 * (i + 1));
    ASSERT_TRUE(r.winner) << "M = " << r.m;
    EXPECT_EQ(r.winner->schedule, winners[i]) << "M = " << r.m;
    EXPECT_TRUE(r.winner->fits);
    EXPECT_EQ(r.flip, flips[i]) << "M = " << r.m;
    for (const auto& p : r.not_fitting) EXPECT_FALSE(p.fits);
  }
  // M = 8: 1f1b is the runner-up, 25 % slower; zbv could not run and says why.
  ASSERT_TRUE(g.rows[0].runner_up);
  EXPECT_EQ(g.rows[0].runner_up->schedule, "1f1b");
  EXPECT_EQ(fmt_loss(g.rows[0].winner->iteration_s, g.rows[0].runner_up->iteration_s),
            "+25.0 % (400.000 ms)");
  ASSERT_EQ(g.rows[0].cannot_run.size(), 1u);
  EXPECT_EQ(g.rows[0].cannot_run[0].error, "zbv needs M >= 15");
  // M = 16: the fastest point (zb-h2, 85 GiB) did not fit and is listed, not chosen.
  EXPECT_EQ(g.rows[1].previous, "zb-h2");
  ASSERT_EQ(g.rows[1].not_fitting.size(), 1u);
  EXPECT_EQ(g.rows[1].not_fitting[0].schedule, "zb-h2");
  EXPECT_DOUBLE_EQ(g.rows[1].not_fitting[0].peak_bytes, 85 * kGiB);
  // M = 32: only 1f1b fits, so there is no runner-up; the other two are listed fastest first.
  EXPECT_FALSE(g.rows[3].runner_up);
  EXPECT_EQ(g.rows[3].previous, "zbv");
  ASSERT_EQ(g.rows[3].not_fitting.size(), 2u);
  EXPECT_EQ(g.rows[3].not_fitting[0].schedule, "zb-h2");
  EXPECT_EQ(g.flips(), 2u);
  EXPECT_EQ(g.summary(), "zb-h2 at M = 8, zbv for M = 16-24, 1f1b at M = 32");
  EXPECT_EQ(g.fixed, (std::vector<std::string>{"model=gpt2:1.5b", "cluster=dgx-h100", "stages=8",
                                               "batch=64"}));
}

TEST(ScheduleChoice, NoScheduleFitsIsNoWinnerAndNoFlip) {
  const ScheduleChoice c = choice_of(sweep_csv({{"1f1b", 8, 2.0, 90},
                                                {"zb-h1", 8, 1.5, 95},
                                                {"1f1b", 16, 1.6, 70},
                                                {"zb-h1", 16, 1.2, 85}}));
  const ScheduleChoiceGroup& g = c.groups.at(0);
  EXPECT_FALSE(g.rows[0].winner);
  EXPECT_EQ(g.rows[0].not_fitting.size(), 2u);
  EXPECT_EQ(g.rows[1].winner->schedule, "1f1b");
  EXPECT_FALSE(g.rows[1].flip);
  EXPECT_EQ(g.summary(), "nothing fits at M = 8, 1f1b at M = 16");
}

TEST(ScheduleChoice, OneScheduleOrOneMGivesNone) {
  EXPECT_FALSE(schedule_choice(parse_csv(
      sweep_csv({{"1f1b", 8, 2.0, 40}, {"1f1b", 16, 1.6, 50}, {"1f1b", 24, 1.5, 60}}), "s.csv")));
  EXPECT_FALSE(
      schedule_choice(parse_csv(sweep_csv({{"1f1b", 8, 2.0, 40}, {"zbv", 8, 1.6, 50}}), "s.csv")));
  // No schedule column at all (the existing report tests' sweep).
  EXPECT_FALSE(schedule_choice(parse_csv("stages,chunks,iteration_time_s\n2,1,3\n2,2,2\n", "s")));
  // A .best.csv holds only the top points.
  EXPECT_FALSE(schedule_choice(parse_csv(
      "rank,schedule,chunks,iteration_time_s\n1,zbv,16,1\n2,1f1b,8,2\n3,zbv,8,3\n4,1f1b,16,4\n",
      "s.best.csv")));
}

TEST(ScheduleChoice, OtherInputsSplitGroups) {
  std::vector<P> points;
  for (int k : {4, 8}) {
    // K = 4: zb-h1 always fits and wins; K = 8: it does not fit at M = 16.
    points.push_back({"1f1b", 8, 2.0, 40, k});
    points.push_back({"zb-h1", 8, 1.8, 50, k});
    points.push_back({"1f1b", 16, 1.7, 50, k});
    points.push_back({"zb-h1", 16, 1.5, k == 4 ? 60.0 : 81.0, k});
  }
  const ScheduleChoice c = choice_of(sweep_csv(points));
  EXPECT_EQ(c.group_columns, (std::vector<std::string>{"stages"}));
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].label, "stages=4");
  EXPECT_EQ(c.groups[0].flips(), 0u);
  EXPECT_EQ(c.groups[1].label, "stages=8");
  EXPECT_EQ(c.groups[1].summary(), "zb-h1 at M = 8, 1f1b at M = 16");
  EXPECT_TRUE(c.groups[1].rows[1].flip);
}

TEST(ScheduleChoice, PlainTablesVirtualStagesAndAutoChunks) {
  // No `fits` column: peak against capacity. A virtual-stages column makes interleaved-1f1b two
  // candidates. chunks=auto resolving to M = 8 duplicates a listed point: the better copy stays.
  const std::string csv =
      "schedule,virtual_stages,chunks,plan_M,iteration_time_s,peak_memory_max_bytes,"
      "memory_capacity_bytes\n"
      "1f1b,1,8,8,2.0,10,100\n"
      "interleaved-1f1b,1,8,8,2.0,10,100\n"
      "interleaved-1f1b,2,8,8,1.5,120,100\n"
      "1f1b,1,16,16,1.8,20,100\n"
      "interleaved-1f1b,1,16,16,1.8,20,100\n"
      "interleaved-1f1b,2,16,16,1.4,90,100\n"
      "1f1b,1,auto,8,1.9,10,100\n";
  const ScheduleChoice c = choice_of(csv);
  ASSERT_EQ(c.groups.size(), 1u);
  const ScheduleChoiceGroup& g = c.groups[0];
  EXPECT_EQ(g.candidates,
            (std::vector<std::string>{"1f1b", "interleaved-1f1b v=1", "interleaved-1f1b v=2"}));
  EXPECT_EQ(g.rows[0].winner->schedule, "1f1b");
  EXPECT_DOUBLE_EQ(g.rows[0].winner->iteration_s, 1.9);  // the auto copy, faster
  EXPECT_EQ(g.rows[0].not_fitting.at(0).schedule, "interleaved-1f1b v=2");
  EXPECT_EQ(g.rows[1].winner->schedule, "interleaved-1f1b v=2");
  EXPECT_TRUE(g.rows[1].flip);
  // Equal times (1f1b and interleaved v=1 are one schedule): the first in the file wins.
  EXPECT_EQ(g.rows[1].runner_up->schedule, "1f1b");
}

TEST(ScheduleChoice, CandidatesAndMThatNeverRanAreLeftOut) {
  // dualpipev is refused everywhere; at M = 24 the batch is not divisible, so nothing ran.
  const char* layout = "needs its stages placed a V";
  const char* batch = "--batch 64 is not divisible by dp x chunks = 1 x 24";
  const ScheduleChoice c = choice_of(sweep_csv({{"1f1b", 8, 2.0, 40},
                                                {"zb-h1", 8, 1.8, 50},
                                                {"dualpipev", 8, 0, 0, 8, layout},
                                                {"1f1b", 24, 0, 0, 8, batch},
                                                {"zb-h1", 24, 0, 0, 8, batch},
                                                {"dualpipev", 24, 0, 0, 8, batch},
                                                {"1f1b", 32, 1.4, 60},
                                                {"zb-h1", 32, 1.3, 85},
                                                {"dualpipev", 32, 0, 0, 8, layout}}));
  const ScheduleChoiceGroup& g = c.groups.at(0);
  EXPECT_EQ(g.candidates, (std::vector<std::string>{"1f1b", "zb-h1"}));
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.rows[1].m, 32);
  EXPECT_TRUE(g.rows[1].flip);  // zb-h1 at M = 8, over memory at M = 32
  EXPECT_EQ(g.points.size(), 4u);
  EXPECT_EQ(g.left_out(),
            (std::vector<std::string>{std::string("dualpipev ran at no M: ") + layout,
                                      std::string("M = 24: no schedule ran: ") + batch}));
}

TEST(ScheduleChoice, IdenticalCandidatesFold) {
  // interleaved-1f1b with v = 1 is 1f1b: one line, one table entry, named as an alias.
  const ScheduleChoice c = choice_of(sweep_csv({{"1f1b", 8, 2.0, 40},
                                                {"interleaved-1f1b", 8, 2.0, 40},
                                                {"zb-h1", 8, 1.8, 90},
                                                {"1f1b", 16, 1.6, 50},
                                                {"interleaved-1f1b", 16, 1.6, 50},
                                                {"zb-h1", 16, 1.5, 60}}));
  const ScheduleChoiceGroup& g = c.groups.at(0);
  EXPECT_EQ(g.candidates, (std::vector<std::string>{"1f1b", "zb-h1"}));
  EXPECT_EQ(g.aliases, (std::vector<std::string>{"interleaved-1f1b = 1f1b"}));
  EXPECT_FALSE(g.rows[0].runner_up);
  EXPECT_EQ(g.rows[1].runner_up->schedule, "1f1b");
}

class ScheduleChoicePage : public test::TempDirTest {
 protected:
  void SetUp() override {
    test::write_text((dir_ / "whatif.csv").string(), sweep_csv(kFlipping));
    test::write_text((dir_ / "one.csv").string(),
                     sweep_csv({{"1f1b", 8, 2.0, 40}, {"1f1b", 16, 1.6, 50}}));
  }
  std::string render() { return render_report(scan_results(dir_.string(), {}), {}); }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST_F(ScheduleChoicePage, SectionWithTableChartsAndFlips) {
  const std::string page = render();
  EXPECT_EQ(count(page, "<section id=\"schedule-choice\">"), 1u);
  EXPECT_EQ(count(page, "Schedule choice by micro-batch count"), 1u);
  // Only the sweep of three schedules has one: one article, four rows, two of them flips.
  EXPECT_EQ(count(page, "<article class=\"schedule-choice\">"), 1u);
  EXPECT_EQ(page.find("<code>one.csv</code></h3><p class=\"note\">fixed"), std::string::npos);
  EXPECT_EQ(count(page, "<tr class=\"flip\">"), 2u);
  EXPECT_NE(page.find("flips to zbv at M = 16 (was zb-h2)"), std::string::npos);
  EXPECT_NE(page.find("flips to 1f1b at M = 32 (was zbv)"), std::string::npos);
  EXPECT_NE(page.find("fastest that fits: zb-h2 at M = 8, zbv for M = 16-24, 1f1b at M = 32; 2 "
                      "flips · device memory 80.00 GiB"),
            std::string::npos);
  EXPECT_NE(page.find("<span title=\"zbv needs M &gt;= 15\">zbv</span>"), std::string::npos);
  // The charts: iteration time and peak memory, a line per schedule, the flips marked.
  const size_t a = page.find("id=\"pt-data\">") + 13;
  const Json data = parse_json_text(page.substr(a, page.find("</script>", a) - a), "pt-data");
  const Json* time = nullptr;
  const Json* memory = nullptr;
  for (const auto& c : data["charts"]) {
    if (c["y"] == "iteration time (s)") time = &c;
    if (c["y"] == "peak memory (GiB)") memory = &c;
  }
  ASSERT_TRUE(time && memory);
  ASSERT_EQ((*time)["series"].size(), 3u);
  EXPECT_EQ((*time)["series"][1]["name"], "zb-h2");
  EXPECT_EQ((*time)["series"][1]["fits"], Json::parse("[true,false,false,false]"));
  EXPECT_EQ((*time)["series"][2]["x"], Json::parse("[16.0,24.0,32.0]"));  // zbv: no M = 8
  EXPECT_EQ((*time)["marks"].size(), 2u);
  EXPECT_EQ((*time)["marks"][0]["x"], 16.0);
  EXPECT_EQ((*memory)["hlines"][0]["y"], 80.0);
}

TEST_F(ScheduleChoicePage, OneScheduleNoSection) {
  std::filesystem::remove(dir_ / "whatif.csv");
  const std::string page = render();
  EXPECT_EQ(page.find("id=\"schedule-choice\""), std::string::npos);
  EXPECT_EQ(page.find("Schedule choice by micro-batch count"), std::string::npos);
}

// The page in headless Chromium (when installed): the script draws the section's charts (three
// lines each, the hollow points of the schedules over memory, the two flips per chart) next to
// the plain sweep charts, with no console message.
TEST_F(ScheduleChoicePage, DrawsInChromium) {
  std::string browser;
  for (const char* b : {"chromium", "chromium-browser", "google-chrome"}) {
    if (std::system(fmt::format("command -v {} >/dev/null 2>&1", b).c_str()) == 0) {
      browser = b;
      break;
    }
  }
  if (browser.empty()) GTEST_SKIP() << "no chromium on PATH";
  const std::string html = (dir_ / "report.html").string();
  write_report(scan_results(dir_.string(), {}), {}, html);
  const std::string cmd = fmt::format(
      "timeout 60 {} --headless=new --disable-gpu --no-sandbox --disable-dev-shm-usage "
      "--no-first-run --user-data-dir={} --window-size=1400,2000 --enable-logging=stderr --v=0 "
      "--dump-dom file://{} >{} 2>{}",
      browser, (dir_ / "profile").string(), html, (dir_ / "dom.html").string(),
      (dir_ / "console.log").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::read_text((dir_ / "console.log").string());
  const std::string dom = test::read_text((dir_ / "dom.html").string());
  std::smatch body;
  ASSERT_TRUE(std::regex_search(dom, body, std::regex("<body([^>]*)>")));
  const std::string attrs = body[1];
  EXPECT_NE(attrs.find("data-render-status=\"ok\""), std::string::npos) << attrs;
  // zb-h2 misses memory at M = 16, 24, 32 and zbv at M = 32: 4 hollow points per chart.
  EXPECT_NE(attrs.find("data-unfit-points=\"8\""), std::string::npos) << attrs;
  EXPECT_NE(attrs.find("data-flip-marks=\"4\""), std::string::npos) << attrs;
  const std::string console = test::read_text((dir_ / "console.log").string());
  EXPECT_EQ(console.find("CONSOLE"), std::string::npos) << console;
}

}  // namespace
}  // namespace pipetwin::report
