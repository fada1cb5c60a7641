// Resource limits of schedules (core/schedule/limits.hpp): the estimate bounds what the
// generators produce, and an enormous schedule is refused before anything is generated.
#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/limits.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

PipelineShape shape(int K, int M, int N, int dp, Checkpoint ck) {
  PipelineShape s = test::pipeline_shape(K, M, N, dp, ck);
  s.normalize("test");
  return s;
}

// The estimate is what the limit relies on: never below the real count, and close to it.
TEST(ActionLimit, EstimateBoundsEveryGeneratorsActionCount) {
  for (const auto& info : schedule_catalog()) {
    for (const Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast}) {
      for (const int dp : {1, 2}) {
        PipelineShape s = shape(4, 8, 3, dp, ck);
        ASSERT_TRUE(test::place_for(info.name, s)) << info.name;
        const double real = static_cast<double>(make_schedule(info.name, s).num_actions());
        const double estimate = estimated_actions(info.name, s);
        const std::string what = info.name + " dp=" + std::to_string(dp);
        EXPECT_GE(estimate, real) << what;
        EXPECT_LE(estimate, 1.6 * real) << what;
      }
    }
  }
}

// The example: 10^9 actions are refused at once, with the estimate, without generating.
TEST(ActionLimit, ABillionActionsAreRefusedUpFrontWithAnEstimate) {
  const PipelineShape s = shape(8, 10'000'000, 10, 1, Checkpoint::kNone);
  EXPECT_GT(estimated_actions("gpipe", s), 1e9);
  const auto start = std::chrono::steady_clock::now();
  try {
    make_schedule("gpipe", s);
    FAIL() << "an enormous schedule was generated";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("schedule gpipe: K=8, M=10000000, dp=1, 10 iterations"));
    EXPECT_THAT(what, HasSubstr("about 4.4e+09 actions"));
    EXPECT_THAT(what, HasSubstr("GiB of memory"));
    EXPECT_THAT(what, HasSubstr("--max-actions"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(ActionLimit, TheLimitCanBeRaisedOrLifted) {
  const double before = action_limit();
  const PipelineShape s = shape(2, 600, 10, 1, Checkpoint::kNone);  // ~36,000 actions
  set_action_limit(10'000);
  EXPECT_THROW(check_action_limit("1f1b", s), InputError);
  set_action_limit(0);  // no limit
  EXPECT_NO_THROW(check_action_limit("1f1b", s));
  EXPECT_THROW(set_action_limit(-1), InputError);
  set_action_limit(before);
  EXPECT_NO_THROW(make_schedule("1f1b", s));
}

}  // namespace
}  // namespace pipetwin
