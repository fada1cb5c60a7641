// The runs file `pipetwin calibrate --runs` reads (studies/framework_runs.hpp): its columns in any
// order, the optional ones, and every bad value a one-line error naming the file, the row (its
// line) and the column.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "studies/framework_runs.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::sim {
namespace {

using test::input_error;
using ::testing::HasSubstr;

constexpr const char* kHeader =
    "model,cluster,stages,dp,batch,micro_batch,schedule,dtype,optimizer,measured_ms\n";

std::string error_of(const std::string& text) {
  return input_error([&] { parse_framework_runs(text, "runs.csv"); });
}

TEST(FrameworkRuns, ReadsEveryColumn) {
  const auto runs = parse_framework_runs(
      std::string(kHeader) + "mlp,local-cpu-2,2,1,32,4,gpipe,,,4.7\n" +
          "\"uniform:layers=4,fwd_ms=1\",hardware/clusters/l4-8x.json,4,2,64,2,1f1b,bfloat16,"
          "adam,120.5",  // the last line without its line break
      "runs.csv");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].model, "mlp");
  EXPECT_EQ(runs[0].stages, 2);
  EXPECT_EQ(runs[0].chunks(), 8);  // M = 32 / (1 x 4)
  EXPECT_DOUBLE_EQ(runs[0].measured_s, 4.7e-3);
  EXPECT_EQ(runs[0].dtype, "");
  EXPECT_EQ(runs[0].partitioner, "uniform");
  EXPECT_EQ(runs[0].origin, "runs.csv:2");
  EXPECT_EQ(runs[1].model, "uniform:layers=4,fwd_ms=1");
  EXPECT_EQ(runs[1].cluster, "hardware/clusters/l4-8x.json");
  EXPECT_EQ(runs[1].chunks(), 16);  // 64 / (2 x 2)
  EXPECT_EQ(runs[1].optimizer, "adam");
  EXPECT_EQ(runs[1].origin, "runs.csv:3");
}

TEST(FrameworkRuns, ColumnsInAnyOrderAndOptionalOnes) {
  const auto runs = parse_framework_runs(
      "measured_ms,virtual_stages,partitioner,model,cluster,stages,dp,batch,micro_batch,schedule,"
      "dtype,optimizer\n\n"
      "10,2,balance-time,mlp,local-cpu-2,2,1,8,1,interleaved-1f1b,float32,sgd\n",
      "runs.csv");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].virtual_stages, 2);
  EXPECT_EQ(runs[0].partitioner, "balance-time");
  EXPECT_EQ(runs[0].origin, "runs.csv:3");  // the blank line 2 skipped, still counted
}

TEST(FrameworkRuns, RoundTripsThroughItsOwnLines) {
  FrameworkRun run{.model = "uniform:layers=4,fwd_ms=1",
                   .cluster = "l4-8x",
                   .stages = 4,
                   .dp = 2,
                   .batch = 64,
                   .micro_batch = 2,
                   .virtual_stages = 0,
                   .schedule = "1f1b",
                   .dtype = "",
                   .optimizer = "adam",
                   .partitioner = "uniform",
                   .measured_s = 0.0125,
                   .origin = ""};
  const auto back =
      parse_framework_runs(framework_runs_header() + framework_run_line(run), "runs.csv");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].model, run.model);
  EXPECT_EQ(back[0].stages, 4);
  EXPECT_DOUBLE_EQ(back[0].measured_s, 0.0125);
}

TEST(FrameworkRuns, BadValuesNameTheFileRowAndColumn) {
  const std::string h = kHeader;
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,1,32,4,gpipe,,,4.7\nmlp,local-cpu-2,two,1,32,4,gpipe,"
                         ",,4.7\n"),
            "runs.csv:3:3: stages: expected a positive integer, got \"two\"");
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,0,32,4,gpipe,,,4.7\n"),
            "runs.csv:2:4: dp: must be positive, got 0");
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,1,32,4,gpipe,,,fast\n"),
            "runs.csv:2:10: measured_ms: expected a time in milliseconds, got \"fast\"");
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,1,32,4,gpipe,,,-3\n"),
            "runs.csv:2:10: measured_ms: must be a positive time, got -3");
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,1,30,4,gpipe,,,4.7\n"),
            "runs.csv:2:6: micro_batch: 4 does not divide the batch 30 into dp 1 replicas");
  EXPECT_EQ(error_of(h + ",local-cpu-2,2,1,32,4,gpipe,,,4.7\n"),
            "runs.csv:2:1: model: empty (a value is required)");
  EXPECT_EQ(error_of(h + "mlp,local-cpu-2,2,1,32,4,gpipe,,\n"),
            "runs.csv:2: 9 fields, the header has 10");
}

TEST(FrameworkRuns, BadHeadersAndFiles) {
  EXPECT_EQ(error_of("model,cluster,stages,dp,batch,micro_batch,schedule,dtype,optimizer\nx\n"),
            "runs.csv:1: missing column \"measured_ms\"");
  EXPECT_THAT(error_of(std::string("model,cluster,stages,dp,batch,micro_batch,schedule,dtype,"
                                   "optimizer,measured_ms,speed\n")),
              HasSubstr("runs.csv:1:11: unknown column \"speed\" (the columns: model, cluster,"));
  EXPECT_EQ(error_of(std::string("model,model\n")),
            "runs.csv:1:2: column \"model\" given twice (also column 1)");
  EXPECT_EQ(error_of(kHeader), "runs.csv: no runs after the header");
  EXPECT_EQ(error_of(std::string(kHeader) + "\"mlp,local-cpu-2\n"),
            "runs.csv:2: a quoted field never closed");
  EXPECT_EQ(input_error([] { read_framework_runs("/nonexistent/runs.csv"); }),
            "/nonexistent/runs.csv: cannot read the runs file");
}

}  // namespace
}  // namespace pipetwin::sim
