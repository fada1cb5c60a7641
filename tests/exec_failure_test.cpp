// The executor on bad input and failures: a plan that does not match its model, a stage that
// throws. Each ends with a clear error, never a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "core/error.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using ::testing::HasSubstr;

TEST(ExecErrors, PlanWhoseLayersAreNotTheModels) {
  ExecSpec s;
  Plan plan = exec_plan(s);
  plan.profile.layers[2].name = "conv9";
  try {
    exec::execute_plan(plan, testing::float64_options(1));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("profile.layers[2].name: \"conv9\", but layer 2 of model"));
  }
}

TEST(ExecErrors, PlanWithAnotherLayerCount) {
  ExecSpec s;
  Plan plan = exec_plan(s);
  plan.profile.layers.pop_back();
  plan.stages.back().layers.pop_back();
  EXPECT_THROW(exec::execute_plan(plan, testing::float64_options(1)), InputError);
}

TEST(ExecErrors, PlanThatDoesNotFitIsRefusedBeforeRunning) {
  ExecSpec s;
  Plan plan = exec_plan(s);
  plan.cluster.device.memory_bytes = 1024;
  for (auto& l : plan.profile.layers) l.param_bytes = 4096;
  try {
    exec::execute_plan(plan, testing::float64_options(1));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan does not fit: device 0"));
  }
}

TEST(ExecErrors, ParametersTheProfileDoesNotKnowAreRefused) {
  // With data parallelism the all-reduce buckets come from the profile's parameter bytes: a
  // profile that claims a layer has none would leave its gradients unsynchronised.
  ExecSpec s;
  s.dp = 2;
  Plan plan = exec_plan(s);
  plan.profile.layers[1].param_bytes = 0;
  try {
    exec::execute_plan(plan, testing::float64_options(1));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("profile.layers[1].param_bytes: 0, but layer 1"));
  }
}

TEST(ExecErrors, AStageThatThrowsStopsEveryDevice) {
  ExecSpec s;
  s.stages = 3;
  s.chunks = 8;
  const Plan plan = exec_plan(s);
  ::setenv("PIPETWIN_FAULT", "device=1,action=5,mode=throw", 1);
  const auto start = std::chrono::steady_clock::now();
  try {
    exec::execute_plan(plan, testing::float64_options(4));
    ::unsetenv("PIPETWIN_FAULT");
    FAIL() << "the injected fault did not stop the run";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device 1"));
    EXPECT_THAT(e.what(), HasSubstr("stream, action 5 ("));
    EXPECT_THAT(e.what(), HasSubstr("injected fault"));
  }
  ::unsetenv("PIPETWIN_FAULT");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace pipetwin
