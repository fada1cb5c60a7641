// The training loop (exec/train/trainer.hpp, baseline mode): windows of a long run change no
// arithmetic, the per-epoch log and the freeze trace say what happened, loss falls and held-out
// accuracy rises on the digits, and the elastic hook carries weights and optimizer state into a
// new partition.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/elastic/epoch_log.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "core/error.hpp"
#include "exec/train/trainer.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;
using testing::exec_plan;
using testing::ExecSpec;
using ::testing::HasSubstr;

class TrainLoop : public test::TempDirTest {
 protected:
  // float32 (bit-for-bit claims are about the dtype people train in), synthetic data.
  exec::TrainOptions options(int steps_per_epoch, int epochs) const {
    exec::TrainOptions o =
        testing::synthetic_train_options(steps_per_epoch, epochs, dir_ / "log.jsonl");
    o.exec.float64 = false;
    return o;
  }
  static std::vector<at::Tensor> flat(const exec::TrainResult& r, int stages, int replica = 0) {
    std::vector<at::Tensor> out;
    for (int s = 0; s < stages; ++s) {
      for (const auto& t : r.parameters.at({replica, s})) out.push_back(t);
    }
    return out;
  }
};

// A trainer runs the schedule window by window with evaluation in between; a synchronous
// schedule's windows change nothing: the weights are those of `pipetwin run` over the same
// steps, bit for bit.
TEST_F(TrainLoop, WindowsOfASynchronousScheduleEqualOneRun) {
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    ExecSpec s;
    s.schedule = schedule;
    s.stages = 3;
    s.chunks = 2;
    s.model = "vit:test,dropout=0.2";
    const Plan plan = exec_plan(s);
    exec::TrainOptions o = options(2, 3);  // windows of 2 steps, 6 steps
    const exec::TrainResult r = exec::Trainer(plan, o).run();
    exec::ExecOptions e = o.exec;
    e.iterations = 6;
    const exec::ExecResult one = exec::execute_plan(plan, e);
    EXPECT_TRUE(testing::all_equal(flat(r, 3), testing::executor_parameters(one, 3))) << schedule;
    EXPECT_EQ(r.steps, 6);
  }
}

// An asynchronous schedule drains at window ends, so the trainer keeps windows at epochs: an
// epoch is one run of the schedule.
TEST_F(TrainLoop, AnAsynchronousScheduleRunsAnEpochPerWindow) {
  ExecSpec s;
  s.schedule = "pipedream";
  s.stages = 3;
  const Plan plan = exec_plan(s);
  const exec::TrainResult r = exec::Trainer(plan, options(4, 1)).run();
  exec::ExecOptions e = options(4, 1).exec;
  e.iterations = 4;
  EXPECT_TRUE(
      testing::all_equal(flat(r, 3), testing::executor_parameters(exec::execute_plan(plan, e), 3)));
  exec::TrainOptions bad = options(4, 2);
  bad.checkpoint_dir = (dir_ / "ck").string();
  bad.checkpoint_every_steps = 3;
  try {
    exec::Trainer(plan, bad);
    FAIL() << "a checkpoint inside an epoch of an asynchronous schedule was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("schedule pipedream is asynchronous"));
  }
}

TEST_F(TrainLoop, LossFallsAndHeldOutAccuracyRisesOnTheDigits) {
  ExecSpec s;
  s.model = "mlp";
  s.stages = 2;
  s.chunks = 4;
  s.micro_batch = 8;  // 32 samples a step: 44 steps an epoch of 1437 training samples
  const Plan plan = exec_plan(s);
  exec::TrainOptions o = options(0, 3);
  o.exec.data = "digits";
  o.exec.optimizer.lr = 0.05;
  o.lr_decay = 0.5;
  o.lr_decay_every = 2;
  o.epoch_log = (dir_ / "epochs.json").string();
  o.freeze_trace = (dir_ / "freeze.json").string();
  const exec::TrainResult r = exec::Trainer(plan, o).run();
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_EQ(r.steps, 3 * 44);
  for (size_t e = 0; e < 3; ++e) {
    const auto& x = r.epochs[e];
    EXPECT_EQ(x.epoch, static_cast<int>(e));
    EXPECT_EQ(x.step, static_cast<int64_t>(44 * (e + 1)));
    EXPECT_EQ(x.steps, 44);
    EXPECT_EQ(x.samples, 44 * 32);
    EXPECT_EQ(x.K, 2);
    EXPECT_EQ(x.dp, 1);
    EXPECT_EQ(x.M, 4);
    EXPECT_EQ(x.frozen_layers, 0);
    EXPECT_DOUBLE_EQ(x.lr, e < 2 ? 0.05 : 0.025);  // StepLR: halved every 2 epochs
    EXPECT_GT(x.samples_per_s, 0);
    EXPECT_GE(x.wall_s, x.train_s);
    ASSERT_TRUE(x.eval_accuracy.has_value());
  }
  EXPECT_LT(r.epochs[2].train_loss, r.epochs[0].train_loss);
  EXPECT_LT(r.epochs[2].eval_loss, std::log(10.0));  // below chance's cross entropy
  EXPECT_GT(*r.epochs[2].eval_accuracy, 0.8);        // chance: 0.1
  // The log: one JSON line per epoch with the same figures.
  std::ifstream in(o.log);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const Json j = parse_json_text(line, o.log);
    const auto x = exec::EpochReport::from_json(JsonView(j, o.log));
    EXPECT_EQ(x.step, r.epochs[static_cast<size_t>(lines)].step);
    EXPECT_EQ(x.eval_accuracy, r.epochs[static_cast<size_t>(lines)].eval_accuracy);
    ++lines;
  }
  EXPECT_EQ(lines, 3);
  // The shared formats load back: the elastic log, and a freeze trace that stays at 0.
  const auto log = elastic::load_epoch_log(o.epoch_log);
  ASSERT_EQ(log.epochs.size(), 3u);
  EXPECT_EQ(log.source, "measured");
  EXPECT_EQ(log.epochs[1].K, 2);
  EXPECT_EQ(log.epochs[1].samples, 44 * 32);
  for (const auto& e : log.epochs) {  // the row as the replay closes it (epoch_log.hpp)
    EXPECT_GT(e.compute_s, 0);
    EXPECT_DOUBLE_EQ(e.time_s, e.compute_s + e.transition_s);
    EXPECT_DOUBLE_EQ(e.throughput_samples_per_s, static_cast<double>(e.samples) / e.time_s);
  }
  const auto trace = elastic::load_freeze_trace(o.freeze_trace);
  ASSERT_EQ(trace.events.size(), 1u);
  EXPECT_EQ(trace.events[0].frozen_layers, 0);
  EXPECT_EQ(trace.frozen_at(2, 0), 0);
}

// The elastic hook: after 2 steps on a 2-stage plan the policy moves training to a 3-stage plan
// with another partition and M. Weights and momentum carry over by layer name, so the run ends
// where 4 steps on the new plan from the start end (plain mini-batch SGD either way).
TEST_F(TrainLoop, ATransitionToAnotherPartitionKeepsWeightsAndOptimizerState) {
  ExecSpec a, b;
  a.stages = 2;
  a.chunks = 4;
  a.micro_batch = 2;
  b.stages = 3;
  b.chunks = 2;
  b.micro_batch = 4;
  const Plan pa = exec_plan(a), pb = exec_plan(b);
  exec::TrainOptions o = options(4, 1);
  o.exec.float64 = true;
  o.policy_interval_steps = 2;
  exec::Trainer t(pa, o);
  int asked = 0;
  t.set_policy([&](const exec::Trainer& tr, int64_t step) -> std::optional<exec::Transition> {
    ++asked;
    EXPECT_EQ(step, 2);
    EXPECT_EQ(tr.plan().num_stages(), 2);
    return exec::Transition{pb, 0};
  });
  const exec::TrainResult r = t.run();
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(t.plan().num_stages(), 3);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_EQ(r.epochs[0].K, 3);
  const exec::TrainResult direct = exec::Trainer(pb, o).run();
  EXPECT_LT(testing::max_relative_error(flat(r, 3), flat(direct, 3)), 1e-12);
  // The momentum buffers matter here (so the equality above checks that they moved too).
  exec::TrainOptions fresh = o;
  fresh.exec.optimizer.momentum = 0;
  EXPECT_GT(testing::max_relative_error(flat(direct, 3), flat(exec::Trainer(pb, fresh).run(), 3)),
            1e-6);
}

// A transition may freeze more layers, never fewer (layers do not thaw).
TEST_F(TrainLoop, ATransitionThatThawsIsRefused) {
  ExecSpec a;
  a.model = "vit:test";
  const Plan pa = exec_plan(a);
  exec::TrainOptions o = options(2, 3);
  exec::Trainer t(pa, o);
  int asked = 0;
  t.set_policy([&](const exec::Trainer&, int64_t) -> std::optional<exec::Transition> {
    return exec::Transition{pa, ++asked == 1 ? 1 : 0};
  });
  try {
    t.run();
    FAIL() << "a transition from 1 frozen layer to 0 was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("frozen_layers must be in 1..2 (layers do not thaw; 0 given)"));
  }
  EXPECT_EQ(t.frozen_layers(), 1);
}

TEST_F(TrainLoop, OptionsAreValidated) {
  const Plan plan = exec_plan(ExecSpec{});
  exec::TrainOptions o = options(2, 0);
  EXPECT_THROW(exec::Trainer(plan, o), InputError);  // --epochs 0
  o = options(2, 1);
  o.checkpoint_every_steps = 2;  // without a folder
  EXPECT_THROW(exec::Trainer(plan, o), InputError);
  o = options(2, 1);
  o.exec.data = "imagenet";
  try {
    exec::Trainer(plan, o);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--data: expected digits, digits-tokens or synthetic"));
  }
}

// `pipetwin train` on bad flags: exit status 2 and one line naming the flag.
TEST_F(TrainLoop, TheCommandLineRefusesBadFlags) {
  const std::string plan = testing::write_plan(exec_plan(ExecSpec{}), dir_);
  const std::string cmd = fmt::format("{}/pipetwin train --plan {} --log {} --no-pin -q ",
                                      PIPETWIN_BINARY_DIR, plan, (dir_ / "log.jsonl").string());
  const testing::RefusedFlags cases = {
      {"--checkpoint-dir x --checkpoint-every often",
       "--checkpoint-every: expected a positive number of steps or \"epoch\", got \"often\""},
      {"--resume", "--checkpoint-every and --resume need --checkpoint-dir"},
      {"--epochs 0", "--epochs must be positive"},
      {"--data cifar", "--data: expected digits, digits-tokens or synthetic, got \"cifar\""},
      {"--lr-decay 2", "--lr-decay must be in (0, 1]"}};
  testing::expect_refused(cmd, cases, "pipetwin: error: ");
}

}  // namespace
}  // namespace pipetwin
