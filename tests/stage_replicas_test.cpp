// Stages replicated unevenly within a pipeline (PipelineShape::stage_replicas; PipeDream's hybrid
// plans, SOSP'19 Section 3.1, with its round-robin of micro-batches over a stage's replicas,
// Section 3.3): the schedule IR deals micro-batches j to replica j mod r, the replicas of a stage
// all-reduce among themselves before every step, the simulator times a "3-1" plan as the closed
// form of its round-robin says, and the plan file carries the replica counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.hpp"
#include "profiles/model_spec.hpp"
#include "core/plan.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/synthetic.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// 4 layers of forward f = 1 ms and backward 2 ms: stage 0 holds three of them on three devices
// (replicas 3), stage 1 the last on the fourth device — PipeDream's "3-1" on 4 workers.
Plan three_one_plan(const std::string& schedule, int M) {
  testing::PlanSpec spec;
  spec.model = testing::uniform(4, 1, 2);
  spec.schedule = schedule;
  spec.stages = 2;
  spec.chunks = M;
  spec.cluster = testing::ideal_cluster(4);
  Plan p = testing::synthetic_plan(spec);
  p.stages = {{{0, 1, 2}, 0, 3}, {{3}, 3, 1}};
  p.validate("test");
  return p;
}

PipelineShape three_one_shape(int M, int iterations = 2) {
  PipelineShape sh;
  sh.num_stages = 2;
  sh.stage_device = {0, 3};
  sh.stage_replicas = {3, 1};
  sh.micro_batches = M;
  sh.iterations = iterations;
  return sh;
}

// The micro-batches each device runs forwards of.
std::map<int, std::set<int>> forwards_by_device(const Schedule& s) {
  std::map<int, std::set<int>> out;
  for (int d = 0; d < s.num_devices(); ++d) {
    for (const auto& a : s.devices[static_cast<size_t>(d)]) {
      if (a.op == Op::kForward) out[d].insert(a.micro_batch);
    }
  }
  return out;
}

class StageReplicas : public ::testing::TestWithParam<std::string> {};

TEST_P(StageReplicas, EachReplicaTakesEveryThirdMicroBatch) {
  const int M = 6, N = 2;
  const CompiledSchedule cs(make_schedule(GetParam(), three_one_shape(M, N)), GetParam());
  const auto fwd = forwards_by_device(cs.schedule());
  ASSERT_EQ(cs.num_devices(), 4);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(fwd.at(k).size(), static_cast<size_t>(M * N / 3)) << "device " << k;
    for (int mb : fwd.at(k)) EXPECT_EQ(mb % 3, k) << "device " << k;
  }
  EXPECT_EQ(fwd.at(3).size(), static_cast<size_t>(M * N));  // stage 1 takes them all
  // Stage 0's three replicas all-reduce together once per bucket and step; stage 1 never.
  int steps = 0;
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    if (a.op == Op::kOptimizerStep) ++steps;
    if (a.op != Op::kAllReduce) continue;
    EXPECT_EQ(a.stage, 0);
    EXPECT_EQ(cs.group_members(cs.group(id)).size(), 3u);
  }
  EXPECT_EQ(steps, (3 + 1) * N);  // every replica of every stage steps once a step
}

TEST_P(StageReplicas, SendsGoToTheReplicaOfTheMicroBatch) {
  const CompiledSchedule cs(make_schedule(GetParam(), three_one_shape(6)), GetParam());
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    if (a.op != Op::kSend) continue;
    const auto members = cs.group_members(cs.group(id));
    const int recv_device = cs.device(members[1]);
    EXPECT_EQ(recv_device, a.peer_stage == 0 ? a.micro_batch % 3 : 3) << describe(a);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, StageReplicas,
                         ::testing::Values("naive", "gpipe", "1f1b", "pipedream", "ftpipe-async",
                                           "zb-h1"));

TEST(StageReplicasPipeDream, EachReplicaStashesTheVersionsOfItsOwnForwards) {
  // M = 3: each replica of stage 0 forwards one micro-batch a step and steps with the others;
  // its backward reads the version its forward read (weight stashing per replica).
  const CompiledSchedule cs(make_schedule("pipedream", three_one_shape(3, 6)), "pipedream");
  int stale = 0;
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    if (a.op != Op::kBackward) continue;
    const int f = cs.forward_of(0, a.stage, a.micro_batch);
    EXPECT_EQ(cs.device(f), cs.device(id));
    EXPECT_EQ(a.version, cs.action(f).version) << describe(a);
    if (a.stage == 0 && a.version < a.step) ++stale;
  }
  EXPECT_GT(stale, 0);  // the stage-0 replicas do read stale weights
}

TEST(StageReplicasShape, RefusesWhatTheRoundRobinCannotDeal) {
  PipelineShape sh = three_one_shape(4);
  EXPECT_THAT([&] { sh.normalize("plan.json"); },
              ::testing::ThrowsMessage<InputError>(
                  HasSubstr("micro-batches M = 4 must be a multiple of stage 0's 3 replicas")));
  sh = three_one_shape(6);
  sh.stage_device = {0, 2};
  EXPECT_THAT([&] { sh.normalize("plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("stages 0 and 1 share a device")));
  EXPECT_THAT([&] { make_schedule("ddg", three_one_shape(6)); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "schedule ddg: cannot replicate stages unevenly (stage replicas [3, 1])")));
}

TEST(StageReplicasSim, ThreeOneGPipeMatchesItsRoundRobinClosedForm) {
  // Stage 0 takes 3f per micro-batch on each of its replicas, stage 1 f. Forwards: replica k
  // finishes micro-batch j (j mod 3 = k) at 3f (floor(j / 3) + 1), exactly when stage 1 is ready
  // for it, so stage 1's forwards end at 3f + M f; its backwards (2f each, last micro-batch
  // first) end at 3f + 3M f, and the gradient of micro-batch 0 takes replica 0 another 6f, which
  // it starts at once: its earlier backwards kept pace (three 2f backwards per 6f). The
  // iteration: 3f + 3M f + 6f = 27 ms at M = 6, against 57 ms for the same stages unreplicated.
  const sim::SimResult r = sim::simulate_plan(PlanContext(three_one_plan("gpipe", 6), 3));
  EXPECT_NEAR(r.metrics.iteration_time_s, 27e-3, 1e-9);
  for (const auto& e : r.timeline.events) {
    if (e.action.op == Op::kForward && e.action.stage == 0) {
      EXPECT_EQ(e.device, e.action.micro_batch % 3) << describe(e.action);
    }
  }
  Plan straight = three_one_plan("gpipe", 6);
  straight.stages = {{{0, 1, 2}, 0, 1}, {{3}, 1, 1}};
  const sim::SimResult s = sim::simulate_plan(PlanContext(straight, 3));
  EXPECT_NEAR(s.metrics.iteration_time_s, 57e-3, 1e-9);
}

TEST(StageReplicasPlan, RoundTripsAndRefusesBadReplicas) {
  const Plan p = three_one_plan("1f1b", 6);
  EXPECT_EQ(p.devices_per_replica(), 4);
  const Plan back = plan_from_json(JsonView(plan_to_json(p), "plan.json"));
  ASSERT_EQ(back.stages.size(), 2u);
  EXPECT_EQ(back.stages[0].replicas, 3);
  EXPECT_EQ(back.stages[1].replicas, 1);
  EXPECT_EQ(PlanContext(back, 2).shape.stage_replicas, (std::vector<int>{3, 1}));

  Plan bad = p;
  bad.chunks = 4;
  bad.batch_size = 4;
  EXPECT_THAT([&] { bad.validate("plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr(
                  "plan.json: stages[0].replicas: 3 replicas do not divide chunks M = 4")));
  bad = p;
  bad.stages[1].device = 2;
  EXPECT_THAT([&] { bad.validate("plan.json"); },
              ::testing::ThrowsMessage<InputError>(
                  HasSubstr("plan.json: stages[1].device: stage 1 shares a device with stage 0")));
  bad = p;
  bad.stages[0].replicas = 0;
  EXPECT_THAT([&] { bad.validate("plan.json"); },
              ::testing::ThrowsMessage<InputError>(
                  HasSubstr("plan.json: stages[0].replicas: must be positive (0 given)")));
  bad = p;
  bad.stages[0].replicas = 4;  // 4 + 1 devices on a 4-device cluster
  bad.chunks = 4;
  bad.batch_size = 4;
  bad.stages[1].device = 4;
  EXPECT_THAT([&] { bad.validate("plan.json"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("the plan needs 5 devices")));
}

// A model whose first layer is all compute (20 ms forward a sample, no weights to speak of) and
// whose last holds 400 MB of weights, on PipeDream's Cluster-A (4 servers of 4 V100s, 10 GbE):
// data parallelism over 8 GPUs all-reduces the 400 MB across servers, a straight pipeline waits
// on the first layer, and PipeDream's released optimizer picks "7-1" — the first layer on 7
// GPUs — which the paper's pricing (all-reduce hidden) ranks behind data parallelism.
TEST(StageReplicasPlanner, PipeDreamDpPlansTheUnevenHybridTheSimulatorFindsFastest) {
  const Catalog catalog = Catalog::load(std::string(PIPETWIN_SOURCE_DIR) + "/hardware");
  sim::PlanRequest r;
  r.model =
      "uniform:fwd_ms=20/0.1/0.1/0.1/0.1/0.1/0.1/1,bwd_ms=40/0.2/0.2/0.2/0.2/0.2/0.2/2,"
      "param_kb=1/1/1/1/1/1/1/400000";
  r.profile = synthetic_profile(ModelSpec::parse(r.model, "test"));
  r.cluster = load_cluster("pipedream-cluster-a-4x4-v100", catalog);
  r.catalog = &catalog;
  r.stages = 8;
  r.batch_size = 56;
  r.chunks = 7;
  r.partitioner = "pipedream-dp";
  for (const std::string schedule : {"pipedream", "1f1b"}) {
    r.schedule = schedule;
    const Plan hybrid = sim::make_plan(r);
    ASSERT_EQ(hybrid.num_stages(), 2) << schedule;
    EXPECT_EQ(hybrid.stages[0].replicas, 7);
    EXPECT_EQ(hybrid.stages[0].layers, (std::vector<int>{0}));
    EXPECT_EQ(hybrid.stages[1].device, 7);
    EXPECT_EQ(hybrid.dp, 1);
    sim::PlanRequest dp = r;
    dp.partitioner = "uniform";
    dp.stages = 1;
    dp.dp = 8;
    const double t_hybrid = sim::simulate_plan(PlanContext(hybrid, 0)).metrics.iteration_time_s;
    const double t_dp =
        sim::simulate_plan(PlanContext(sim::make_plan(dp), 0)).metrics.iteration_time_s;
    EXPECT_LT(t_hybrid, 0.97 * t_dp) << schedule;
  }
}

}  // namespace
}  // namespace pipetwin
