// Faults in the executor: `pipetwin train` on 2 processes over c10d Gloo on 127.0.0.1,
// with PIPETWIN_FAULT injecting a stage that throws, a rank killed with SIGKILL, a rank that
// stops answering, a full disk while checkpointing and a kill between the rank files and the
// manifest. Each ends the run on every rank with a one-line error within a bounded time, and
// leaves the previous checkpoint readable: resuming from it reproduces, bit for bit, the weights
// and optimizer state of an uninterrupted run (which 2 processes and 1 process give alike).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "exec/runtime/fault.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/trainer.hpp"
#include "exec_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Outcome;
using testing::sh;

// The digits on an MLP split over the two processes (every activation, gradient and evaluation
// batch crosses them): 480 samples a step, so an epoch is 2 steps and the runs below cross
// epochs (evaluation, a new data order) and checkpoint inside one (at step 3).
Plan two_stage_plan() {
  testing::ExecSpec s;
  s.model = "mlp";
  s.stages = 2;
  s.chunks = 4;
  s.micro_batch = 120;
  return testing::exec_plan(s);
}

class TrainFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ =
        new fs::path(fs::temp_directory_path() / ("pipetwin-faults-" + std::to_string(::getpid())));
    test::remove_tree(*root_);
    fs::create_directories(*root_);
    save_plan(two_stage_plan(), (*root_ / "plan.json").string());
    // The uninterrupted run every test compares with, in this process (the same options as
    // train() below): activations cross processes bit for bit, so 2 processes give its numbers.
    exec::TrainOptions o;
    o.exec.seed = 7;
    o.exec.optimizer.lr = 0.05;
    o.exec.optimizer.momentum = 0.9;
    o.exec.pin_threads = false;
    o.exec.data = "digits";
    o.epochs = 100;
    o.max_steps = 6;
    o.checkpoint_every_steps = 3;
    o.checkpoint_dir = (*root_ / "reference").string();
    exec::Trainer(two_stage_plan(), o).run();
    uninterrupted_ = new std::vector<at::Tensor>(checkpoint_tensors("reference", 6));
  }
  static void TearDownTestSuite() {
    test::remove_tree(*root_);
    delete root_;
    delete uninterrupted_;
  }

  // A bounded `pipetwin train` of the plan on 2 processes into checkpoint folder `name`.
  static std::string train(const std::string& fault, const std::string& name,
                           const std::string& extra, int timeout_s = 20) {
    const std::string env = fault.empty() ? "" : "PIPETWIN_FAULT=" + fault + " ";
    return fmt::format(
        "{}timeout -k 5 150 {}/pipetwin train --plan {} --nproc 2 --data digits --epochs 100 "
        "--seed 7 --lr 0.05 --momentum 0.9 --no-pin --timeout {} -q --checkpoint-every 3 "
        "--checkpoint-dir {} --log {} {}",
        env, PIPETWIN_BINARY_DIR, (*root_ / "plan.json").string(), timeout_s,
        (*root_ / name).string(), (*root_ / (name + ".jsonl")).string(), extra);
  }
  // Every tensor of the checkpoint in folder `name`, which must be the one of `step`.
  static std::vector<at::Tensor> checkpoint_tensors(const std::string& name, int64_t step) {
    const std::string dir = (*root_ / name).string();
    const auto m = exec::read_manifest(dir);
    EXPECT_TRUE(m.has_value());
    if (!m) return {};
    EXPECT_EQ(m->step, step);
    std::vector<at::Tensor> out;
    for (int r = 0; r < m->world; ++r) {
      for (const auto& st : exec::read_rank_file(dir, *m, r).stages) {
        for (const auto& t : st.tensors) out.push_back(t.value);
      }
    }
    return out;
  }
  // Resumes folder `name` (whose manifest must name `from`) to step 6 and compares.
  static void expect_resume_reproduces(const std::string& name, int64_t from) {
    EXPECT_EQ(exec::read_manifest((*root_ / name).string())->step, from);
    const Outcome o = sh(train("", name, "--max-steps 6 --resume"));
    ASSERT_EQ(o.status, 0) << o.output;
    EXPECT_TRUE(testing::all_equal(checkpoint_tensors(name, 6), *uninterrupted_));
  }

  static fs::path* root_;
  static std::vector<at::Tensor>* uninterrupted_;
};

fs::path* TrainFaults::root_ = nullptr;
std::vector<at::Tensor>* TrainFaults::uninterrupted_ = nullptr;

TEST_F(TrainFaults, ResumingInNewProcessesIsBitForBit) {
  const Outcome whole = sh(train("", "whole", "--max-steps 6"));
  ASSERT_EQ(whole.status, 0) << whole.output;
  EXPECT_TRUE(testing::all_equal(checkpoint_tensors("whole", 6), *uninterrupted_));
  const Outcome o = sh(train("", "split", "--max-steps 3"));
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_FALSE(testing::all_equal(checkpoint_tensors("split", 3), *uninterrupted_));
  expect_resume_reproduces("split", 3);
}

TEST_F(TrainFaults, AStageThatThrowsEndsTheRunOnEveryRank) {
  const Outcome o = sh(train("throw@step=4,rank=1", "throw", "--max-steps 6"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("rank 1: device 1 compute stream, action"));
  EXPECT_THAT(o.output, HasSubstr("injected fault (PIPETWIN_FAULT=throw@step=4,rank=1)"));
  EXPECT_THAT(o.output, HasSubstr("pipetwin: error: rank 0:"));  // the survivor's own error
  EXPECT_LT(o.seconds, 60);
  expect_resume_reproduces("throw", 3);
}

TEST_F(TrainFaults, ARankKilledMidRunThenResume) {
  const Outcome o = sh(train("kill@step=4,rank=1", "kill", "--max-steps 6"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("rank 1 exited with status 137"));
  EXPECT_THAT(o.output, HasSubstr("pipetwin: error: rank 0:"));
  EXPECT_LT(o.seconds, 60);
  expect_resume_reproduces("kill", 3);
}

TEST_F(TrainFaults, ARankThatStopsAnsweringTimesOut) {
  const Outcome o = sh(train("hang@step=4,rank=1", "hang", "--max-steps 6", 5));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("pipetwin: error: rank 0:"));
  EXPECT_LT(o.seconds, 60);
  expect_resume_reproduces("hang", 3);
}

// The disk fills while rank 1 writes its file of step 6: every rank stops with the failing
// rank's error, the manifest still names step 3, and its files still load.
TEST_F(TrainFaults, AFullDiskOnOneRankStopsEveryRank) {
  const Outcome o = sh(train("diskfull@checkpoint=6,rank=1", "full", "--max-steps 6"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output,
              HasSubstr("rank 1: checkpoint at step 6 (the one of step 3 stays) failed: "));
  EXPECT_THAT(o.output, HasSubstr("step-00000006.rank1.pt: write failed: File too large"));
  EXPECT_THAT(o.output, HasSubstr("rank 0: checkpoint at step 6 (the one of step 3 stays) failed "
                                  "on rank 1: "));
  EXPECT_LT(o.seconds, 60);
  EXPECT_FALSE(fs::exists(*root_ / "full" / "step-00000006.rank1.pt"));
  expect_resume_reproduces("full", 3);
}

// Killed after both rank files of step 6 are durable, before the manifest: the manifest still
// names step 3; the orphaned files are ignored and later removed.
TEST_F(TrainFaults, AKillBetweenTheRankFilesAndTheManifest) {
  const Outcome o = sh(train("kill@checkpoint=6,rank=0", "torn", "--max-steps 6"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("rank 0 exited with status 137"));
  EXPECT_LT(o.seconds, 60);
  EXPECT_TRUE(fs::exists(*root_ / "torn" / "step-00000006.rank1.pt"));
  expect_resume_reproduces("torn", 3);
  EXPECT_FALSE(fs::exists(*root_ / "torn" / "step-00000003.rank1.pt"));
}

TEST_F(TrainFaults, AMalformedFaultSpecIsAnInputError) {
  const Outcome o = sh(train("explode@step=1", "bad", "--max-steps 1"));
  EXPECT_EQ(o.status, 1);  // the launcher's job failed; each rank exited with 2
  EXPECT_THAT(o.output, HasSubstr("PIPETWIN_FAULT: mode \"explode\""));
}

// restart=N arms a fault only in the job started after N restarts (PIPETWIN_RESTART_COUNT, set
// by the launcher of --on-rank-loss continue; unset means the first job).
TEST(FaultSpec, RestartArmsOnlyThatJob) {
  ::unsetenv("PIPETWIN_RESTART_COUNT");
  EXPECT_TRUE(exec::Fault::parse("kill@transition=2,restart=0").armed());
  EXPECT_FALSE(exec::Fault::parse("kill@transition=2,restart=1").armed());
  ::setenv("PIPETWIN_RESTART_COUNT", "1", 1);
  EXPECT_FALSE(exec::Fault::parse("kill@transition=2,restart=0").armed());
  EXPECT_TRUE(exec::Fault::parse("kill@transition=2,restart=1").armed());
  EXPECT_TRUE(exec::Fault::parse("kill@transition=2").armed());
  ::unsetenv("PIPETWIN_RESTART_COUNT");
}

}  // namespace
}  // namespace pipetwin
