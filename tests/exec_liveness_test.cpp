// The executor against the liveness walk (core/schedule/liveness.hpp): with the check on, every
// compute action of every schedule the executor runs is followed by an assertion that the stages
// hold exactly what the walk says (exec/runtime/liveness_check.hpp) — the graphs of micro-batches
// in flight and their versions, the versions they pin, the stashed versions alive — and the
// weights are those of the reference trainer at the declared versions. A wrong expectation is
// caught, so the check cannot pass by not looking.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "exec/runtime/liveness_check.hpp"
#include "exec/runtime/reference.hpp"
#include "exec/runtime/session.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;
using ::testing::HasSubstr;
using testing::max_relative_error;

constexpr int kIterations = 6;  // enough steps for the asynchronous schedules to stash

struct LivenessCase {
  std::string schedule;
  int stages, chunks;
  Checkpoint checkpoint;
  int dp = 1;
};

void PrintTo(const LivenessCase& c, std::ostream* os) {
  *os << fmt::format("{} K={} M={} dp={} checkpoint {}", c.schedule, c.stages, c.chunks, c.dp,
                     checkpoint_name(c.checkpoint));
}

exec::ExecOptions checked_options() {
  exec::ExecOptions o = float64_options(kIterations);
  o.check_liveness = true;
  return o;
}

class ExecLiveness : public ::testing::TestWithParam<LivenessCase> {};

TEST_P(ExecLiveness, StagesHoldWhatTheWalkSays) {
  const LivenessCase c = GetParam();
  const ExecSpec s{.schedule = c.schedule,
                   .stages = c.stages,
                   .chunks = c.chunks,
                   .dp = c.dp,
                   .checkpoint = c.checkpoint};
  const Plan plan = exec_plan(s);
  exec::ExecResult r;
  try {
    r = exec::execute_plan(plan, checked_options());
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  // The run trained at the versions the schedule declares (plain SGD for synchronous ones).
  const PlanContext ctx(plan, kIterations);
  const exec::ReferenceResult ref = exec::reference_training(
      plan, make_schedule(plan.schedule, ctx.shape), float64_options(kIterations));
  std::vector<at::Tensor> expected;
  for (const auto& st : ref.stage_parameters) expected.insert(expected.end(), st.begin(), st.end());
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, c.stages), expected), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExecLiveness,
    ::testing::Values(LivenessCase{"naive", 2, 2, Checkpoint::kNone},
                      LivenessCase{"naive", 3, 2, Checkpoint::kNone},
                      LivenessCase{"gpipe", 2, 4, Checkpoint::kNone},
                      LivenessCase{"gpipe", 3, 4, Checkpoint::kNone},
                      LivenessCase{"gpipe", 2, 4, Checkpoint::kExceptLast},
                      LivenessCase{"gpipe", 3, 4, Checkpoint::kExceptLast},
                      LivenessCase{"gpipe", 2, 3, Checkpoint::kAlways},
                      LivenessCase{"gpipe", 3, 3, Checkpoint::kAlways},
                      LivenessCase{"1f1b", 2, 4, Checkpoint::kNone},
                      LivenessCase{"1f1b", 3, 4, Checkpoint::kNone},
                      LivenessCase{"1f1b", 3, 4, Checkpoint::kExceptLast},
                      LivenessCase{"pipedream", 2, 1, Checkpoint::kNone},
                      LivenessCase{"pipedream", 3, 2, Checkpoint::kNone},
                      // Weight stashing under checkpointing: the forward pins the version its
                      // recompute reads across the steps in between.
                      LivenessCase{"pipedream", 2, 1, Checkpoint::kAlways},
                      LivenessCase{"pipedream", 3, 2, Checkpoint::kAlways},
                      LivenessCase{"pipedream", 3, 1, Checkpoint::kExceptLast},
                      LivenessCase{"ddg", 2, 1, Checkpoint::kNone},
                      LivenessCase{"ddg", 3, 2, Checkpoint::kNone},
                      LivenessCase{"feature-replay", 2, 1, Checkpoint::kNone},
                      LivenessCase{"feature-replay", 3, 2, Checkpoint::kNone},
                      LivenessCase{"ftpipe-async", 2, 1, Checkpoint::kNone},
                      LivenessCase{"ftpipe-async", 3, 2, Checkpoint::kNone},
                      LivenessCase{"gpipe", 2, 2, Checkpoint::kExceptLast, 2},
                      LivenessCase{"pipedream", 2, 1, Checkpoint::kAlways, 2}),
    [](const ::testing::TestParamInfo<LivenessCase>& i) {
      std::string name =
          fmt::format("{}_K{}_M{}_dp{}_{}", i.param.schedule, i.param.stages, i.param.chunks,
                      i.param.dp, checkpoint_name(i.param.checkpoint));
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// Several stages on one device (a Mixed-pipe placement, FTPipe Section 4.1): the check covers
// every stage the device hosts.
TEST(ExecLiveness, MixedPipeDevicesHoldingSeveralStages) {
  const std::pair<const char*, Checkpoint> cases[] = {{"gpipe", Checkpoint::kExceptLast},
                                                      {"gpipe", Checkpoint::kAlways},
                                                      {"ftpipe-async", Checkpoint::kNone}};
  for (const auto& [schedule, checkpoint] : cases) {
    const ExecSpec s{.schedule = schedule, .chunks = 2, .checkpoint = checkpoint};
    const int L = static_cast<int>(testing::profile_of(s.model).layers.size());
    std::vector<int> head;
    for (int l = 0; l < L - 2; ++l) head.push_back(l);
    const Plan plan = testing::mixed_plan(s, {head, {L - 2}, {L - 1}}, {0, 1, 0});
    EXPECT_NO_THROW(exec::execute_plan(plan, checked_options()))
        << schedule << " " << checkpoint_name(checkpoint);
  }
}

// A run checked against the walk of another schedule of the same shape fails at the first
// action where the two differ, naming the device, the action and the difference.
TEST(ExecLivenessCheck, CatchesTheWalkOfAnotherSchedule) {
  const Plan plan = exec_plan(ExecSpec{.schedule = "gpipe", .stages = 2, .chunks = 4});
  exec::ExecOptions o = checked_options();
  o.check_liveness_against = "1f1b";
  try {
    exec::execute_plan(plan, o);
    ADD_FAILURE() << "a run checked against 1F1B's walk passed as GPipe";
  } catch (const RunFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("liveness check: device "));
    EXPECT_THAT(e.what(), HasSubstr("the walk only: "));
  }
  o.check_liveness = false;  // the knob alone checks nothing
  EXPECT_NO_THROW(exec::execute_plan(plan, o));
}

// A stage driven by hand: a forward that keeps its graph where the walk says it keeps only its
// input (a checkpointed schedule of the same shape) is a std::logic_error naming the device, the
// action and both sides.
TEST(ExecLivenessCheck, NamesTheDeviceTheActionAndTheDifference) {
  const Plan plan = exec_plan(ExecSpec{.schedule = "gpipe", .stages = 1, .chunks = 2});
  exec::PipelineSession session(plan, float64_options(1), nullptr);
  exec::StageRuntime* st = session.runtime(0, 0);
  ASSERT_NE(st, nullptr);
  const PlanContext ctx(plan, 1);
  const CompiledSchedule cs(make_schedule("gpipe", ctx.shape), "gpipe");
  PipelineShape always = ctx.shape;
  always.checkpoint = Checkpoint::kAlways;
  const CompiledSchedule ck(make_schedule("gpipe", always), "gpipe always");
  const Liveness right(cs), wrong(ck);
  exec::LivenessCheck good(right, 0), bad(wrong, 0);
  const std::map<int, exec::StageRuntime*> stages{{0, st}};
  const Action& f0 = cs.action(cs.id({0, 0}));
  ASSERT_EQ(f0.op, Op::kForward);
  ASSERT_TRUE(right.keeps_graph(cs.id({0, 0})));
  st->forward(f0.micro_batch, f0.version, {session.data().input(0, 0, f0.micro_batch)},
              exec::ForwardKeep::with_graph(f0.version),
              session.data().target(0, 0, f0.micro_batch));
  EXPECT_NO_THROW(good.after(0, f0, stages));
  try {
    bad.after(0, f0, stages);
    ADD_FAILURE() << "a graph the walk does not keep went unnoticed";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("device 0 after action 0 (" + describe(f0) + ")"));
    EXPECT_THAT(e.what(), HasSubstr("stage 0: the walk only: mb 0 (no graph, pins v0); "
                                    "the stage only: mb 0 (graph v0, pins v0)"));
  }
}

TEST(ExecLivenessCheck, DifferencesListWhatOnlyOneSideHas) {
  const std::map<int, exec::StageHolding> walk{
      {0, {.micro_batches = {{1, 0, 0}, {2, -1, -1}}, .versions = {{0, false, 1}, {1, true, 0}}}},
      {1, {.micro_batches = {}, .versions = {{1, true, 0}}}}};
  EXPECT_EQ(exec::holding_difference(walk, walk), "");
  std::map<int, exec::StageHolding> held = walk;
  held[0].versions[0].pins = 2;  // a stash pinned once more than the walk says
  EXPECT_EQ(exec::holding_difference(walk, held),
            "stage 0: the walk only: v0 (stashed, 1 pin); the stage only: v0 (stashed, 2 pins)");
  held = walk;
  held[1].micro_batches.push_back({4, 1, 1});
  EXPECT_EQ(exec::holding_difference(walk, held),
            "stage 1: the walk only: nothing; the stage only: mb 4 (graph v1, pins v1)");
  // The walk's live set in these terms: its micro-batches and versions, stage by stage.
  LiveSet live;
  live.micro_batches.push_back({.stage = 1, .micro_batch = 3, .forward = 7, .pinned_version = 2});
  live.versions.push_back({.stage = 1, .version = 2, .current = true, .pinned_by = 1});
  const auto h = exec::expected_holdings(live);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h.at(1), (exec::StageHolding{{{3, -1, 2}}, {{2, true, 1}}}));
}

}  // namespace
}  // namespace pipetwin
