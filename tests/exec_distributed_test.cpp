// Multi-process runs over c10d Gloo on 127.0.0.1: `pipetwin run
// --nproc N` gives the weights of single-process training, also for a Mixed-pipe plan,
// and a rank that dies or stops answering ends the job with an error on every rank within a
// bounded time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "exec/platform/tensor_io.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;
using testing::ExecSpec;
using ::testing::HasSubstr;

using testing::Outcome;
using testing::sh;
using testing::write_plan;

class Distributed : public test::TempDirTest {
 protected:
  std::string run_command(const std::string& plan, int nproc, int iterations,
                          const std::string& extra = "") {
    return fmt::format(
        "{}/pipetwin run --plan {} --nproc {} --iterations {} --float64 --seed 7 "
        "--optimizer sgd --lr 0.05 --momentum 0.9 --no-pin --timeout 20 -q "
        "--save-parameters {} {}",
        PIPETWIN_BINARY_DIR, plan, nproc, iterations, (dir_ / "weights").string(), extra);
  }
  std::vector<at::Tensor> weights(int replica, int stages) {
    std::vector<at::Tensor> out;
    for (int s = 0; s < stages; ++s) {
      for (auto& t : exec::load_tensors(
               (dir_ / "weights" / fmt::format("replica{}_stage{}.pt", replica, s)).string())) {
        out.push_back(t);
      }
    }
    return out;
  }
  // Runs `plan` on `nproc` processes; both replicas must end with plain training's weights.
  void expect_single_process_weights(const Plan& plan, int nproc, int iterations) {
    const Outcome o = sh(run_command(write_plan(plan, dir_), nproc, iterations));
    ASSERT_EQ(o.status, 0) << o.output;
    const auto reference =
        testing::plain_training(plan, testing::float64_options(iterations), iterations);
    EXPECT_LT(testing::max_relative_error(weights(0, 2), reference), 1e-5);
    EXPECT_LT(testing::max_relative_error(weights(1, 2), reference), 1e-5);
  }
};

TEST_F(Distributed, TwoProcessGPipeWithDataParallelismEqualsSingleProcess) {
  ExecSpec s;
  s.stages = 2;
  s.chunks = 2;
  s.dp = 2;  // replica r on rank r: the all-reduce crosses processes
  expect_single_process_weights(testing::exec_plan(s), 2, 3);
}

TEST_F(Distributed, FourProcessesOneDeviceEach) {
  ExecSpec s;
  s.stages = 2;
  s.chunks = 2;
  s.dp = 2;  // every send, recv and all-reduce crosses processes
  s.schedule = "1f1b";
  expect_single_process_weights(testing::exec_plan(s), 4, 2);
}

TEST_F(Distributed, FourProcessesThreeOneStageReplicasAllReduceInTheirOwnGroup) {
  // PipeDream's "3-1" (PipelineShape::stage_replicas): stage 0 on ranks 0..2, each taking every
  // third micro-batch, its gradients summed over a Gloo subgroup of those three ranks; stage 1 on
  // rank 3. Every copy of stage 0 ends with single-process training's weights.
  const Plan plan = testing::three_one_plan("1f1b", 6);
  const Outcome o = sh(run_command(write_plan(plan, dir_), 4, 2));
  ASSERT_EQ(o.status, 0) << o.output;
  const auto reference = testing::plain_training(plan, testing::float64_options(2), 2);
  EXPECT_LT(testing::max_relative_error(weights(0, 2), reference), 1e-9);
  const std::vector<at::Tensor> stage0(reference.begin(),
                                       reference.begin() + static_cast<long>(weights(0, 1).size()));
  for (int k = 1; k < 3; ++k) {
    const auto copy = exec::load_tensors(
        (dir_ / "weights" / fmt::format("replica0_stage0_copy{}.pt", k)).string());
    EXPECT_LT(testing::max_relative_error(copy, stage0), 1e-9) << "copy " << k;
  }
}

TEST_F(Distributed, TwoProcessMixedPipeEqualsSingleProcess) {
  // A Mixed-pipe placement (FTPipe Section 4.1) over two processes: five stages on three devices,
  // device 0 hosting stages 0, 1 and 4 (rank 0), device 1 stage 3 (rank 0), device 2 stage 2
  // (rank 1); activations go 0 -> 0 (local), 0 -> 2 and 2 -> 1 across processes, 1 -> 0 within
  // rank 0.
  ExecSpec s;
  s.chunks = 2;
  const Plan plan = testing::mixed_plan(s, {{0}, {1}, {2}, {3}, {4}}, {0, 0, 2, 1, 0});
  ASSERT_EQ(exec::device_rank(2, 3, 2), 1);
  const Outcome o = sh(run_command(write_plan(plan, dir_), 2, 3));
  ASSERT_EQ(o.status, 0) << o.output;
  const auto reference = testing::plain_training(plan, testing::float64_options(3), 3);
  EXPECT_LT(testing::max_relative_error(weights(0, 5), reference), 1e-5);
}

TEST_F(Distributed, ARankThatDiesEndsTheJobEverywhere) {
  ExecSpec s;
  s.stages = 2;
  s.chunks = 4;
  const Plan plan = testing::exec_plan(s);
  const Outcome o =
      sh("PIPETWIN_FAULT=device=1,action=4,mode=exit " + run_command(write_plan(plan, dir_), 2, 3));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("rank 1 exited with status 3"));
  EXPECT_THAT(o.output, HasSubstr("rank 0:"));  // the survivor reports its own error
  EXPECT_LT(o.seconds, 45);
}

TEST_F(Distributed, ARankThatStopsAnsweringTimesOut) {
  ExecSpec s;
  s.stages = 2;
  s.chunks = 4;
  const Plan plan = testing::exec_plan(s);
  const std::string cmd = run_command(write_plan(plan, dir_), 2, 3);
  const Outcome o =
      sh("PIPETWIN_FAULT=device=1,action=4,mode=hang " + cmd.substr(0, cmd.find("--timeout")) +
         "--timeout 5" + cmd.substr(cmd.find("--timeout") + 12));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("rank 0:"));
  EXPECT_LT(o.seconds, 40);
}

}  // namespace
}  // namespace pipetwin
