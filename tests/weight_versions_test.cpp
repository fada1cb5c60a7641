// Which optimizer steps write a new weight version (core/schedule/weight_versions.hpp): none in
// the synchronous schedules, whose backwards all end before the step; in PipeDream every step of
// a stage that still has micro-batches in flight on the version it replaces (K - k of them on
// stage k in steady state, EPFL report Section 2.4), so all but the last stage's in steady state.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/weight_versions.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

// (replica, stage) -> per step (by the version it writes, 1..N): whether it writes a new one.
using Steps = std::map<std::pair<int, int>, std::vector<bool>>;

Steps new_version_steps(const std::string& schedule, const PipelineShape& shape) {
  const CompiledSchedule cs(make_schedule(schedule, shape), schedule);
  const std::vector<char> marks = steps_writing_new_version(cs);
  EXPECT_EQ(marks.size(), static_cast<size_t>(cs.num_actions()));
  Steps out;
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    if (a.op != Op::kOptimizerStep) {
      EXPECT_EQ(marks[static_cast<size_t>(id)], 0) << "only optimizer steps are marked";
      continue;
    }
    auto& v = out[{cs.replica(id), a.stage}];
    v.resize(static_cast<size_t>(shape.iterations));
    v.at(static_cast<size_t>(a.version - 1)) = marks[static_cast<size_t>(id)] != 0;
  }
  return out;
}

TEST(WeightVersions, SynchronousSchedulesStepInPlace) {
  for (const char* s : {"naive", "gpipe", "1f1b"}) {
    for (int K : {1, 2, 4}) {
      for (int M : {1, 4, 8}) {
        for (auto ck : {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
          for (int dp : {1, 2}) {
            for (const auto& [where, steps] :
                 new_version_steps(s, test::pipeline_shape(K, M, 3, dp, ck))) {
              for (bool n : steps) {
                EXPECT_FALSE(n) << s << " K=" << K << " M=" << M << " stage " << where.second;
              }
            }
          }
        }
      }
    }
  }
}

TEST(WeightVersions, PipeDreamKeepsTheOldVersionWhileMicroBatchesUseIt) {
  for (int K : {2, 3, 4}) {
    for (int M : {1, 2}) {
      const int N = 4 * K + 2;
      const Steps steps = new_version_steps("pipedream", test::pipeline_shape(K, M, N));
      for (int s = 0; s < K; ++s) {
        const std::vector<bool>& v = steps.at({0, s});
        ASSERT_EQ(static_cast<int>(v.size()), N);
        if (s == K - 1) {
          // The last stage runs each micro-batch's backward right after its forward.
          for (int i = 0; i < N; ++i) EXPECT_FALSE(v[i]) << "K=" << K << " step " << i + 1;
          continue;
        }
        // Steady state: K - 1 - s micro-batches forwarded on the current version are in flight
        // at every step. In the drain no forward reads the newest versions, and the last step
        // comes after it, with nothing in flight.
        for (int i = K; i < N - K; ++i)
          EXPECT_TRUE(v[i]) << "K=" << K << " M=" << M << " stage " << s << " step " << i + 1;
        EXPECT_FALSE(v[N - 1]) << "K=" << K << " M=" << M << " stage " << s << ": drained";
      }
    }
  }
}

TEST(WeightVersions, ReplicasOfAStageChooseAlike) {
  const Steps steps = new_version_steps("pipedream", test::pipeline_shape(3, 1, 8, 2));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(steps.at({0, s}), steps.at({1, s})) << "stage " << s;
}

}  // namespace
}  // namespace pipetwin
