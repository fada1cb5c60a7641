// The planner (sim/planner.hpp): automatic chunk count, memory refusal, compute scale, the request
// resolved once and the plan fields it fixes (base_plan).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "profiles/synthetic.hpp"
#include "sim/planner.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using ::testing::HasSubstr;

PlanRequest request(const std::string& model, int K, int batch) {
  PlanRequest r;
  r.model = model;
  r.profile = synthetic_profile(ModelSpec::parse(model, "test"));
  r.cluster = pipetwin::testing::ideal_cluster(16);
  r.stages = K;
  r.batch_size = batch;
  return r;
}

TEST(Planner, AutoChunksMinimisesTheGPipeClosedForm) {
  // One layer per stage with a per-call overhead o: a micro-batch of B/M samples takes
  // 2o + (f + b) B / M on a stage, and a mini-batch (M + K - 1) times that.
  const int K = 4, B = 48;
  const double o = 0.5, f = 0.25, b = 0.5;
  PlanRequest r = request(
      fmt::format("uniform:layers={},fwd_ms={},bwd_ms={},overhead_ms={}", K, f, b, o), K, B);
  const Plan plan = make_plan(r);
  int best = 0;
  double best_t = 1e30;
  for (int M = 1; M <= 6 * K; ++M) {
    if (B % M) continue;
    const double t = (M + K - 1) * (2 * o + (f + b) * B / M);
    if (t < best_t) {
      best_t = t;
      best = M;
    }
  }
  EXPECT_EQ(plan.chunks, best);
  EXPECT_EQ(plan.num_stages(), K);
}

TEST(Planner, RefusesAPlanThatDoesNotFitNamingTheDevice) {
  PlanRequest r = request("uniform:layers=4,act_kb=1024,saved_kb=4096,param_kb=1024", 2, 64);
  r.chunks = 4;
  // Per stage: 4 MiB of weights and gradients, and per micro-batch of 16 samples a 16 MiB input
  // and 128 MiB of saved activations: 580 MiB for GPipe, 196 MiB with checkpointing; on device 0
  // besides, a backward's working memory (16 MiB output and input gradients and 1 MiB of parameter
  // gradients, core/memory.hpp) and up to M - 1 = 3 output gradients of 16 MiB received ahead:
  // 661 MiB and 277 MiB.
  r.cluster.device.memory_bytes = 320.0 * 1024 * 1024;
  try {
    make_plan(r);
    FAIL() << "should not fit";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan does not fit: device 0 (ideal-device #0) needs"));
    EXPECT_THAT(e.what(), HasSubstr("GiB"));
  }
  r.allow_oom = true;
  EXPECT_NO_THROW(make_plan(r));
  r.allow_oom = false;
  r.checkpoint = Checkpoint::kExceptLast;  // checkpointing makes it fit
  EXPECT_NO_THROW(make_plan(r));
}

// Stream sets of one GPU (sim/memory_pools.hpp) share its one memory: the plan above (661 MiB on
// device 0, 1.24 GiB on both devices together) fits a 1.5 GiB GPU that hosts both stages, and is
// refused, naming both devices, on a 1 GiB one, where each device alone would fit.
TEST(Planner, StreamSetsOfOneGpuShareItsMemory) {
  PlanRequest r = request("uniform:layers=4,act_kb=1024,saved_kb=4096,param_kb=1024", 2, 64);
  r.chunks = 4;
  r.cluster = pipetwin::testing::ideal_cluster(4);
  r.cluster.device.core_sharing = 4;
  r.cluster.device.shares_memory = true;
  r.cluster.device.memory_bytes = 1.5 * 1024 * 1024 * 1024;
  const Plan plan = make_plan(r);
  r.cluster.device.memory_bytes = 1.0 * 1024 * 1024 * 1024;
  try {
    make_plan(r);
    FAIL() << "the two stages' peaks together exceed the GPU";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("plan does not fit: devices 0, 1 (ideal-device #0, #1, one memory)"));
  }
  // Each device alone would fit 1.0 GiB: without the shared memory, the plan is accepted.
  r.cluster.device.shares_memory = false;
  EXPECT_NO_THROW(make_plan(r));
  EXPECT_EQ(plan.num_stages(), 2);
}

TEST(Planner, ComputeScaleFromPeakFlops) {
  Catalog catalog = Catalog::load(std::string(PIPETWIN_SOURCE_DIR) + "/hardware");
  Profile p = synthetic_profile(ModelSpec::parse("uniform:layers=2", "t"));
  p.device = "cpu-core";
  const Cluster h100 = load_cluster("dgx-h100", catalog);
  const double scale = resolve_compute_scale(p, h100, &catalog);
  EXPECT_DOUBLE_EQ(scale,
                   catalog.device("cpu-core", "t").flops("float32") / h100.device.flops("float32"));
  Cluster same = h100;
  p.device = "h100-sxm";
  EXPECT_DOUBLE_EQ(resolve_compute_scale(p, same, &catalog), 1.0);
  same.relative_speed = 4;
  EXPECT_DOUBLE_EQ(resolve_compute_scale(p, same, &catalog), 0.25);
}

TEST(Planner, BadRequestsAreInputErrors) {
  PlanRequest r = request("uniform:layers=4", 2, 10);
  r.dp = 3;
  EXPECT_THROW(make_plan(r), InputError);
  r.dp = 1;
  r.chunks = 3;
  EXPECT_THROW(make_plan(r), InputError);
  r.chunks = 2;
  r.stages = 5;  // more stages than layers
  EXPECT_THROW(make_plan(r), InputError);
}

TEST(Planner, ResolveRequestReadsVirtualStagesLayoutAndErrorsOnce) {
  PlanRequest r = request("uniform:layers=16", 4, 16);
  r.schedule = "zbv";  // v = 2 by default, in a V
  const ResolvedRequest q = resolve_request(r);
  EXPECT_EQ(q.error, "");
  EXPECT_EQ(q.v, 2);
  EXPECT_EQ(q.num_stages(), 8);
  EXPECT_THAT(q.stage_device, ::testing::ElementsAre(0, 1, 2, 3, 3, 2, 1, 0));
  // zbv needs M >= 2D - 1 = 7; the refusal is asked per M of the one resolved request.
  EXPECT_EQ(q.refusal(6),
            "schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices (M = 6)");
  EXPECT_EQ(q.refusal(8), "");
  EXPECT_EQ(request_refusal(r, 6), q.refusal(6));
  r.schedule = "gpipe";
  const ResolvedRequest one = resolve_request(r);
  EXPECT_EQ(one.v, 1);
  EXPECT_THAT(one.stage_device, ::testing::ElementsAre(0, 1, 2, 3));
  // The first thing wrong, as make_plan() throws it; a fixed M is checked up front too.
  r.virtual_stages = 2;
  EXPECT_THAT(resolve_request(r).error, HasSubstr("schedule gpipe runs one stage per device"));
  EXPECT_THROW(request_refusal(r, 4), InputError);  // no layout to ask the schedule about
  EXPECT_EQ(test::input_error([&] { make_plan(r); }), resolve_request(r).error);
  r.virtual_stages = 0;
  r.chunks = 3;
  EXPECT_EQ(resolve_request(r).error, "--batch 16 is not divisible by dp x chunks = 1 x 3");
  r.stages = 0;
  EXPECT_EQ(resolve_request(r).error, "--stages must be positive (0 given)");
}

TEST(Planner, BasePlanFillsWhatTheRequestFixes) {
  PlanRequest r = request("uniform:layers=4", 2, 16);
  r.model = "";  // the profile's name
  r.schedule = "1f1b";
  r.partitioner = "optimal";
  r.dp = 2;
  r.checkpoint = Checkpoint::kAlways;
  r.frozen_layers = 1;
  r.iterations = 5;
  r.cluster.relative_speed = 2;  // resolve_compute_scale: 1 / 2
  Plan p = base_plan(r);
  EXPECT_EQ(p.model, r.profile.model);
  EXPECT_EQ(p.schedule, "1f1b");
  EXPECT_EQ(p.partitioner, "optimal");
  EXPECT_EQ(p.batch_size, 16);
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.checkpoint, Checkpoint::kAlways);
  EXPECT_EQ(p.frozen_layers, 1);
  EXPECT_EQ(p.iterations, 5);
  EXPECT_DOUBLE_EQ(p.compute_scale, 0.5);
  EXPECT_TRUE(p.stages.empty());
  EXPECT_EQ(p.chunks, 1);
  r.model = "mine";
  r.compute_scale = 3;  // given (the elastic simulator's): not resolved again
  p = base_plan(r);
  EXPECT_EQ(p.model, "mine");
  EXPECT_DOUBLE_EQ(p.compute_scale, 3);
  // make_plan starts from it: the planned plan keeps its fields.
  r.chunks = 2;
  r.dp = 1;
  const Plan planned = make_plan(r);
  EXPECT_DOUBLE_EQ(planned.compute_scale, 3);
  EXPECT_EQ(planned.model, "mine");
  EXPECT_EQ(planned.checkpoint, Checkpoint::kAlways);
}

}  // namespace
}  // namespace pipetwin::sim
