// The executor against single-process training (correctness):
// synchronous schedules give the weights of plain mini-batch SGD; asynchronous schedules use
// exactly the weight versions their schedule declares; in-process data parallelism equals
// training on the global batch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/schedule/generators.hpp"
#include "exec/runtime/reference.hpp"
#include "exec_test_util.hpp"
#include "sim/planner.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::expect_declared_versions;
using testing::float64_options;
using testing::max_relative_error;

constexpr double kTolerance = 1e-5;  // the bound; float64 runs land near 1e-13

struct SyncCase {
  std::string model, schedule;
  int stages, chunks;
  Checkpoint checkpoint;
};

class SyncEqualsSingleProcess : public ::testing::TestWithParam<SyncCase> {};

TEST_P(SyncEqualsSingleProcess, SameWeightsAfterSeveralSteps) {
  const SyncCase c = GetParam();
  const ExecSpec s{.model = c.model,
                   .schedule = c.schedule,
                   .stages = c.stages,
                   .chunks = c.chunks,
                   .checkpoint = c.checkpoint};
  const Plan plan = exec_plan(s);
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 3);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, s.stages), reference), kTolerance);
  // Training does something: the weights moved away from the initial ones.
  const auto initial = models::build_model(plan.model, at::kDouble, opt.seed).parameters();
  EXPECT_GT(max_relative_error(reference, initial), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, SyncEqualsSingleProcess,
    ::testing::Values(
        SyncCase{"mlp:layers=4,width=32,input=16", "naive", 3, 4, Checkpoint::kNone},
        SyncCase{"mlp:layers=4,width=32,input=16", "gpipe", 3, 4, Checkpoint::kNone},
        SyncCase{"mlp:layers=4,width=32,input=16", "gpipe", 3, 4, Checkpoint::kExceptLast},
        SyncCase{"mlp:layers=4,width=32,input=16", "gpipe", 2, 3, Checkpoint::kAlways},
        SyncCase{"mlp:layers=4,width=32,input=16", "1f1b", 3, 4, Checkpoint::kNone},
        SyncCase{"mlp:layers=4,width=32,input=16", "1f1b", 3, 2, Checkpoint::kExceptLast},
        SyncCase{"vit:test", "gpipe", 2, 4, Checkpoint::kExceptLast},
        SyncCase{"vit:test", "1f1b", 3, 4, Checkpoint::kNone},
        SyncCase{"bert:tiny,seq=8,vocab=64", "gpipe", 2, 2, Checkpoint::kNone},
        SyncCase{"bert:tiny,seq=8,vocab=64", "1f1b", 2, 4, Checkpoint::kExceptLast}));

// Dropout masks follow the micro-batch, not the thread or the pass: a checkpointed stage's
// recompute sees its forward's masks, and every partition sees the masks of one process.
TEST(ExecDropout, CheckpointedRecomputeSeesTheForwardsMasks) {
  for (const Checkpoint ck : {Checkpoint::kNone, Checkpoint::kAlways}) {
    ExecSpec s;
    s.model = "vit:test,dropout=0.3";
    s.stages = 2;
    s.chunks = 3;
    s.checkpoint = ck;
    const Plan plan = exec_plan(s);
    const auto opt = float64_options(2);
    const exec::ExecResult r = exec::execute_plan(plan, opt);
    const PlanContext ctx(plan, 2);
    const exec::ReferenceResult ref =
        exec::reference_training(plan, make_schedule("gpipe", ctx.shape), opt);
    std::vector<at::Tensor> expected;
    for (const auto& st : ref.stage_parameters)
      expected.insert(expected.end(), st.begin(), st.end());
    const auto got = testing::executor_parameters(r, 2);
    EXPECT_LT(max_relative_error(got, expected), 1e-9) << checkpoint_name(ck);
    // Dropout is on: without it training ends elsewhere.
    s.model = "vit:test";
    const exec::ExecResult plain = exec::execute_plan(exec_plan(s), opt);
    EXPECT_GT(max_relative_error(got, testing::executor_parameters(plain, 2)), 1e-6);
  }
}

class AsyncUsesDeclaredVersions : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AsyncUsesDeclaredVersions, RecordedVersionsAndWeights) {
  const auto [schedule, M] = GetParam();
  ExecSpec s;
  s.schedule = schedule;
  s.stages = 3;
  s.chunks = M;
  expect_declared_versions(exec_plan(s), 6);
}

INSTANTIATE_TEST_SUITE_P(Schedules, AsyncUsesDeclaredVersions,
                         ::testing::Combine(::testing::Values("pipedream", "ddg", "feature-replay",
                                                              "ftpipe-async"),
                                            ::testing::Values(1, 2)));

// Mixed-pipe plans (FTPipe Section 4.1: the executor runs every partition the partitioners
// produce). Five stages on three devices: stages 0 and 1 share device 0 (a local hand-over,
// no transfer), stage 1 feeds device 2 (not device 0's neighbour), stage 2 feeds device 1 (a lower
// one), stage 3 returns to device 0, which so hosts three stages.
const std::vector<int> kMixedDevices{0, 0, 2, 1, 0};

Plan mixed(const std::string& model, const std::string& schedule, int chunks,
           Checkpoint ck = Checkpoint::kNone) {
  const ExecSpec s{.model = model, .schedule = schedule, .chunks = chunks, .checkpoint = ck};
  const int L = static_cast<int>(testing::profile_of(model).layers.size());
  // Layers 0..L-4 in stage 0, then one layer per stage.
  std::vector<std::vector<int>> layers(1);
  for (int l = 0; l <= L - 4; ++l) layers[0].push_back(l);
  for (int l = L - 3; l < L; ++l) layers.push_back({l});
  layers.insert(layers.begin() + 1, std::vector<int>{layers[0].back()});
  layers[0].pop_back();
  return testing::mixed_plan(s, layers, kMixedDevices);
}

class MixedPipeEqualsSingleProcess : public ::testing::TestWithParam<SyncCase> {};

TEST_P(MixedPipeEqualsSingleProcess, SameWeightsAfterSeveralSteps) {
  const SyncCase c = GetParam();
  const Plan plan = mixed(c.model, c.schedule, c.chunks, c.checkpoint);
  ASSERT_EQ(plan.num_stages(), 5);
  ASSERT_EQ(plan.devices_per_replica(), 3);
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 3);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, 5), reference), kTolerance);
  // Every stage ran on its device, and only boundaries between devices were transferred.
  int sends = 0;
  for (const auto& e : r.timeline.events) {
    if (e.action.stage >= 0) {
      EXPECT_EQ(e.device, kMixedDevices[static_cast<size_t>(e.action.stage)]);
    }
    if (e.action.op == Op::kSend) {
      ++sends;
      EXPECT_NE(kMixedDevices[static_cast<size_t>(e.action.stage)],
                kMixedDevices[static_cast<size_t>(e.action.peer_stage)])
          << describe(e.action);
    }
  }
  EXPECT_EQ(sends, 2 * 3 * 3 * c.chunks);  // 3 remote edges, both ways, 3 steps of M
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, MixedPipeEqualsSingleProcess,
    ::testing::Values(SyncCase{"mlp:layers=4,width=32,input=16", "naive", 5, 3, Checkpoint::kNone},
                      SyncCase{"mlp:layers=4,width=32,input=16", "gpipe", 5, 4, Checkpoint::kNone},
                      SyncCase{"mlp:layers=4,width=32,input=16", "gpipe", 5, 4,
                               Checkpoint::kExceptLast},
                      SyncCase{"vit:test", "gpipe", 5, 2, Checkpoint::kAlways},
                      SyncCase{"vit:test", "naive", 5, 2, Checkpoint::kNone}));

TEST(MixedPipeAsync, FTPipeUsesDeclaredVersionsWithSeveralStagesPerDevice) {
  for (int M : {1, 2}) {
    SCOPED_TRACE(fmt::format("M = {}", M));
    expect_declared_versions(mixed("mlp:layers=4,width=32,input=16", "ftpipe-async", M), 6);
  }
}

// What `pipetwin plan --partitioner mixed-pipe` makes of vit:tiny on the shipped profile (eight
// blocks on two devices) runs and trains as one process does.
TEST(MixedPipePartitioner, ItsPlanForVitTinyEqualsSingleProcess) {
  const sim::PlanRequest q = testing::local_cpu_request(
      "vit:tiny",
      load_profile(std::string(PIPETWIN_SOURCE_DIR) + "/traces/cpu-core/vit-tiny.profile.json"),
      "gpipe", "mixed-pipe");
  const Plan plan = sim::make_plan(q);
  ASSERT_EQ(plan.devices_per_replica(), 2);
  ASSERT_GT(plan.num_stages(), 2) << "several stages per device";
  const auto opt = float64_options(2);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 2);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, plan.num_stages()), reference),
            kTolerance);
}

TEST(ExecDataParallel, InProcessGPipeEqualsGlobalBatch) {
  ExecSpec s;
  s.stages = 2;
  s.chunks = 2;
  s.dp = 2;
  const Plan plan = exec_plan(s);
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 3);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, 2, 0), reference), kTolerance);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, 2, 1), reference), kTolerance);
  int allreduces = 0;
  for (const auto& e : r.timeline.events) allreduces += e.action.op == Op::kAllReduce;
  EXPECT_GT(allreduces, 0);
}

TEST(ExecLoss, LossFallsOnTheDigits) {
  ExecSpec s;
  s.model = "mlp";
  s.stages = 2;
  s.micro_batch = 8;
  const Plan plan = exec_plan(s);
  auto opt = float64_options(30);
  opt.optimizer.lr = 0.1;
  opt.data = "digits";
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  ASSERT_EQ(r.step_loss.size(), 30u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.step_loss[static_cast<size_t>(i)];
  for (int i = 25; i < 30; ++i) last += r.step_loss[static_cast<size_t>(i)];
  EXPECT_LT(last, first);
}

}  // namespace
}  // namespace pipetwin
