// core/elastic/transition_overheads and epoch_log: Table 4 as defaults (and as copied into
// experiments/reference), and the epoch log's JSON and CSV.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/elastic/epoch_log.hpp"
#include "sim/transition_overheads.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;

TEST(TransitionOverheads, Table4Defaults) {
  const TransitionOverheads t = TransitionOverheads::table4();
  EXPECT_DOUBLE_EQ(t.start_s(8), 18.2);                    // initialization (length = 8)
  EXPECT_DOUBLE_EQ(t.compression_s(4, true), 10.2);        // 8 -> 4 with new processes
  EXPECT_DOUBLE_EQ(t.compression_s(2, true), 5.5);         // 4 -> 2
  EXPECT_DOUBLE_EQ(t.compression_s(1, true), 9.5);         // 2 -> 1
  EXPECT_DOUBLE_EQ(t.compression_s(4, false), 1.3 + 0.6);  // no CUDA context without AutoDP
  EXPECT_DOUBLE_EQ(t.repartition_s(8), 0.7 + 0.9);
  EXPECT_DOUBLE_EQ(t.start_s(16), 18.2);  // nearest length by log2
  EXPECT_EQ(t.row(3)->length, 4);
  EXPECT_DOUBLE_EQ(t.scaled(0.5).compression_s(2, true), 2.75);
  EXPECT_EQ(TransitionOverheads::none().start_s(8), 0);
  EXPECT_EQ(input_error([&] { t.scaled(-1); }),
            "transition overhead scale must not be negative (-1 given)");
}

TEST(TransitionOverheads, DefaultsMatchTheReferenceCopy) {
  const TransitionOverheads csv = load_transition_overheads(
      test::source_dir() + "/experiments/reference/pipetransformer-table4-transition.csv");
  const auto& table = TransitionOverheads::table4().rows;
  ASSERT_EQ(csv.rows.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(csv.rows[i].length, table[i].length);
    EXPECT_DOUBLE_EQ(csv.rows[i].overall_s, table[i].overall_s);
    EXPECT_DOUBLE_EQ(csv.rows[i].cuda_context_s, table[i].cuda_context_s);
    EXPECT_DOUBLE_EQ(csv.rows[i].pipeline_warmup_s, table[i].pipeline_warmup_s);
    EXPECT_DOUBLE_EQ(csv.rows[i].ddp_s, table[i].ddp_s);
  }
}

TEST(TransitionOverheads, CsvErrorsNameTheLineAndColumn) {
  test::TempDir dir;
  const std::string path = dir.file("t.csv");
  const std::string header =
      "# measured\nname,overall_s,cuda_context_s,pipeline_warmup_s,ddp_s,length_after\n";
  test::write_text(path, header + "start,1,0.5,0.25,0.25,2\ncompress,0.5,0,0.25,x,1\n");
  EXPECT_EQ(input_error([&] { load_transition_overheads(path); }),
            path + ": line 4: ddp_s: expected a non-negative number, got \"x\"");
  test::write_text(path, header + "start,1,0.5,0.25,0.25,0\n");
  EXPECT_EQ(input_error([&] { load_transition_overheads(path); }),
            path + ": line 3: length_after: expected a positive integer, got \"0\"");
  test::write_text(path, "name,overall_s\n");
  EXPECT_EQ(input_error([&] { load_transition_overheads(path); }),
            path + ": line 1: the header has no column length_after");
  test::write_text(path, header + "start,1,0.5,0.25,0.25,2\n");
  EXPECT_DOUBLE_EQ(load_transition_overheads(path).start_s(2), 1.0);
}

EpochLog sample_log() {
  EpochLog log;
  log.model = "vit:base";
  EpochRecord a;
  a.epoch = 0;
  a.K = 8;
  a.dp = 2;
  a.chunks = 16;
  a.steps = 10;
  a.samples = 4000;
  a.compute_s = 100;
  a.transition_s = 18.2;
  a.time_s = 118.2;
  a.throughput_samples_per_s = 4000 / 118.2;
  EpochRecord b = a;
  b.epoch = 1;
  b.frozen_layers = 4;
  b.K = 4;
  b.dp = 4;
  b.cache = true;
  b.loss = 0.5;
  log.epochs = {a, b};
  return log;
}

TEST(EpochLog, JsonRoundTripAndCsv) {
  test::TempDir dir;
  const EpochLog log = sample_log();
  save_epoch_log(log, dir.file("log.json"));
  const EpochLog back = load_epoch_log(dir.file("log.json"));
  ASSERT_EQ(back.epochs.size(), 2u);
  EXPECT_EQ(back.epochs[1].K, 4);
  EXPECT_TRUE(back.epochs[1].cache);
  EXPECT_DOUBLE_EQ(*back.epochs[1].loss, 0.5);
  EXPECT_FALSE(back.epochs[0].loss.has_value());
  EXPECT_DOUBLE_EQ(back.total_s(), 2 * 118.2);
  save_epoch_log(log, dir.file("log.csv"));
  const std::string csv = test::read_text(dir.file("log.csv"));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "epoch,frozen_layers,K,dp,chunks,cache,steps,samples,compute_s,transition_s,time_s,"
            "throughput_samples_per_s,loss,accuracy");
  EXPECT_THAT(csv, ::testing::HasSubstr(
                       "\n1,4,4,4,16,1,10,4000,100.000000,18.200000,118.200000,33.841,0.5,\n"));
}

// The row both engines close an epoch with: the epoch's time is its training plus its
// transitions, its throughput the samples over that time.
TEST(EpochLog, RowTimeIsComputePlusTransitionsAndThroughputSamplesOverIt) {
  EpochRecord r;
  r.samples = 4000;
  r.compute_s = 100;
  r.transition_s = 18.2;
  complete_epoch_row(r);
  EXPECT_DOUBLE_EQ(r.time_s, 118.2);
  EXPECT_DOUBLE_EQ(r.throughput_samples_per_s, 4000 / 118.2);
  EpochRecord empty;  // an epoch that took no time has no throughput, not a division by zero
  complete_epoch_row(empty);
  EXPECT_EQ(empty.time_s, 0);
  EXPECT_EQ(empty.throughput_samples_per_s, 0);
}

TEST(EpochLog, ErrorsNameTheField) {
  test::TempDir dir;
  Json doc = epoch_log_to_json(sample_log());
  doc["epochs"][1]["K"] = 0;
  test::write_text(dir.file("bad.json"), dump_json(doc));
  const std::string path = dir.file("bad.json");
  EXPECT_EQ(input_error([&] { load_epoch_log(path); }),
            path + ": epochs[1].K: must be positive (0 given)");
}

}  // namespace
}  // namespace pipetwin::elastic
