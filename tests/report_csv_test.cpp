// CSV reading and the sweep/comparison rules of the report (report/csv_table.hpp).
#include "report/csv_table.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace pipetwin::report {
namespace {

TEST(ReportCsv, ParsesQuotedCellsAndComments) {
  const CsvTable t = parse_csv(
      "# EPFL report, Table 1\n"
      "item,note,value\r\n"
      "\"a, b\",\"said \"\"hi\"\"\",1.5\n"
      "\n"
      "c,\"two\nlines\",2\n",
      "x.csv");
  ASSERT_EQ(t.columns, (std::vector<std::string>{"item", "note", "value"}));
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0][0], "a, b");
  EXPECT_EQ(t.rows[0][1], "said \"hi\"");
  EXPECT_EQ(t.rows[1][1], "two\nlines");
  EXPECT_EQ(t.column("value"), 2);
  EXPECT_EQ(t.column("missing"), -1);
  EXPECT_TRUE(t.numeric(2));
  EXPECT_FALSE(t.numeric(0));
}

TEST(ReportCsv, BrokenFilesAreOneLineErrors) {
  EXPECT_EQ(test::input_error([] { parse_csv("a,b\n1,2\n3\n", "s.csv"); }),
            "s.csv: row 2 has 1 cells, the header 2");
  EXPECT_EQ(test::input_error([] { parse_csv("", "e.csv"); }), "e.csv: no header row");
  EXPECT_EQ(test::input_error([] { parse_csv("a,a\n", "d.csv"); }),
            "d.csv: column \"a\" appears twice in the header");
  EXPECT_EQ(test::input_error([] { parse_csv("a\n\"open\n", "q.csv"); }),
            "q.csv: a quoted cell is never closed");
  EXPECT_EQ(test::input_error([] { read_csv("/nonexistent/x.csv"); }),
            "/nonexistent/x.csv: cannot open");
}

TEST(ReportCsv, Numbers) {
  EXPECT_EQ(parse_number("1e-3"), 1e-3);
  EXPECT_EQ(parse_number(" 3 "), 3.0);
  EXPECT_EQ(parse_number("-2.5"), -2.5);
  EXPECT_DOUBLE_EQ(*parse_number("12.5%"), 0.125);
  EXPECT_FALSE(parse_number("abc"));
  EXPECT_FALSE(parse_number("1.5x"));
  EXPECT_FALSE(parse_number("inf"));
  EXPECT_FALSE(parse_number("nan"));
  EXPECT_FALSE(parse_number("0x10"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_FALSE(parse_number("%"));
}

TEST(ReportCsv, MetricColumnsByName) {
  for (const char* m :
       {"iteration_time_s", "throughput_samples_per_s", "bubble_fraction", "peak_memory_bytes",
        "cost_usd", "speedup", "relative_error", "predicted_ms", "comm_overlap_fraction"}) {
    EXPECT_TRUE(is_metric_column(m)) << m;
  }
  for (const char* i : {"alpha", "stages", "chunks", "schedule", "partitioner", "dp", "cluster",
                        "micro_batch", "checkpoint", "K", "M"}) {
    EXPECT_FALSE(is_metric_column(i)) << i;
  }
}

const char* kSweep =
    "stages,chunks,schedule,fits,iteration_time_s,bubble_fraction\n"
    "2,8,gpipe,yes,0.9,0.11\n"
    "2,2,gpipe,yes,1.5,0.33\n"
    "2,4,gpipe,yes,1.2,0.2\n"
    "4,2,gpipe,no,,\n"
    "4,4,gpipe,yes,1.4,0.43\n"
    "4,8,gpipe,yes,1.1,0.27\n"
    "2,2,1f1b,yes,1.5,0.33\n"
    "2,4,1f1b,yes,1.2,0.2\n";

TEST(ReportCsv, SweepLayoutPicksXAndLines) {
  const CsvTable t = parse_csv(kSweep, "sweep.csv");
  EXPECT_EQ(classify_csv(t, ""), CsvKind::kSweep);
  const auto layout = sweep_layout(t, "");
  ASSERT_TRUE(layout);
  // chunks has 3 values, stages 2: chunks is x; fits is an outcome, never a line of its own.
  EXPECT_EQ(layout->x_column, "chunks");
  EXPECT_EQ(layout->series_columns, (std::vector<std::string>{"stages", "schedule"}));
  ASSERT_EQ(layout->charts.size(), 2u);
  const SweepChart& c = layout->charts[0];
  EXPECT_EQ(c.metric, "iteration_time_s");
  EXPECT_EQ(c.skipped_points, 1u);  // the infeasible point has no value
  ASSERT_EQ(c.series.size(), 3u);
  EXPECT_EQ(c.series[0].name, "stages=2 schedule=gpipe");
  EXPECT_EQ(c.series[0].x, (std::vector<double>{2, 4, 8}));  // sorted by x
  EXPECT_EQ(c.series[0].y, (std::vector<double>{1.5, 1.2, 0.9}));
  EXPECT_EQ(c.series[1].name, "stages=4 schedule=gpipe");
  EXPECT_EQ(c.series[1].x, (std::vector<double>{4, 8}));
  EXPECT_EQ(layout->charts[1].metric, "bubble_fraction");
}

TEST(ReportCsv, SweepXHintAndSeriesCap) {
  const CsvTable t = parse_csv(kSweep, "sweep.csv");
  const auto by_stages = sweep_layout(t, "stages");
  ASSERT_TRUE(by_stages);
  EXPECT_EQ(by_stages->x_column, "stages");
  EXPECT_EQ(by_stages->series_columns, (std::vector<std::string>{"chunks", "schedule"}));
  const auto capped = sweep_layout(t, "", 2, 1);
  ASSERT_TRUE(capped);
  ASSERT_EQ(capped->charts.size(), 1u);
  EXPECT_EQ(capped->charts[0].series.size(), 2u);
  EXPECT_EQ(capped->charts[0].dropped_series, 1u);
  // An unknown or non-numeric hint falls back to the rule.
  EXPECT_EQ(sweep_layout(t, "schedule")->x_column, "chunks");
  EXPECT_EQ(sweep_layout(t, "nope")->x_column, "chunks");
}

// The layout `pipetwin sweep` writes (here an alpha sweep, shortened): knobs between "points" and
// "plan_M", results after.
TEST(ReportCsv, SweepFileLayoutByPosition) {
  const CsvTable t = parse_csv(
      "point,points,alpha,schedule,model,stages,chunks,plan_M,plan_devices,iteration_time_s,"
      "memory_capacity_bytes,fits,oom_device,elastic_total_s,speedup,final_frozen,final_K,"
      "error\n"
      "0,4,0.1,gpipe,\"uniform:layers=12,fwd_ms=1\",8,auto,32,8,0.222,17179869184,yes,,75.9,0.97,"
      "4,8,\n"
      "1,4,0.1,1f1b,\"uniform:layers=12,fwd_ms=1\",8,auto,32,8,0.214,17179869184,yes,,75.6,0.98,"
      "4,8,\n"
      "2,4,0.2,gpipe,\"uniform:layers=12,fwd_ms=1\",8,auto,32,8,0.222,17179869184,yes,,78.0,0.95,"
      "7,4,\n"
      "3,4,0.2,1f1b,\"uniform:layers=12,fwd_ms=1\",8,auto,32,8,0.214,17179869184,yes,,75.1,0.99,"
      "7,4,\n",
      "alpha.sweep.csv");
  const auto layout = sweep_layout(t, "");
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->x_column, "alpha");
  EXPECT_EQ(layout->series_columns, (std::vector<std::string>{"schedule"}));
  std::vector<std::string> charts;
  for (const auto& c : layout->charts) charts.push_back(c.metric);
  // Results that vary; not plan_* (resolved inputs), not constants, not point numbers.
  EXPECT_EQ(charts, (std::vector<std::string>{"iteration_time_s", "elastic_total_s", "speedup",
                                              "final_frozen", "final_K"}));
  ASSERT_EQ(layout->charts[2].series.size(), 2u);
  EXPECT_EQ(layout->charts[2].series[1].name, "schedule=1f1b");
  EXPECT_EQ(layout->charts[2].series[1].y, (std::vector<double>{0.98, 0.99}));
}

TEST(ReportCsv, Classification) {
  // pipetwin reproduce's table layout (studies/reproduce/reproduce.cpp).
  const CsvTable repro = parse_csv(
      "item,metric,paper,ours,unit,relative_error,note\nddg K=4,time,10,11,ms,0.1,\n", "r.csv");
  EXPECT_EQ(classify_csv(repro, ""), CsvKind::kComparison);
  const auto cols = comparison_columns(repro);
  ASSERT_TRUE(cols);
  EXPECT_EQ(cols->item, 0);
  EXPECT_EQ(cols->reference, 2);
  EXPECT_EQ(cols->ours, 3);
  // experiments/validate_executor.py's layout.
  const CsvTable validation = parse_csv(
      "model,schedule,M,predicted_ms,measured_ms,error\nmlp,gpipe,4,10,12,-16.7%\n", "v.csv");
  EXPECT_EQ(classify_csv(validation, ""), CsvKind::kComparison);
  EXPECT_EQ(comparison_columns(validation)->reference, 3);
  // No numeric input with two values: a table.
  const CsvTable plain = parse_csv("cluster,gpus,cost_usd\na,8,10\nb,8,12\n", "p.csv");
  EXPECT_EQ(classify_csv(plain, ""), CsvKind::kTable);
  const CsvTable one_row = parse_csv("alpha,iteration_time_s\n0.1,2\n", "o.csv");
  EXPECT_EQ(classify_csv(one_row, ""), CsvKind::kTable);
  // `pipetwin capacity`'s ranking: numbers, but every "line" would be one cluster's one point.
  const CsvTable ranking = parse_csv(
      "objective,rank,cluster,gpus,price_per_gpu_hour,total_time_s,cost\n"
      "fastest,1,a,16,4.5,185,3.7\nfastest,2,b,8,2,301,2.3\nfastest,3,c,1,3.5,2400,2.3\n"
      "cheapest,1,c,1,3.5,2400,2.3\ncheapest,2,b,2,2,1350,1.5\n",
      "capacity.csv");
  EXPECT_EQ(classify_csv(ranking, ""), CsvKind::kTable);
}

}  // namespace
}  // namespace pipetwin::report
