// What-if sweeps: grid parsing and its errors, rows against closed forms, determinism
// across thread counts, resume after an interrupt or a torn row, shards merged == a whole run,
// and the best-points summary.
#include <atomic>

#include <gtest/gtest.h>

#include "core/schedule/generators.hpp"
#include "sim/elastic_sim.hpp"
#include "studies/sweep/grid.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"
#include "sim_test_util.hpp"
#include "sweep_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

// --- grid -------------------------------------------------------------------------------------

TEST(Grid, ProductInSpecOrderLastFieldFastest) {
  const Grid g = Grid::parse("stages=1,2,4,8;chunks=auto,4:32:4;schedule=gpipe,1f1b");
  ASSERT_EQ(g.axes().size(), 3u);
  EXPECT_EQ(g.size(), 4 * 9 * 2);
  EXPECT_EQ(g.axis("chunks")->values,
            (std::vector<std::string>{"auto", "4", "8", "12", "16", "20", "24", "28", "32"}));
  PointConfig c;
  g.apply(1, c);
  EXPECT_EQ(c.stages, 1);
  EXPECT_EQ(c.chunks, 0);  // auto
  EXPECT_EQ(c.schedule, "1f1b");
  g.apply(2 * 9 * 2 + 3 * 2, c);  // stages #2, chunks #3, schedule #0
  EXPECT_EQ(c.stages, 4);
  EXPECT_EQ(c.chunks, 12);
  EXPECT_EQ(c.schedule, "gpipe");
  EXPECT_EQ(g.to_string(), "stages=1,2,4,8;chunks=auto,4,8,12,16,20,24,28,32;schedule=gpipe,1f1b");
}

TEST(Grid, RealRangeIsInclusiveWithoutRoundingDrift) {
  Knob alpha{"alpha", KnobType::kReal, "test", 0, 1};
  const Axis a = parse_axis(alpha, "0.1:0.5:0.1");
  EXPECT_EQ(a.values, (std::vector<std::string>{"0.1", "0.2", "0.3", "0.4", "0.5"}));
  EXPECT_DOUBLE_EQ(a.numbers[2], 0.3);
  EXPECT_EQ(parse_axis(alpha, "0.25,0:1:0.5").values,
            (std::vector<std::string>{"0.25", "0", "0.5", "1"}));
}

TEST(Grid, EveryKnobSetsItsField) {
  const Grid g = Grid::parse(
      "model=bert:tiny;cluster=l4-8x;stages=3;chunks=5;schedule=pipedream;partitioner=balance-time;"
      "micro_batch=2;dp=4;checkpoint=except_last;frozen=1");
  PointConfig c;
  g.apply(0, c);
  EXPECT_EQ(c.model, "bert:tiny");
  EXPECT_EQ(c.cluster, "l4-8x");
  EXPECT_EQ(c.stages, 3);
  EXPECT_EQ(c.chunks, 5);
  EXPECT_EQ(c.schedule, "pipedream");
  EXPECT_EQ(c.partitioner, "balance-time");
  EXPECT_EQ(c.resolved_batch(), 2 * 5 * 4);
  EXPECT_EQ(c.checkpoint, Checkpoint::kExceptLast);
  EXPECT_EQ(c.frozen, 1);
}

TEST(Grid, BadSpecsNameTheFieldAndTheValue) {
  auto err = [](const std::string& spec) { return input_error([&] { Grid::parse(spec); }); };
  EXPECT_NE(err("speed=1").find("--grid: unknown field \"speed\" (known: model, cluster, stages"),
            std::string::npos);
  EXPECT_NE(err("stages=0").find("--grid: stages: 0 is out of range 1..1000000"),
            std::string::npos);
  EXPECT_NE(
      err("chunks=32:4:4").find("--grid: chunks: bad range \"32:4:4\" (stop 4 is below start 32)"),
      std::string::npos);
  EXPECT_NE(err("chunks=4:32:0").find("chunks: bad range \"4:32:0\" (step must be positive)"),
            std::string::npos);
  EXPECT_NE(err("chunks=4:32:4:1").find("chunks: bad range \"4:32:4:1\""), std::string::npos);
  EXPECT_NE(err("stages=x").find("--grid: stages: expected an integer, got \"x\""),
            std::string::npos);
  EXPECT_NE(err("stages=1.5").find("stages: expected an integer, got \"1.5\""), std::string::npos);
  EXPECT_NE(err("stages=").find("--grid: stages: no values"), std::string::npos);
  EXPECT_NE(err("stages=1,,2").find("--grid: stages: empty value in \"1,,2\""), std::string::npos);
  EXPECT_NE(err("stages=1,1").find("--grid: stages: value 1 given twice"), std::string::npos);
  EXPECT_NE(err("stages=1;stages=2").find("--grid: field stages given twice"), std::string::npos);
  EXPECT_NE(err("schedule=zigzag")
                .find("--grid: schedule: unknown value \"zigzag\" (known: naive, gpipe"),
            std::string::npos);
  EXPECT_NE(err("schedule=1:2").find("--grid: schedule: unknown value \"1:2\""), std::string::npos);
  EXPECT_NE(err("stages=auto").find("stages: expected an integer, got \"auto\""),
            std::string::npos);
  EXPECT_NE(err("stages").find("--grid: \"stages\" is not field=values"), std::string::npos);
  EXPECT_NE(err(" ; ").find("--grid: empty grid"), std::string::npos);
  EXPECT_NE(err("stages=1:20000000").find("stages: range \"1:20000000\" has 20000000 values"),
            std::string::npos);
  EXPECT_NE(err("stages=1:1000;chunks=1:1000;dp=1:1000").find("more than 100000000 points"),
            std::string::npos);
}

// virtual_stages (alias v): auto is the schedule's own (0), a number the model chunks per device.
TEST(Sweep, ConflictingBatchFieldsAndUnknownClustersAreErrors) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  auto err = [&](const std::string& spec) {
    return input_error([&] { Sweep(Grid::parse(spec), inputs(hw, kModel)); });
  };
  EXPECT_NE(err("micro_batch=1,2;chunks=auto,4").find("micro_batch needs a fixed chunk count"),
            std::string::npos);
  EXPECT_NE(err("micro_batch=1;batch=8").find("batch and micro_batch are both given"),
            std::string::npos);
  EXPECT_NE(
      err("cluster=ideal8,moon").find("--grid: cluster: unknown cluster \"moon\" (known: ideal8)"),
      std::string::npos);
}

// --- rows -------------------------------------------------------------------------------------

TEST(Sweep, RowsMatchGPipeClosedFormAndMemory) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  SweepInputs in = inputs(hw, kHeavy);
  in.base.chunks = 4;
  in.base.batch = 4;
  const Sweep sweep(Grid::parse("stages=1,2,4,8"), in);
  RunOptions o;
  o.output = dir.file("s.csv");
  ASSERT_TRUE(run_sweep(sweep, o).complete);
  const SweepTable t = load_sweep(o.output);
  ASSERT_EQ(t.rows.size(), 4u);
  for (size_t r = 0; r < 3; ++r) {
    const int K = 1 << r;
    // GPipe: (M + K - 1) x (f + b) per stage of 4/K layers, M = 4, one sample per micro-batch.
    const double stage = 4.0 / K * 3e-3;
    EXPECT_NEAR(std::stod(field(t, r, "iteration_time_s")), (4 + K - 1) * stage, 1e-12) << K;
    EXPECT_EQ(field(t, r, "plan_devices"), std::to_string(K));
    // Parameters and gradients of 4/K layers, and a backward's parameter gradient of one layer
    // before it is added into the gradients (core/memory.hpp).
    EXPECT_DOUBLE_EQ(std::stod(field(t, r, "peak_memory_max_bytes")),
                     (4.0 / K * 512 + 256) * 1024 * 1024);
    EXPECT_EQ(field(t, r, "fits"), K < 4 ? "no" : "yes");
  }
  // One device holds 4 x 512 + 256 MiB: 1.25 GiB over the 1 GiB device.
  EXPECT_EQ(field(t, 0, "oom_device"), "device 0 (test-gpu #0)");
  EXPECT_DOUBLE_EQ(std::stod(field(t, 0, "over_bytes")), 1.25 * kGiB);
  // 8 stages of 4 layers is infeasible: no plan, the planner's reason.
  EXPECT_EQ(field(t, 3, "fits"), "");
  EXPECT_NE(field(t, 3, "error").find("8"), std::string::npos);
}

TEST(Sweep, DtypeAndOptimizerAreKnobs) {
  // bert:large on the shipped dgx-h100 (analytic: no measured profile ships): bfloat16 halves
  // the activations and runs at the tensor-core peak; Adam adds 8 bytes of state per parameter.
  TempDir dir;
  SweepInputs in;
  in.base.model = "bert:large";
  in.base.cluster = "dgx-h100";
  in.base.stages = 2;
  in.base.chunks = 4;
  in.base.batch = 32;
  const Sweep sweep(Grid::parse("dtype=float32,bfloat16;optimizer=sgd,adam"), in);
  RunOptions o;
  o.output = dir.file("s.csv");
  ASSERT_TRUE(run_sweep(sweep, o).complete);
  const SweepTable t = load_sweep(o.output);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(field(t, 0, "dtype"), "float32");
  EXPECT_EQ(field(t, 1, "optimizer"), "adam");
  const auto num = [&](size_t r, const char* c) { return std::stod(field(t, r, c)); };
  // Rows: (float32, sgd), (float32, adam), (bfloat16, sgd), (bfloat16, adam).
  EXPECT_LT(num(2, "iteration_time_s"), num(0, "iteration_time_s") / 4);
  EXPECT_GT(num(1, "peak_memory_max_bytes"), num(0, "peak_memory_max_bytes"));
  EXPECT_LT(num(3, "peak_memory_max_bytes"), num(1, "peak_memory_max_bytes"));
  EXPECT_GT(num(1, "iteration_time_s"), num(0, "iteration_time_s"));  // Adam's longer step
}

// The topology what-ifs set one field of the cluster's topology: swept on the shipped one-NIC
// and peer-to-peer files, each point equals the shipped file that differs in that field alone
// (four NICs; no peer-to-peer), and a value the cluster cannot have is the point's error.
TEST(Sweep, TopologyKnobsSetOneFieldOfTheClusterTopology) {
  TempDir dir;
  // bert:base, 1F1B, M = 4, K stages x dp replicas.
  const auto run = [&](const std::string& file, const std::string& cluster, int K, int dp,
                       const std::string& grid) {
    SweepInputs in;
    in.base.model = "bert:base";
    in.base.cluster = cluster;
    in.base.stages = K;
    in.base.dp = dp;
    in.base.chunks = 4;
    in.base.batch = 16 * dp;
    in.base.schedule = "1f1b";
    RunOptions o;
    o.output = dir.file(file);
    EXPECT_TRUE(run_sweep(Sweep(Grid::parse(grid), in), o).complete);
    return load_sweep(o.output);
  };
  const auto time = [](const SweepTable& t, size_t r) {
    return std::stod(field(t, r, "iteration_time_s"));
  };
  // 2 stages x 8 replicas over two nodes: every stage's all-reduce crosses the nodes.
  const SweepTable nics =
      run("nics.csv", "pipetransformer-2x8-rtx5000-1nic", 2, 8, "nics_per_node=1,4,16");
  const SweepTable four = run("four.csv", "pipetransformer-2x8-rtx5000-4nic", 2, 8, "chunks=4");
  ASSERT_EQ(nics.rows.size(), 3u);
  EXPECT_EQ(field(nics, 1, "nics_per_node"), "4");
  EXPECT_DOUBLE_EQ(time(nics, 1), time(four, 0));
  EXPECT_GT(time(nics, 0), time(nics, 1));  // the stages' all-reduces share one NIC
  EXPECT_NE(field(nics, 2, "error")
                .find("--grid: nics_per_node: 16 NICs per node on "
                      "pipetransformer-2x8-rtx5000-1nic, which has 8 devices"),
            std::string::npos)
      << field(nics, 2, "error");
  // 8 replicas behind two PCIe switches: the ring's copies direct or through host memory.
  const SweepTable p2p = run("p2p.csv", "ftpipe-8x-2080ti-switched-p2p", 1, 8, "p2p=yes,no");
  const SweepTable staged = run("staged.csv", "ftpipe-8x-2080ti-switched-nop2p", 1, 8, "chunks=4");
  EXPECT_EQ(field(p2p, 1, "p2p"), "no");
  EXPECT_DOUBLE_EQ(time(p2p, 1), time(staged, 0));
  EXPECT_GT(time(p2p, 1), time(p2p, 0));
  EXPECT_NE(input_error([] { Grid::parse("p2p=maybe"); }).find("p2p"), std::string::npos);
  EXPECT_NE(input_error([] { Grid::parse("nics_per_node=0"); }).find("nics_per_node"),
            std::string::npos);
}

TEST(Sweep, AutoChunksRecordsTheChosenM) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  const Sweep sweep(Grid::parse("stages=2;chunks=auto,2"), inputs(hw, kModel));
  EXPECT_EQ(sweep.header()[2], "stages");
  EXPECT_EQ(sweep.header()[3], "chunks");
  const CsvRow automatic = sweep.row(0), fixed = sweep.row(1);
  const size_t m = csv_column(sweep.header(), "plan_M", "test");
  EXPECT_EQ(automatic[3], "auto");
  // GPipe over K = 2 is fastest with the most micro-batches that divide 8 within [1, 6K]: 8.
  EXPECT_EQ(automatic[m], "8");
  EXPECT_EQ(fixed[m], "2");
}

// A sweep row reads its numbers off the engine (steady_metrics); they must be what
// `pipetwin simulate` reports for the same plan, to the last bit, for every schedule, with data
// parallelism, costly links and one-step runs.
TEST(Sweep, EngineMetricsEqualTheSimulatorsMetrics) {
  for (const auto& info : schedule_catalog()) {
    for (const auto& [K, M, dp, iterations] : std::vector<std::tuple<int, int, int, int>>{
             {1, 2, 1, 0}, {3, 5, 2, 0}, {4, 3, 1, 1}, {2, 4, 2, 2}}) {
      testing::PlanSpec spec;
      spec.model = "uniform:layers=6,fwd_ms=1/2/1/3/1/1,bwd_ms=2,act_kb=512,param_kb=4096";
      spec.schedule = info.name;
      spec.stages = K;
      spec.chunks = M;
      spec.dp = dp;
      spec.micro_batch = 2;
      spec.cluster = testing::ideal_cluster(16, 5e9, 2e-5, 2);
      const Plan plan = testing::synthetic_plan(spec);
      if (!schedule_refusal(info.name, PlanContext(plan, iterations).shape).empty()) continue;
      const Metrics ref = sim::simulate_plan(PlanContext(plan, iterations)).metrics;
      const Evaluation e = evaluate_plan(plan, iterations, true);
      const std::string where =
          fmt::format("{} K={} M={} dp={} N={}", info.name, K, M, dp, iterations);
      ASSERT_TRUE(e.ok()) << where << ": " << e.error;
      EXPECT_EQ(e.iteration_time_s, ref.iteration_time_s) << where;
      EXPECT_EQ(e.throughput_samples_per_s, ref.throughput_samples_per_s) << where;
      EXPECT_EQ(e.bubble_fraction, ref.bubble_fraction) << where;
      double peak = 0;
      for (const auto& d : ref.devices) peak = std::max(peak, d.peak_memory_bytes);
      EXPECT_EQ(e.peak_memory_max_bytes, peak) << where;
    }
  }
}

// The split-backward and virtual-stage schedules in a sweep: a row is the simulator's result for
// the plan the point makes (v x K stages in the schedule's layout), to the last digit; a point a
// schedule cannot run (1f1b, zb-h1 or zb-h2 with two chunks a device, zbv with M < 2K - 1) is a
// row with the reason.
// alpha makes every point a whole elastic run (sim/elastic_sim.hpp): alpha = 0 is the no-freeze
// baseline itself, the baseline does not depend on alpha, and a row carries exactly what the
// elastic simulator says for the point's configuration.
TEST(Sweep, AlphaRunsTheElasticSimulator) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  const std::string model = "uniform:layers=8,fwd_ms=1,bwd_ms=2,param_kb=1024";
  SweepInputs in = inputs(hw, model);
  in.base.stages = 8;
  in.base.chunks = 8;
  in.base.batch = 8;
  EXPECT_NE(input_error([&] {
              Sweep(Grid::parse("alpha=0,0.5"), in);
            }).find("--grid: alpha needs --samples"),
            std::string::npos);
  in.samples = 256;
  in.epochs = 4;
  const Sweep sweep(Grid::parse("alpha=0,0.5"), in);
  ASSERT_TRUE(sweep.elastic());
  RunOptions o = to(dir.file("alpha.csv"), 2);
  ASSERT_TRUE(run_sweep(sweep, o).complete);
  const SweepTable t = load_sweep(o.output);
  EXPECT_EQ(t.header[2], "alpha");
  EXPECT_EQ(field(t, 0, "alpha"), "0");
  EXPECT_EQ(field(t, 0, "error"), "");
  EXPECT_EQ(field(t, 0, "speedup"), "1");
  EXPECT_EQ(field(t, 0, "elastic_total_s"), field(t, 0, "baseline_total_s"));
  EXPECT_EQ(field(t, 0, "final_frozen"), "0");
  EXPECT_EQ(field(t, 1, "baseline_total_s"), field(t, 0, "baseline_total_s"));
  EXPECT_NE(field(t, 1, "final_frozen"), "0");

  const Catalog catalog = Catalog::load(hw);
  ElasticConfig ec;
  ec.model = model;
  ec.profile = test::synthetic(model);
  ec.cluster = load_cluster("ideal8", catalog);
  ec.stages = 8;
  ec.batch = 8;  // per pipeline: the batch over dp = 1
  ec.epochs = 4;
  ec.samples = 256;
  ec.alpha = 0.5;
  const ElasticReport r = simulate_elastic(ec);
  EXPECT_DOUBLE_EQ(std::stod(field(t, 1, "elastic_total_s")), r.elastic.total_s);
  EXPECT_DOUBLE_EQ(std::stod(field(t, 1, "speedup")), r.speedup);
  EXPECT_EQ(field(t, 1, "final_K"), std::to_string(r.elastic.log.epochs.back().K));
  // Elastic sweeps rank whole runs.
  EXPECT_EQ(best_points(t, 1).rows[0][1], r.speedup > 1 ? "1" : "0");
}

// --- running ----------------------------------------------------------------------------------

const char* kGrid = "stages=1,2,4,8;chunks=1,2,4,8;schedule=gpipe,1f1b,pipedream";

std::string run_to(const Sweep& sweep, const std::string& path, int jobs, int64_t limit = -1) {
  RunOptions o;
  o.output = path;
  o.jobs = jobs;
  o.limit = limit;
  run_sweep(sweep, o);
  return read_text(path);
}

TEST(Sweep, SameBytesWhateverTheThreadCount) {
  TempDir dir;
  const Sweep sweep(Grid::parse(kGrid), inputs(write_catalog(dir), kHeavy));
  const std::string one = run_to(sweep, dir.file("j1.csv"), 1);
  const std::string two = run_to(sweep, dir.file("j2.csv"), 2);
  const std::string four = run_to(sweep, dir.file("j4.csv"), 4);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
  EXPECT_EQ(load_sweep(dir.file("j1.csv")).rows.size(), 48u);
}

TEST(Sweep, ResumeAfterLimitStopOrTornRowGivesTheSameBytes) {
  TempDir dir;
  SweepInputs in = inputs(write_catalog(dir), kHeavy);
  in.iterations = 12;  // slower points, so the interrupt below lands mid-sweep
  const Sweep sweep(Grid::parse(kGrid), in);
  const std::string whole = run_to(sweep, dir.file("whole.csv"), 2);
  // Stopped by a point limit, twice, then finished.
  run_to(sweep, dir.file("limited.csv"), 2, 7);
  EXPECT_EQ(load_sweep(dir.file("limited.csv")).rows.size(), 7u);
  run_to(sweep, dir.file("limited.csv"), 2, 30);
  EXPECT_EQ(run_to(sweep, dir.file("limited.csv"), 2), whole);
  // Stopped by the interrupt flag (what SIGINT sets): every finished point is kept.
  std::atomic<bool> stop{false};
  RunOptions o;
  o.output = dir.file("stopped.csv");
  o.jobs = 2;
  o.stop = &stop;
  int points = 0;
  o.point_done = [&] { stop = stop || ++points >= 5; };  // workers stop within jobs - 1 points
  const RunResult r = run_sweep(sweep, o);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(static_cast<int64_t>(load_sweep(o.output).rows.size()), r.computed);
  const RunResult again = run_sweep(sweep, to(o.output, 1));
  EXPECT_EQ(again.resumed, r.computed);
  EXPECT_EQ(again.computed, 48 - r.computed);
  EXPECT_EQ(read_text(o.output), whole);
  // A crash in the middle of a row: the torn row is cut off and recomputed.
  const size_t cut = whole.find('\n', whole.size() / 2) + 25;
  write_text(dir.file("torn.csv"), whole.substr(0, cut));
  const RunResult repaired = run_sweep(sweep, to(dir.file("torn.csv"), 2));
  EXPECT_TRUE(repaired.repaired);
  EXPECT_EQ(read_text(dir.file("torn.csv")), whole);
}

TEST(Sweep, ResumingAnotherSweepsFileIsAnError) {
  TempDir dir;
  const std::string hw = write_catalog(dir);
  const Sweep a(Grid::parse("stages=1,2;schedule=gpipe,1f1b"), inputs(hw, kModel));
  run_to(a, dir.file("a.csv"), 1, 3);
  const Sweep other_fields(Grid::parse("schedule=gpipe,1f1b;stages=1,2"), inputs(hw, kModel));
  EXPECT_NE(input_error([&] { run_sweep(other_fields, to(dir.file("a.csv"))); })
                .find("a.csv: header does not match this sweep's grid: column 3 is \"stages\", the "
                      "grid makes "
                      "\"schedule\""),
            std::string::npos);
  const Sweep other_values(Grid::parse("stages=1,4;schedule=gpipe,1f1b"), inputs(hw, kModel));
  EXPECT_NE(input_error([&] {
              run_sweep(other_values, to(dir.file("a.csv")));
            }).find("a.csv: line 4: stages is \"2\", point 2 of this sweep has \"4\""),
            std::string::npos);
  SweepInputs bigger = inputs(hw, kModel);
  bigger.base.batch = 16;
  const Sweep other_batch(Grid::parse("stages=1,2;schedule=gpipe,1f1b"), bigger);
  EXPECT_NE(input_error([&] {
              run_sweep(other_batch, to(dir.file("a.csv")));
            }).find("line 2: batch is \"8\", point 0 of this sweep has \"16\""),
            std::string::npos);
}

TEST(Sweep, ShardsMergeIntoTheWholeRun) {
  TempDir dir;
  const Sweep sweep(Grid::parse(kGrid), inputs(write_catalog(dir), kHeavy));
  const std::string whole = run_to(sweep, dir.file("whole.csv"), 2);
  std::vector<std::string> shards;
  for (int i = 0; i < 3; ++i) {
    RunOptions o;
    o.output = dir.file("shard" + std::to_string(i) + ".csv");
    o.shard = i;
    o.shards = 3;
    o.jobs = 1;
    EXPECT_EQ(run_sweep(sweep, o).total, 16);
    shards.push_back(o.output);
  }
  save_sweep(merge_sweeps({shards[2], shards[0], shards[1]}), dir.file("merged.csv"));
  EXPECT_EQ(read_text(dir.file("merged.csv")), whole);
  EXPECT_NE(input_error([&] {
              merge_sweeps({shards[0], shards[2]});
            }).find("sweep merge: 16 of 48 points missing (first: point 1)"),
            std::string::npos);
  EXPECT_EQ(parse_shard("2/3"), std::make_pair(2, 3));
  EXPECT_NE(input_error([&] {
              parse_shard("3/3");
            }).find("--shard: index 3 is out of range 0..2 for 3 shards"),
            std::string::npos);
  EXPECT_NE(input_error([&] { parse_shard("1of3"); }).find("--shard: expected i/n"),
            std::string::npos);
}

// --- results ----------------------------------------------------------------------------------

TEST(Results, BestPointsByThroughputAmongThoseThatFit) {
  SweepTable t;
  t.header = {"point", "points", "stages", "plan_M", "throughput_samples_per_s", "fits", "error"};
  t.rows = {{"0", "5", "1", "1", "5", "yes", ""},
            {"1", "5", "2", "1", "10", "no", ""},
            {"2", "5", "4", "1", "7", "yes", ""},
            {"3", "5", "8", "1", "", "", "too many stages"},
            {"4", "5", "16", "1", "7", "yes", ""}};
  const SweepTable best = best_points(t, 10);
  ASSERT_EQ(best.rows.size(), 3u);
  EXPECT_EQ(best.header.front(), "rank");
  EXPECT_EQ(best.rows[0], (CsvRow{"1", "2", "5", "4", "1", "7", "yes", ""}));
  EXPECT_EQ(best.rows[1][1], "4");  // a tie goes to grid order
  EXPECT_EQ(best.rows[2][1], "0");
  EXPECT_EQ(best_points(t, 1).rows.size(), 1u);
  EXPECT_EQ(varying_inputs(t), std::vector<size_t>{2});
  EXPECT_EQ(best_path("out/SWEEP.csv"), "out/SWEEP.best.csv");
  EXPECT_EQ(best_path("sweep.txt"), "sweep.txt.best.csv");
}

TEST(Csv, QuotedFieldsRoundTripAndTornTailsAreSeen) {
  const CsvRow row = {"plain", "a,b", "say \"hi\"", "two\nlines", ""};
  const std::string text = csv_line({"h1", "h2", "h3", "h4", "h5"}) + csv_line(row);
  const CsvText parsed = parse_csv(text, "t.csv");
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0], row);
  EXPECT_FALSE(parsed.torn_tail);
  EXPECT_EQ(parsed.complete_bytes, text.size());
  const CsvText torn = parse_csv(text + "x,\"y", "t.csv");
  EXPECT_TRUE(torn.torn_tail);
  EXPECT_EQ(torn.rows.size(), 1u);
  EXPECT_EQ(torn.complete_bytes, text.size());
  EXPECT_NE(
      input_error([&] { parse_csv("a,b\"c\n", "t.csv"); }).find("t.csv: line 1: a quote inside"),
      std::string::npos);
}

}  // namespace
}  // namespace pipetwin::sim
