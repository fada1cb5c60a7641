// PipeTransformer live (`pipetwin train --elastic`) when something goes wrong: a rank killed
// during a transition ends every rank; a rank lost with --on-rank-loss continue re-plans for the
// replicas left and trains on; a freeze of every layer is refused with AutoPipe's line; an injected
// throw names its transition; bad flags are refused in one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/elastic/autopipe.hpp"
#include "core/error.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"
#include "exec_elastic_test_util.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::bound_every_two_steps;
using testing::Elastic;
using testing::exec_plan;
using testing::kDepth4TwoStages;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Outcome;
using testing::sh;
using testing::write_plan;

// A rank killed half-way through moving the layers ends the run on every rank with a one-line
// error within the timeout; the checkpoint before the transition resumes to the weights of an
// uninterrupted run.
TEST_F(Elastic, ARankKilledDuringATransitionEndsEveryRank) {
  const std::string plan = write_plan(exec_plan(kDepth4TwoStages), dir_);
  auto train = [&](const std::string& fault, const std::string& ckpt, const std::string& extra) {
    return sh(fmt::format(
        "{} timeout -k 5 120 {}/pipetwin train --plan {} --nproc 2 --data synthetic "
        "--steps-per-epoch 4 --epochs 1 --float64 --seed 7 --lr 0.05 --momentum 0.9 --no-pin "
        "--timeout 10 -q --elastic --alpha 0.75 --freeze-interval 2step --freeze-rule bound "
        "--checkpoint-every 1 --checkpoint-dir {} --log {} {}",
        fault.empty() ? "" : "PIPETWIN_FAULT=" + fault, PIPETWIN_BINARY_DIR, plan,
        (dir_ / ckpt).string(), (dir_ / (ckpt + ".jsonl")).string(), extra));
  };
  const Outcome killed = train("kill@transition=2,rank=1", "killed", "");
  EXPECT_NE(killed.status, 0);
  EXPECT_THAT(killed.output, HasSubstr("rank 1 exited with status 137"));
  EXPECT_THAT(killed.output,
              HasSubstr("pipetwin: error: rank 0: elastic transition after step 2 (K 2 -> 1, dp "
                        "1 -> 2, frozen layers 0 -> 3): "));
  EXPECT_LT(killed.seconds, 60);
  EXPECT_EQ(exec::read_manifest((dir_ / "killed").string())->step, 1);
  Outcome o = train("", "killed", "--resume");
  ASSERT_EQ(o.status, 0) << o.output;
  o = train("", "whole", "");
  ASSERT_EQ(o.status, 0) << o.output;
  const auto resumed = checkpoint_state((dir_ / "killed").string(), 4);
  const auto whole = checkpoint_state((dir_ / "whole").string(), 4);
  ASSERT_EQ(resumed.size(), whole.size());
  for (const auto& [key, tensors] : whole) {
    EXPECT_TRUE(testing::all_equal(resumed.at(key), tensors)) << key.first << " " << key.second;
  }
}

// A rank lost in a transition with --on-rank-loss continue: the launcher starts the job again
// without it from the last checkpoint (step 1), the policy re-plans AutoDP for the 2 devices
// left (dp 3 -> 2), and training goes on to the end. The result is the training of a run that
// changed to those 2 replicas at step 1: an in-process run whose policy makes the same two
// transitions (the re-plan at step 1, the freeze at step 2) ends with the same weights and
// momentum. With the default (stop) the same loss ends the job.
TEST_F(Elastic, ALostRankContinuesOnFewerReplicasWhenConfigured) {
  const Plan p0 =
      exec_plan({.model = "vit:test,depth=4", .stages = 1, .chunks = 1, .micro_batch = 2, .dp = 3});
  const std::string plan = write_plan(p0, dir_);
  auto train = [&](const std::string& ckpt, const std::string& extra) {
    return sh(fmt::format(
        "PIPETWIN_FAULT=kill@transition=2,rank=2,restart=0 timeout -k 5 120 {}/pipetwin train "
        "--plan {} --nproc 3 --data synthetic --steps-per-epoch 4 --epochs 1 --float64 --seed 7 "
        "--lr 0.05 --momentum 0.9 --no-pin --timeout 10 --elastic --alpha 0.75 "
        "--freeze-interval 2step --freeze-rule bound --checkpoint-every 1 --checkpoint-dir {} "
        "--log {} {}",
        PIPETWIN_BINARY_DIR, plan, (dir_ / ckpt).string(), (dir_ / (ckpt + ".jsonl")).string(),
        extra));
  };
  const Outcome stopped = train("stop", "");
  EXPECT_NE(stopped.status, 0);
  EXPECT_THAT(stopped.output, HasSubstr("train: the 3-process job failed (exit status 137)"));
  EXPECT_THAT(stopped.output, Not(HasSubstr("continuing")));
  const Outcome out = train("continue", "--on-rank-loss continue");
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_THAT(out.output, HasSubstr("pipetwin: lost rank(s) 2; continuing on 2 processes from the "
                                    "checkpoint of step 1 (restart 1 of at most 3)"));
  EXPECT_THAT(out.output, HasSubstr("continuing on 2 of 3 ranks: 2 devices, K 1 -> 1, dp 3 -> 2"));
  EXPECT_LT(out.seconds, 90);
  EXPECT_EQ(exec::read_manifest((dir_ / "continue").string())->world, 2);

  exec::ElasticPolicy policy(p0, bound_every_two_steps());
  const exec::Transition two = policy.fewer_devices(2);
  ASSERT_EQ(two.plan.dp, 2);
  const exec::Transition frozen = policy.transition(policy.freeze_step());
  ASSERT_EQ(frozen.frozen_layers, 3);
  ASSERT_EQ(frozen.plan.dp, 2);
  exec::TrainOptions o = options(4, 1);
  o.checkpoint_dir = (dir_ / "reference").string();
  o.checkpoint_every_steps = 4;
  o.policy_interval_steps = 1;
  exec::Trainer t(p0, o);
  t.set_policy([&](const exec::Trainer&, int64_t step) -> std::optional<exec::Transition> {
    if (step == 1) return two;
    if (step == 2) return frozen;
    return std::nullopt;
  });
  t.run();
  const auto reference = checkpoint_state((dir_ / "reference").string(), 4);
  const auto continued = checkpoint_state((dir_ / "continue").string(), 4);
  ASSERT_EQ(continued.size(), reference.size());
  for (const auto& [key, tensors] : reference) {
    ASSERT_TRUE(continued.count(key)) << key.first << " " << key.second;
    EXPECT_EQ(continued.at(key).size(), 2u) << key.first;  // one copy per replica
    for (const auto& x : continued.at(key)) {
      EXPECT_LT(testing::max_relative_error({x}, {tensors.front()}), 1e-10)
          << key.first << " " << key.second;
    }
  }
}

// AutoPipe's all-frozen guard on the live path. The synthetic model has no head, so every one of
// its 4 layers can freeze: the alpha bound at alpha = 0.99 freezes 3 at the first freeze step (one
// active layer left: K 2 -> 1, dp 1 -> 2) and all 4 at the fifth (4 (1 - 0.01^5) rounds to 4).
// The policy refuses that transition with AutoPipe's one line and keeps its pipeline; a live run
// with a freeze step after every step stops there with the same line.
TEST_F(Elastic, AFreezeOfEveryLayerIsRefusedLive) {
  const Plan plan = exec_plan({.model = "uniform:layers=4,fwd_ms=0,bwd_ms=0,act_kb=1,param_kb=1",
                               .stages = 2,
                               .chunks = 2,
                               .micro_batch = 2});
  const exec::ElasticOptions e{
      .alpha = 0.99, .unit = elastic::FreezeUnit::kStep, .interval = 1, .gradient_norms = false};
  const std::string refused = "autopipe: all 4 layers frozen; a pipeline needs an active layer";
  exec::ElasticPolicy policy(plan, e);
  ASSERT_EQ(policy.freeze_step(), 3);
  const exec::Transition three = policy.transition(3);
  EXPECT_EQ(three.plan.num_stages(), 1);
  EXPECT_EQ(three.plan.dp, 2);
  for (int T = 2; T <= 4; ++T) ASSERT_EQ(policy.freeze_step(), 3) << T;
  ASSERT_EQ(policy.freeze_step(), 4);
  EXPECT_EQ(test::input_error([&] { policy.transition(4); }), refused);
  EXPECT_EQ(policy.K(), 1);
  EXPECT_EQ(policy.plan_for(3, 1).stages.at(0).layers, three.plan.stages.at(0).layers);
  EXPECT_EQ(test::input_error([&] { policy.plan_for(4, 1); }), refused);

  exec::TrainOptions o = options(8, 1);
  o.elastic = e;
  exec::Trainer t(plan, o);
  EXPECT_EQ(test::input_error([&] { t.run(); }), refused);
  EXPECT_EQ(t.step(), 5);
  EXPECT_EQ(t.frozen_layers(), 3);
  EXPECT_EQ(t.plan().dp, 2);
}

// In one process an injected throw in a transition is a RunFailure naming the transition.
TEST_F(Elastic, AFailedTransitionNamesItself) {
  const Plan pa = exec_plan({.model = "vit:test"});
  exec::TrainOptions o = options(4, 1);
  o.policy_interval_steps = 2;
  exec::Trainer t(pa, o);
  t.set_policy([&](const exec::Trainer&, int64_t) -> std::optional<exec::Transition> {
    return exec::Transition{pa, 1};
  });
  ::setenv("PIPETWIN_FAULT", "throw@transition=2", 1);
  try {
    t.run();
    ::unsetenv("PIPETWIN_FAULT");
    FAIL() << "the injected fault did not fire";
  } catch (const RunFailure& e) {
    ::unsetenv("PIPETWIN_FAULT");
    EXPECT_THAT(e.what(), HasSubstr("elastic transition after step 2 (K 2 -> 2, dp 1 -> 1, "
                                    "frozen layers 0 -> 1): injected fault "
                                    "(PIPETWIN_FAULT=throw@transition=2)"));
  }
}

// `pipetwin train --elastic` on bad flags: exit status 2 and one line naming the flag.
TEST_F(Elastic, TheCommandLineRefusesBadElasticFlags) {
  const std::string plan = write_plan(exec_plan({.model = "vit:test"}), dir_);
  const std::string cmd = fmt::format("{}/pipetwin train --log {} --no-pin -q ",
                                      PIPETWIN_BINARY_DIR, (dir_ / "log.jsonl").string());
  const testing::RefusedFlags cases = {
      {"--plan " + plan + " --elastic --alpha 1", "--alpha must be in (0, 1) (1 given)"},
      {"--plan " + plan + " --elastic --freeze-interval 3days",
       "--freeze-interval: expected N, Nepoch or Nstep with N positive, got \"3days\""},
      {"--plan " + plan + " --elastic --freeze-interval 0step",
       "--freeze-interval: expected N, Nepoch or Nstep with N positive, got \"0step\""},
      {"--plan " + plan + " --elastic --lambda-frozen 1/0",
       "--lambda-frozen: expected a number or a fraction like 1/6, got \"1/0\""},
      {"--plan " + plan + " --elastic --lambda-frozen 7/6", "--lambda-frozen must be in [0, 1]"},
      {"--plan " + plan + " --elastic --freeze-rule random",
       "--freeze-rule: expected eq1 or bound, got \"random\""},
      {"--plan " + plan + " --alpha 0.5", "--alpha requires --elastic"},
      {"--plan " + plan + " --on-rank-loss retry",
       "--on-rank-loss: expected stop or continue, got \"retry\""},
      {"--plan " + plan + " --on-rank-loss continue --checkpoint-dir " + (dir_ / "c").string(),
       "--on-rank-loss continue: needs --elastic (the policy re-plans for fewer replicas) and "
       "--checkpoint-dir (the state to continue from)"},
      {"--plan " + plan + " --max-restarts -1", "--max-restarts must not be negative (-1 given)"}};
  testing::expect_refused(cmd, cases);
}

}  // namespace
}  // namespace pipetwin
