// core/plan.hpp: the "pipetwin.plan" v1 format, its validation errors (each naming the file and
// the field), and what PlanContext derives from a plan.
#include "core/plan.hpp"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::StartsWith;

constexpr double kKiB = 1024;
constexpr double kMs = 1e-3;

// Four layers (1 ms forward and 2 ms backward per sample, 4 KiB activations, 16 KiB
// parameters) in two stages on a 4-device node; batch 16 in 4 chunks: micro-batches of 4.
Plan valid_plan() {
  Plan p;
  p.model = "uniform:layers=4,fwd_ms=1,bwd_ms=2,act_kb=4,param_kb=16";
  p.profile = test::synthetic(p.model);
  p.cluster = test::two_level_cluster(1, 4, 1e10, 1e-6, 1e10, 1e-6);
  p.schedule = "gpipe";
  p.partitioner = "uniform";
  p.batch_size = 16;
  p.chunks = 4;
  p.stages = {{{0, 1}, 0}, {{2, 3}, 1}};
  return p;
}

// The plan as JSON without the (optional, derived) micro_batch_size, ready to be broken.
Json valid_doc() {
  Json doc = plan_to_json(valid_plan());
  doc.erase("micro_batch_size");
  return doc;
}

std::string error_of(const Json& doc) {
  return input_error([&] { plan_from_json(JsonView(doc, "p.json")); });
}

TEST(Plan, JsonRoundTripKeepsEveryField) {
  Plan p = valid_plan();
  p.schedule = "1f1b";
  p.partitioner = "balance-time";
  p.dp = 2;
  p.batch_size = 24;
  p.chunks = 3;
  p.checkpoint = Checkpoint::kExceptLast;
  p.stages = {{{0}, 0}, {{1, 2, 3}, 1}};
  p.placement = {3, 1, 0, 2};
  p.iterations = 7;
  p.compute_scale = 1.5;
  p.bucket_cap_bytes = 8 * kMiB;
  p.first_bucket_bytes = 0.5 * kMiB;
  p.frozen_layers = 1;
  p.lambda_frozen = 0.25;
  p.cache = true;
  test::TempDir dir;
  const std::string path = dir.file("plan.json");
  save_plan(p, path);
  const Plan b = load_plan(path);
  EXPECT_EQ(b.model, p.model);
  EXPECT_EQ(b.schedule, "1f1b");
  EXPECT_EQ(b.partitioner, "balance-time");
  EXPECT_EQ(b.batch_size, 24);
  EXPECT_EQ(b.chunks, 3);
  EXPECT_EQ(b.dp, 2);
  EXPECT_EQ(b.micro_batch_size(), 4);
  EXPECT_EQ(b.checkpoint, Checkpoint::kExceptLast);
  ASSERT_EQ(b.num_stages(), 2);
  EXPECT_THAT(b.stages[0].layers, ElementsAre(0));
  EXPECT_THAT(b.stages[1].layers, ElementsAre(1, 2, 3));
  EXPECT_EQ(b.stages[1].device, 1);
  EXPECT_EQ(b.placement, p.placement);
  EXPECT_EQ(b.iterations, 7);
  EXPECT_EQ(b.compute_scale, 1.5);
  EXPECT_EQ(b.bucket_cap_bytes, 8 * kMiB);
  EXPECT_EQ(b.first_bucket_bytes, 0.5 * kMiB);
  EXPECT_EQ(b.frozen_layers, 1);
  EXPECT_EQ(b.lambda_frozen, 0.25);
  EXPECT_TRUE(b.cache);
  // The plan carries its cluster and profile: nothing else is needed to use it.
  EXPECT_EQ(b.cluster.name, p.cluster.name);
  EXPECT_EQ(b.cluster.num_devices(), 4);
  EXPECT_EQ(b.cluster.intra_node.bandwidth, 1e10);
  EXPECT_EQ(b.cluster.device.memory_bytes, p.cluster.device.memory_bytes);
  ASSERT_EQ(b.profile.num_layers(), 4);
  EXPECT_EQ(b.profile.layers[3].param_bytes, 16 * kKiB);
  EXPECT_EQ(b.profile.layers[2].timings.size(), p.profile.layers[2].timings.size());
  EXPECT_EQ(b.profile.layers[2].timings[1].backward_s, p.profile.layers[2].timings[1].backward_s);
  // Written again, the same bytes.
  const std::string first = test::read_text(path);
  save_plan(b, path);
  EXPECT_EQ(test::read_text(path), first);
}

TEST(Plan, DefaultsOfOptionalFields) {
  Json doc = valid_doc();
  for (const char* key : {"partitioner", "dp", "checkpoint", "placement", "iterations",
                          "compute_scale", "ddp", "frozen_layers", "lambda_frozen", "cache"}) {
    doc.erase(key);
  }
  const Plan p = plan_from_json(JsonView(doc, "p.json"));
  EXPECT_EQ(p.partitioner, "manual");
  EXPECT_EQ(p.dp, 1);
  EXPECT_EQ(p.checkpoint, Checkpoint::kNone);
  EXPECT_TRUE(p.placement.empty());
  EXPECT_EQ(p.iterations, 0);
  EXPECT_EQ(p.compute_scale, 1);
  EXPECT_EQ(p.bucket_cap_bytes, 25 * kMiB);  // PyTorch DDP's defaults
  EXPECT_EQ(p.first_bucket_bytes, 1 * kMiB);
  EXPECT_EQ(p.frozen_layers, 0);
  EXPECT_NEAR(p.lambda_frozen, 1.0 / 6, 1e-15);  // PipeTransformer's ratio
  EXPECT_FALSE(p.cache);
}

TEST(PlanErrors, BatchNotDivisibleByDpTimesChunks) {
  Json doc = valid_doc();
  doc["batch_size"] = 10;
  EXPECT_EQ(error_of(doc), "p.json: batch_size: 10 is not divisible by dp x chunks = 1 x 4");
  doc["batch_size"] = 12;
  doc["dp"] = 2;
  EXPECT_EQ(error_of(doc), "p.json: batch_size: 12 is not divisible by dp x chunks = 2 x 4");
  doc = valid_doc();
  doc["chunks"] = 0;
  EXPECT_EQ(error_of(doc), "p.json: chunks: must be positive (0 given)");
  doc = valid_doc();
  doc["micro_batch_size"] = 3;
  EXPECT_EQ(error_of(doc),
            "p.json: micro_batch_size: 3 disagrees with batch_size / (dp x chunks) = 4");
}

TEST(PlanErrors, LayersInTwoStagesOrInNone) {
  Json doc = valid_doc();
  doc["stages"][1]["layers"] = {1, 2, 3};
  EXPECT_EQ(error_of(doc), "p.json: stages[1].layers: layer 1 already in stage 0");
  doc["stages"][1]["layers"] = {2};
  EXPECT_EQ(error_of(doc), "p.json: stages: layer 3 (\"layer3\") is in no stage");
  doc["stages"][1]["layers"] = {2, 3, 4};
  EXPECT_EQ(error_of(doc), "p.json: stages[1].layers: layer 4 out of range 0..3");
  doc["stages"][1]["layers"] = Json::array();
  EXPECT_EQ(error_of(doc), "p.json: stages[1].layers: a stage needs at least one layer");
  doc["stages"] = Json::array();
  EXPECT_EQ(error_of(doc), "p.json: stages: a plan needs at least one stage");
}

TEST(PlanErrors, DevicesAndPlacement) {
  Json doc = valid_doc();
  doc["dp"] = 4;  // 4 replicas x 2 devices on a 4-device cluster
  EXPECT_EQ(
      error_of(doc),
      "p.json: dp: the plan needs 8 devices (4 replicas x 2), cluster \"test-cluster\" has 4");
  doc = valid_doc();
  doc["stages"][1]["device"] = -1;
  EXPECT_EQ(error_of(doc), "p.json: stages[1].device: must not be negative");
  doc = valid_doc();
  doc["placement"] = {0};
  EXPECT_EQ(error_of(doc), "p.json: placement: 1 entries for dp x devices = 2");
  doc["placement"] = {0, 9};
  EXPECT_EQ(error_of(doc), "p.json: placement: device 9 not in cluster \"test-cluster\" (0..3)");
  doc["placement"] = {1, 1};
  EXPECT_EQ(error_of(doc), "p.json: placement: device 1 used twice");
  doc["placement"] = {3, 2};
  EXPECT_NO_THROW(plan_from_json(JsonView(doc, "p.json")));
}

TEST(PlanErrors, ScheduleCheckpointAndOtherFields) {
  Json doc = valid_doc();
  doc["schedule"] = "zigzag";
  EXPECT_THAT(error_of(doc), StartsWith("p.json: schedule: unknown schedule \"zigzag\" (known: "));
  doc = valid_doc();
  doc["checkpoint"] = "sometimes";
  EXPECT_EQ(error_of(doc),
            "p.json: checkpoint: expected none, except_last or always, got \"sometimes\"");
  doc = valid_doc();
  doc["frozen_layers"] = 9;
  EXPECT_EQ(error_of(doc), "p.json: frozen_layers: must be in 0..4 (9 given)");
  doc = valid_doc();
  doc["iterations"] = -1;
  EXPECT_EQ(error_of(doc), "p.json: iterations: must not be negative");
  doc = valid_doc();
  doc["compute_scale"] = 0;
  EXPECT_EQ(error_of(doc), "p.json: compute_scale: expected a positive number, got 0");
  doc = valid_doc();
  doc["ddp"]["bucket_mb"] = 25;
  EXPECT_THAT(error_of(doc), StartsWith("p.json: ddp.bucket_mb: unknown field"));
  doc = valid_doc();
  doc["colour"] = "blue";
  EXPECT_THAT(error_of(doc), StartsWith("p.json: colour: unknown field (known: format, "));
  doc = valid_doc();
  doc["version"] = 2;
  EXPECT_EQ(error_of(doc), "p.json: version: unsupported version 2 (this pipetwin reads 1..1)");
}

TEST(PlanErrors, NestedDocumentsKeepTheirPath) {
  Json doc = valid_doc();
  doc["profile"]["layers"][2]["param_bytes"] = -1;
  EXPECT_EQ(error_of(doc),
            "p.json: profile.layers[2].param_bytes: expected a non-negative number, got -1");
  doc = valid_doc();
  doc["cluster"]["devices_per_node"] = 0;
  EXPECT_EQ(error_of(doc), "p.json: cluster.devices_per_node: must be at least 1 (0 given)");
}

TEST(PlanErrors, IntegersBeyondIntAreRejected) {
  Json doc = valid_doc();
  doc["batch_size"] = 4294967312LL;
  EXPECT_THAT(error_of(doc), StartsWith("p.json: batch_size: "));
}

TEST(PlanValidate, ErrorsArePrefixedByOrigin) {
  Plan p = valid_plan();
  p.batch_size = 6;
  EXPECT_EQ(input_error([&] { p.validate("plan.json"); }),
            "plan.json: batch_size: 6 is not divisible by dp x chunks = 1 x 4");
}

TEST(PlanValidate, UnknownScheduleNamesOriginAndField) {
  Plan p = valid_plan();
  p.schedule = "zigzag";
  EXPECT_THAT(input_error([&] { p.validate("plan.json"); }),
              StartsWith("plan.json: schedule: unknown schedule \"zigzag\""));
}

TEST(Plan, DevicesPerReplicaAndMicroBatchSize) {
  Plan p = valid_plan();
  EXPECT_EQ(p.devices_per_replica(), 2);
  p.stages[1].device = 2;  // device 1 unused: the replica still spans devices 0..2
  EXPECT_EQ(p.devices_per_replica(), 3);
  p.dp = 2;
  p.chunks = 2;
  EXPECT_EQ(p.micro_batch_size(), 4);  // 16 / (2 x 2)
}

TEST(PlanContext, DerivesShapeAndStageCosts) {
  const PlanContext ctx(valid_plan(), 5);
  EXPECT_EQ(ctx.shape.num_stages, 2);
  EXPECT_THAT(ctx.shape.stage_device, ElementsAre(0, 1));
  EXPECT_EQ(ctx.shape.devices_per_replica, 2);
  EXPECT_EQ(ctx.shape.replicas, 1);
  EXPECT_EQ(ctx.shape.micro_batches, 4);
  EXPECT_EQ(ctx.shape.iterations, 5);
  EXPECT_THAT(ctx.placement, ElementsAre(0, 1));
  ASSERT_EQ(ctx.stages.size(), 2u);
  // Micro-batches of 4 samples; two layers per stage.
  for (const auto& s : ctx.stages) {
    EXPECT_NEAR(s.forward_s, 2 * 1 * 4 * kMs, 1e-15);
    EXPECT_NEAR(s.backward_s, 2 * 2 * 4 * kMs, 1e-15);
    EXPECT_EQ(s.param_bytes, 32 * kKiB);
    EXPECT_EQ(s.input_bytes, 4 * kKiB * 4);  // model input / layer 1's output, 4 KiB a sample
  }
  EXPECT_THAT(ctx.stages[1].layers, ElementsAre(2, 3));
  // One stage edge carrying layer 1's output.
  ASSERT_EQ(ctx.shape.edges.size(), 1u);
  EXPECT_EQ(ctx.shape.edges[0].from, 0);
  EXPECT_EQ(ctx.shape.edges[0].to, 1);
  EXPECT_EQ(ctx.shape.edges[0].bytes_per_sample, 4 * kKiB);
  // 32 KiB of gradients per stage fit DDP's first 1 MiB bucket.
  ASSERT_EQ(ctx.shape.buckets.size(), 2u);
  ASSERT_EQ(ctx.shape.buckets[0].size(), 1u);
  EXPECT_EQ(ctx.shape.buckets[0][0].bytes, 32 * kKiB);
}

TEST(PlanContext, IterationsFromArgumentPlanOrSchedule) {
  Plan p = valid_plan();
  p.iterations = 7;
  EXPECT_EQ(PlanContext(p, 0).shape.iterations, 7);
  EXPECT_EQ(PlanContext(p, 2).shape.iterations, 2);
  p.iterations = 0;
  EXPECT_EQ(PlanContext(p, 0).shape.iterations, schedule_default_iterations("gpipe", 2));
  // The default leaves a steady window for the metrics: two step ends for synchronous
  // schedules, and K fill + K drain steps plus two more for asynchronous ones.
  EXPECT_GE(schedule_default_iterations("gpipe", 4), 2);
  for (const char* s : {"pipedream", "ddg", "feature-replay", "ftpipe-async"}) {
    for (int k : {1, 2, 4, 8}) EXPECT_GE(schedule_default_iterations(s, k), 2 * k + 2) << s;
  }
}

TEST(PlanContext, DataParallelPlacementAndOptions) {
  Plan p = valid_plan();
  p.dp = 2;
  p.compute_scale = 2;
  p.frozen_layers = 1;
  const PlanContext ctx(p, 1);
  EXPECT_EQ(ctx.shape.replicas, 2);
  EXPECT_THAT(ctx.placement, ElementsAre(0, 1, 2, 3));
  // Micro-batch 16 / (2 x 4) = 2; compute scale 2; layer 0 frozen has no backward.
  EXPECT_NEAR(ctx.stages[0].forward_s, 2 * (2 * 1 * 2) * kMs, 1e-15);
  EXPECT_NEAR(ctx.stages[0].backward_s, 2 * (1 * 2 * 2) * kMs, 1e-15);
  p.placement = {3, 2, 1, 0};
  EXPECT_THAT(PlanContext(p, 1).placement, ElementsAre(3, 2, 1, 0));
}

TEST(PlanContext, StageLayersAreSortedAndEdgesMustRunForward) {
  Plan p = valid_plan();
  p.stages = {{{1, 0}, 0}, {{3, 2}, 1}};
  EXPECT_THAT(PlanContext(p, 1).stages[0].layers, ElementsAre(0, 1));
  p.stages = {{{0, 2}, 0}, {{1, 3}, 1}};  // layer 1 (stage 1) feeds layer 2 (stage 0)
  EXPECT_EQ(input_error([&] { PlanContext(p, 1); }),
            "partition: edge from layer 1 (stage 1) to layer 2 (stage 0) runs backwards; stages "
            "must follow the model's data flow");
}

}  // namespace
}  // namespace pipetwin
