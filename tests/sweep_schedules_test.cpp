// Sweeps over the split-backward and multi-chunk schedules: the virtual_stages knob, rows equal
// to `simulate`, and the points a schedule cannot run as rows with the reason.
#include <gtest/gtest.h>

#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"
#include "sweep_test_util.hpp"

namespace pipetwin::sim {
namespace {

TEST(Grid, VirtualStagesKnobAndItsAlias) {
  const Grid g = Grid::parse("schedule=zbv,interleaved-1f1b;v=auto,2");
  ASSERT_NE(g.axis("virtual_stages"), nullptr);
  EXPECT_EQ(g.axis("virtual_stages")->values, (std::vector<std::string>{"auto", "2"}));
  PointConfig c;
  g.apply(3, c);
  EXPECT_EQ(c.schedule, "interleaved-1f1b");
  EXPECT_EQ(c.virtual_stages, 2);
  g.apply(0, c);
  EXPECT_EQ(c.virtual_stages, 0);
  EXPECT_EQ(g.to_string(), "schedule=zbv,interleaved-1f1b;virtual_stages=auto,2");
  auto err = [](const std::string& spec) { return input_error([&] { Grid::parse(spec); }); };
  EXPECT_EQ(err("v=1;virtual_stages=2"), "--grid: field virtual_stages given twice");
  EXPECT_EQ(err("v=0"), "--grid: virtual_stages: 0 is out of range 1..1024");
}

TEST(Sweep, NewSchedulesRowsEqualSimulateAndRefusalsAreRows) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  SweepInputs in = inputs(hw, "uniform:layers=8,fwd_ms=1,bwd_ms=2,wgrad_ms=1,act_kb=64");
  in.base.stages = 2;
  const Sweep sweep(
      Grid::parse("schedule=1f1b,interleaved-1f1b,zb-h1,zb-h2,zbv,dualpipev;v=auto,2;chunks=2,4"),
      in);
  ASSERT_EQ(sweep.header()[3], "virtual_stages");
  int simulated = 0, refused = 0;
  for (int64_t i = 0; i < sweep.size(); ++i) {
    const PointConfig c = sweep.config(i);
    const CsvRow row = sweep.row(i);
    const std::string error = row.back();
    const std::string where = fmt::format("{} v={} M={}", c.schedule, c.virtual_stages, c.chunks);
    const bool one_per_device =
        c.schedule == "1f1b" || c.schedule == "zb-h1" || c.schedule == "zb-h2";
    if (one_per_device && c.virtual_stages == 2) {
      EXPECT_NE(error.find("runs one stage per device (--virtual-stages 2"), std::string::npos)
          << where << ": " << error;
      ++refused;
      continue;
    }
    if (c.schedule == "zbv" && c.chunks == 2) {
      EXPECT_EQ(error,
                "schedule zbv: needs at least 2D - 1 = 3 micro-batches on 2 devices (M = 2)");
      ++refused;
      continue;
    }
    if (c.schedule == "dualpipev" && c.chunks == 2) {
      EXPECT_NE(error.find("needs at least 2D = 4"), std::string::npos) << where;
      ++refused;
      continue;
    }
    ASSERT_EQ(error, "") << where;
    const Evaluation e = sweep.evaluate(c);
    ASSERT_TRUE(e.ok()) << where;
    const int v = c.virtual_stages > 0 ? c.virtual_stages
                                       : (c.schedule == "zbv" || c.schedule == "dualpipev" ? 2 : 1);
    EXPECT_EQ(e.plan.num_stages(), 2 * v) << where;
    EXPECT_EQ(e.plan.devices_per_replica(), 2) << where;
    const Metrics m = simulate_plan(PlanContext(e.plan, 0)).metrics;
    const size_t col = csv_column(sweep.header(), "iteration_time_s", "test");
    EXPECT_EQ(row[col], fmt::format("{}", m.iteration_time_s)) << where;
    EXPECT_EQ(row[csv_column(sweep.header(), "plan_devices", "test")], "2") << where;
    ++simulated;
  }
  EXPECT_EQ(refused, 3 * 2 + 2 + 2);
  EXPECT_EQ(simulated, 24 - refused);
}

}  // namespace
}  // namespace pipetwin::sim
