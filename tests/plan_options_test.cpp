// The verbs' options declared once for the CLI and the Python API (sim/option_table.hpp's tables:
// studies/plan_options.hpp, studies/sweep/sweep_options.hpp, sim/simulate_options.hpp,
// sim/elastic_options.hpp): the names both front ends derive from the tables, the values and the
// one-line errors both give, and plan's --schedule auto refusal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "core/cost_model.hpp"
#include "sim/simulate_options.hpp"
#include "studies/plan_options.hpp"
#include "studies/sweep/sweep_options.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

TEST(PlanOptions, KeywordsAreTheLongFlagNames) {
  EXPECT_EQ(plan_option_spec(PlanOption::kStages).keyword(), "stages");
  EXPECT_EQ(plan_option_spec(PlanOption::kChunks).keyword(), "chunks");
  EXPECT_EQ(plan_option_spec(PlanOption::kCheckpointMode).keyword(), "checkpoint_mode");
  EXPECT_EQ(plan_option_spec(PlanOption::kVirtualStages).keyword(), "virtual_stages");
  // One entry per option, in --help's order, no keyword twice.
  const auto all = all_plan_options();
  ASSERT_EQ(all.size(), plan_option_specs().size());
  std::set<std::string> keywords;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(all[i]), i);
    EXPECT_TRUE(keywords.insert(plan_option_specs()[i].keyword()).second);
  }
  EXPECT_EQ(plan_option_spec(PlanOption::kVirtualStages).kind, OptionKind::kCountOrAuto);
  EXPECT_EQ(plan_option_spec(PlanOption::kProfile).kind, OptionKind::kPath);
}

template <class Values>
std::vector<std::string> keywords(const std::vector<OptionSpec<Values>>& specs) {
  std::vector<std::string> out;
  for (const auto& spec : specs) out.push_back(spec.keyword());
  return out;
}

// The Python API's keywords are these names (python/pipetwin's documentation lists them).
TEST(OptionTables, KeywordsOfTheVerbs) {
  EXPECT_THAT(keywords(sweep_option_specs()),
              ElementsAre("grid", "micro_batch", "alpha", "samples", "epochs", "jobs", "shard",
                          "limit", "top", "output"));
  EXPECT_THAT(keywords(simulate_option_specs()),
              ElementsAre("plan", "iterations", "schedule_file", "timeline", "metrics",
                          "max_actions", "framework"));
  const auto elastic = keywords(elastic_option_specs());
  EXPECT_EQ(elastic.size(), 28u);
  EXPECT_EQ(std::set<std::string>(elastic.begin(), elastic.end()).size(), elastic.size());
  EXPECT_EQ(elastic[12], "checkpoint_mode");  // --checkpoint-mode, into ElasticOptions::checkpoint
  EXPECT_EQ(elastic[18], "cache_memory");     // GiB
  EXPECT_EQ(elastic[26], "freeze_trace_out");
  // Only --profile means something without --elastic (it reprices a plan).
  for (const auto& spec : elastic_option_specs())
    EXPECT_EQ(needs_elastic(spec), spec.keyword() != "profile") << spec.names;
  EXPECT_EQ(sweep_option_spec(SweepOption::kOutput).kind, OptionKind::kPath);
  EXPECT_TRUE(sweep_option_spec(SweepOption::kTop).show_default);
}

TEST(PlanOptions, ValuesAndTheirErrors) {
  PlanOptions o;
  EXPECT_EQ(o.chunk_count(), 0);  // auto
  o.chunks = "12";
  EXPECT_EQ(o.chunk_count(), 12);
  o.chunks = "0";
  EXPECT_EQ(test::input_error([&] { o.chunk_count(); }), "--chunks must be positive (0 < 1)");
  o.virtual_stages = "2x";
  EXPECT_EQ(test::input_error([&] { o.virtual_stage_count(); }),
            "--virtual-stages: expected a positive integer or auto, got \"2x\"");
  EXPECT_EQ(o.checkpoint_kind(), Checkpoint::kNone);
  o.checkpoint = true;
  EXPECT_EQ(o.checkpoint_kind(), Checkpoint::kExceptLast);
  o.checkpoint_mode = "always";  // the mode wins over --checkpoint
  EXPECT_EQ(o.checkpoint_kind(), Checkpoint::kAlways);
  o.checkpoint_mode = "sometimes";
  EXPECT_EQ(test::input_error([&] { o.checkpoint_kind(); }),
            "--checkpoint-mode: expected none, except_last or always, got \"sometimes\"");
  o.checkpoint_mode.clear();
  o.dtype = "float8";
  EXPECT_THAT(test::input_error([&] { o.check_precision(); }), StartsWith("--dtype"));
}

TEST(PlanOptions, PointConfigCarriesTheValues) {
  PlanOptions o;
  o.model = "vit:tiny";
  o.stages = 4;
  o.chunks = "8";
  o.virtual_stages = "2";
  o.schedule = "interleaved-1f1b";
  o.dp = 2;
  o.checkpoint_mode = "except_last";
  o.dtype = "bfloat16";
  const PointConfig c = o.point_config(/*micro_batch=*/4, /*alpha=*/0.25);
  EXPECT_EQ(c.model, "vit:tiny");
  EXPECT_EQ(c.stages, 4);
  EXPECT_EQ(c.chunks, 8);
  EXPECT_EQ(c.virtual_stages, 2);
  EXPECT_EQ(c.schedule, "interleaved-1f1b");
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.checkpoint, Checkpoint::kExceptLast);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.micro_batch, 4);
  EXPECT_EQ(c.alpha, 0.25);
  EXPECT_EQ(c.resolved_batch(), 4 * 8 * 2);
}

TEST(PlanOptions, ScheduleAutoRefusesWithTheLeanestCandidate) {
  PlanOptions o;
  o.schedule_auto = true;
  o.model = "uniform:layers=8,param_kb=33554432";  // 32 GiB of weights a layer
  o.cluster = "dgx-h100";
  o.stages = 4;
  o.batch = 8;
  o.chunks = "8";
  EXPECT_EQ(test::input_error([&] { plan_with_options(o, {"1f1b"}, false); }),
            "--schedules 1f1b needs --schedule auto (--schedule gpipe given)");
  o.schedule = "auto";
  int searched = 0;
  const std::string error = test::input_error([&] {
    plan_with_options(o, {"1f1b", "zbv"}, false, [&](const ScheduleSearch& s, const PlanRequest&) {
      searched = static_cast<int>(s.trials.size());
    });
  });
  EXPECT_EQ(searched, 2);  // the search is seen before the refusal
  EXPECT_THAT(error,
              StartsWith("--schedule auto: no schedule fits (tried 1f1b, zbv); the leanest"));
  // A plan that fits: the search's rows come back with the plan.
  o.model = "uniform:layers=8";
  const PlannedRequest planned = plan_with_options(o, {"1f1b", "zbv"}, false);
  EXPECT_EQ(planned.trials.size(), 2u);
  EXPECT_TRUE(planned.plan.schedule == "1f1b" || planned.plan.schedule == "zbv");
}

TEST(SweepOptions, RequiredFlagsFirstThenThePlanOptions) {
  SweepOptions s;
  EXPECT_THAT(test::input_error([&] { s.inputs(); }), StartsWith("--grid is required"));
  s.grid = "stages=1,2";
  EXPECT_EQ(test::input_error([&] { s.inputs(); }), "-o/--output is required (the sweep CSV)");
  s.output = "sweep.csv";
  s.jobs = -1;
  EXPECT_EQ(test::input_error([&] { s.inputs(); }), "--jobs must not be negative (-1 given)");
  s.jobs = 2;
  s.plan.model = "vit:tiny";
  s.plan.iterations = 3;
  s.epochs = 2;
  const SweepInputs in = s.inputs();
  EXPECT_EQ(in.base.model, "vit:tiny");
  EXPECT_EQ(in.iterations, 3);
  EXPECT_EQ(in.epochs, 2);
  s.shard = "1/3";
  s.limit = 5;
  const RunOptions r = s.run_options();
  EXPECT_EQ(r.shard, 1);
  EXPECT_EQ(r.shards, 3);
  EXPECT_EQ(r.limit, 5);
  EXPECT_EQ(r.jobs, 2);
  EXPECT_EQ(r.output, "sweep.csv");
}

TEST(ElasticOptions, ConfigFollowsTheFlags) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  Cluster cluster = load_cluster("pipetransformer-2x8-rtx5000", catalog);
  const Profile profile = test::synthetic("uniform:layers=12,fwd_ms=1,bwd_ms=2");
  ElasticOptions a;
  EXPECT_EQ(test::input_error([&] { a.config(cluster, profile, catalog); }),
            "--batch must be positive (0 given)");
  a.batch = 32;
  a.checkpoint = "sometimes";
  EXPECT_THAT(test::input_error([&] { a.config(cluster, profile, catalog); }),
              StartsWith("--checkpoint-mode: expected none, except_last or always"));
  a.checkpoint = "always";
  a.no_autopipe = true;  // AutoDP rides on AutoPipe
  a.cache_memory_gib = 2;
  a.host_gbps = 10;
  a.transition_scale = 2;
  const ElasticConfig c = a.config(cluster, profile, catalog);
  EXPECT_EQ(c.model, profile.model);  // no --model: the profile's
  EXPECT_EQ(c.batch, 32);
  EXPECT_EQ(c.checkpoint, Checkpoint::kAlways);
  EXPECT_FALSE(c.autopipe);
  EXPECT_FALSE(c.autodp);
  EXPECT_TRUE(c.autocache);
  EXPECT_EQ(c.cache.memory_budget_bytes, 2 * kGiB);
  EXPECT_EQ(c.cache_costs.host_bandwidth, 10e9);
  EXPECT_EQ(c.overheads.start_s(4), 2 * elastic::TransitionOverheads::table4().start_s(4));
}

}  // namespace
}  // namespace pipetwin::sim
