// The executor on stages replicated unevenly within the pipeline (PipeDream's hybrid plans,
// PipelineShape::stage_replicas): a "3-1" plan — stage 0 on three devices taking every third
// micro-batch, stage 1 on the fourth — trains in float64 to the weights of single-process
// training (synchronous schedules) or of training at the weight versions the schedule declares
// for each replica (PipeDream's weight stashing per replica), every copy of the replicated stage
// ending with the same weights; in-process here, over four Gloo processes in
// exec_distributed_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exec/runtime/reference.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::float64_options;
using testing::max_relative_error;

constexpr double kTolerance = 1e-9;

// Every copy of stage 0 holds `expected`'s stage-0 tensors.
void expect_copies_equal(const exec::ExecResult& r, const std::vector<at::Tensor>& stage0) {
  for (int k = 1; k < 3; ++k) {
    ASSERT_TRUE(r.stage_copies.count({0, 0, k})) << "copy " << k;
    EXPECT_LT(max_relative_error(r.stage_copies.at({0, 0, k}), stage0), kTolerance) << k;
  }
}

class StageReplicasEqualSingleProcess : public ::testing::TestWithParam<std::string> {};

TEST_P(StageReplicasEqualSingleProcess, EveryCopyEndsWithPlainTrainingsWeights) {
  const Plan plan = testing::three_one_plan(GetParam(), 6);
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 3);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, 2), reference), kTolerance);
  const auto stage0 = r.parameters.at({0, 0});
  EXPECT_LT(max_relative_error(stage0, {reference.begin(), reference.begin() + stage0.size()}),
            kTolerance);
  expect_copies_equal(r, stage0);
  // Each replica ran only its own micro-batches: j on device j mod 3.
  for (const auto& e : r.timeline.events) {
    if (e.action.op == Op::kForward && e.action.stage == 0) {
      EXPECT_EQ(e.device, e.action.micro_batch % 3);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, StageReplicasEqualSingleProcess,
                         ::testing::Values("gpipe", "1f1b"));

TEST(StageReplicasPipeDream, EachReplicaReadsTheVersionsTheScheduleDeclares) {
  // PipeDream with weight stashing: each replica of stage 0 reads, in its backward, the weights
  // its forward read — the versions the schedule declares per device — and the weights equal a
  // reference trained at those versions (testing::expect_declared_versions).
  const Plan plan = testing::three_one_plan("pipedream", 3);
  testing::expect_declared_versions(plan, 6);
  const exec::ExecResult r = exec::execute_plan(plan, float64_options(6));
  expect_copies_equal(r, r.parameters.at({0, 0}));
}

}  // namespace
}  // namespace pipetwin
