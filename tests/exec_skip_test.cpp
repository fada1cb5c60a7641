// Cross-layer skip connections in the executor (a tensor that skips stages travels once,
// straight from producer to consumer, as torchgpipe's portals carry it, in both engines; the
// executor runs every partition the partitioners produce). The model is the U-Net of
// models/unet.hpp at test size: 23 layers, encoder level i's last block (layer 2i + 1) feeding
// decoder block 20 - 2i.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "exec/platform/tensor_io.hpp"
#include "exec/profile/profiler.hpp"
#include "exec/runtime/bundle.hpp"
#include "exec/runtime/stage_io.hpp"
#include "exec_test_util.hpp"
#include "sim/planner.hpp"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;
using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;
using ::testing::HasSubstr;
using testing::max_relative_error;

const char* kUNet = "unet:B=2,C=4,image=32,norm=group";

// skip_from of the test U-Net's 23 layers.
std::vector<int> unet_skips() {
  std::vector<int> skip(23, -1);
  for (int i = 0; i < 5; ++i) skip[static_cast<size_t>(20 - 2 * i)] = 2 * i + 1;
  return skip;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> out;
  for (int l = begin; l < end; ++l) out.push_back(l);
  return out;
}

// ---- which tensors cross which stage edges ---------------------------------------------------

TEST(StageGraph, ASkipTravelsStraightToItsConsumersStage) {
  const exec::StageGraph g(unet_skips(), {range(0, 8), range(8, 16), range(16, 23)});
  // Stage 0 -> 2 carries encoder levels 0..2 (layers 1, 3, 5) past stage 1, which never sees
  // them; layer 7 feeds layers 8 and 14 of stage 1 and crosses once.
  EXPECT_THAT(g.tensors(0, 1), ElementsAre(7));
  EXPECT_THAT(g.tensors(0, 2), ElementsAre(1, 3, 5));
  EXPECT_THAT(g.tensors(1, 2), ElementsAre(15));
  EXPECT_TRUE(g.tensors(2, 0).empty());
  EXPECT_THAT(g.io(1).inputs, ElementsAre(7));
  EXPECT_THAT(g.io(2).inputs, ElementsAre(1, 3, 5, 15));
  EXPECT_THAT(g.io(0).inputs, ElementsAre(exec::kModelInput));
  EXPECT_THAT(g.io(0).outputs, ElementsAre(1, 3, 5, 7));
  EXPECT_TRUE(g.io(0).first && !g.io(0).last && g.io(2).last);
  EXPECT_EQ(g.edges().size(), 3u);
  EXPECT_THAT(g.data_order(), ElementsAre(0, 1, 2));
}

TEST(StageGraph, NonContiguousStagesAndBadPartitions) {
  // FTPipe-style: the outer U-Net levels on stage 0, the inner ones on stage 1.
  const exec::StageGraph g(unet_skips(), {{0, 1, 20, 21, 22}, range(2, 20)});
  EXPECT_THAT(g.tensors(0, 1), ElementsAre(1));
  EXPECT_THAT(g.tensors(1, 0), ElementsAre(19));
  EXPECT_THROW(g.data_order(), std::invalid_argument);  // 0 -> 1 -> 0: a cycle
  EXPECT_THROW(exec::StageGraph(unet_skips(), {range(0, 10), range(9, 23)}), std::invalid_argument);
  EXPECT_THROW(exec::StageGraph(unet_skips(), {range(0, 10), range(11, 23)}),
               std::invalid_argument);
}

TEST(Bundle, PacksSeveralTensorsIntoOneMessageAndBack) {
  const std::vector<at::Tensor> ts = {at::randn({2, 3}, at::kDouble),
                                      at::randn({2, 4, 2}, at::kDouble)};
  const at::Tensor packed = exec::pack_bundle(ts);
  EXPECT_EQ(packed.dim(), 1);
  EXPECT_EQ(packed.numel(), 6 + 16);
  const auto back = exec::unpack_bundle(
      packed, {at::empty({2, 3}, at::kDouble), at::empty({2, 4, 2}, at::kDouble)});
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[0].equal(ts[0]));
  EXPECT_TRUE(back[1].equal(ts[1]));
  EXPECT_TRUE(exec::pack_bundle({ts[1]}).equal(ts[1]));  // one tensor goes as it is
  EXPECT_THROW(exec::pack_bundle({ts[0], at::zeros({2}, at::kLong)}), std::invalid_argument);
  EXPECT_THROW(exec::unpack_bundle(packed, {at::empty({2, 3}, at::kDouble)}).at(0).view({5}),
               std::exception);
  EXPECT_THROW(
      exec::unpack_bundle(packed.narrow(0, 0, 5), {at::empty({2, 3}), at::empty({2, 4, 2})}),
      std::invalid_argument);
}

// ---- training equals single-process training -----------------------------------------------

struct SkipCase {
  std::string schedule;
  int stages, chunks, dp;
  Checkpoint checkpoint;
};

class SkipEqualsSingleProcess : public ::testing::TestWithParam<SkipCase> {};

TEST_P(SkipEqualsSingleProcess, SameWeightsAfterSeveralSteps) {
  const SkipCase c = GetParam();
  const ExecSpec s{.model = kUNet,
                   .schedule = c.schedule,
                   .stages = c.stages,
                   .chunks = c.chunks,
                   .micro_batch = 2,
                   .dp = c.dp,
                   .checkpoint = c.checkpoint};
  const Plan plan = exec_plan(s);
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const auto reference = testing::plain_training(plan, opt, 3);
  for (int replica = 0; replica < c.dp; ++replica) {
    EXPECT_LT(max_relative_error(testing::executor_parameters(r, c.stages, replica), reference),
              1e-9);
  }
  const auto initial = models::build_model(plan.model, at::kDouble, opt.seed).parameters();
  EXPECT_GT(max_relative_error(reference, initial), 1e-3);
  // One message per stage edge, micro-batch and direction: the skips did not add transfers.
  const exec::StageGraph g(models::build_model(kUNet).skip_sources(), [&] {
    std::vector<std::vector<int>> layers;
    for (const auto& st : plan.stages) layers.push_back(st.layers);
    return layers;
  }());
  int sends = 0;
  for (const auto& e : r.timeline.events) sends += e.action.op == Op::kSend;
  EXPECT_EQ(sends, static_cast<int>(g.edges().size()) * 2 * c.chunks * 3 * c.dp);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SkipEqualsSingleProcess,
                         ::testing::Values(SkipCase{"naive", 3, 2, 1, Checkpoint::kNone},
                                           SkipCase{"gpipe", 3, 4, 1, Checkpoint::kNone},
                                           SkipCase{"gpipe", 3, 4, 1, Checkpoint::kExceptLast},
                                           SkipCase{"gpipe", 4, 2, 1, Checkpoint::kAlways},
                                           SkipCase{"1f1b", 4, 4, 1, Checkpoint::kNone},
                                           SkipCase{"1f1b", 3, 2, 2,
                                                    Checkpoint::kNone},  // per-layer backward
                                           SkipCase{"gpipe", 2, 2, 2, Checkpoint::kAlways}));

TEST(SkipAsync, AsynchronousSchedulesUseTheDeclaredVersions) {
  for (const char* schedule : {"pipedream", "ftpipe-async"}) {
    SCOPED_TRACE(schedule);
    ExecSpec s;
    s.model = kUNet;
    s.schedule = schedule;
    s.stages = 3;
    s.chunks = 2;
    testing::expect_declared_versions(exec_plan(s), 4);
  }
}

TEST(SkipMixedPipe, OuterLevelsShareADeviceAndHandTheSkipOverLocally) {
  // Stage 0 (encoder level 0) and stage 2 (decoder level 0 and the head) on device 0, the inner
  // levels on device 1: layer 1's output goes 0 -> 2 within device 0, with no transfer.
  ExecSpec s;
  s.model = kUNet;
  s.chunks = 3;
  const Plan plan = testing::mixed_plan(s, {range(0, 2), range(2, 20), range(20, 23)}, {0, 1, 0});
  const auto opt = float64_options(3);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  EXPECT_LT(
      max_relative_error(testing::executor_parameters(r, 3), testing::plain_training(plan, opt, 3)),
      1e-9);
  for (const auto& e : r.timeline.events) {
    if (e.action.op == Op::kSend) {
      EXPECT_NE(e.action.stage + e.action.peer_stage, 2) << describe(e.action);
    }
  }
}

// What the graph partitioners make of the U-Net runs: METIS cuts it into five stages alternating
// between the two devices (encoder features cross two stages), pipedream-dp replicates it.
TEST(SkipPartitioners, EveryPartitionersPlanEqualsSingleProcess) {
  for (const char* partitioner : {"metis", "mixed-pipe", "pipedream-dp", "balance-time"}) {
    SCOPED_TRACE(partitioner);
    const Plan plan = sim::make_plan(
        testing::local_cpu_request(kUNet, testing::profile_of(kUNet), "gpipe", partitioner));
    const auto opt = float64_options(2);
    const exec::ExecResult r = exec::execute_plan(plan, opt);
    EXPECT_LT(max_relative_error(testing::executor_parameters(r, plan.num_stages()),
                                 testing::plain_training(plan, opt, 2)),
              1e-9);
  }
}

// ---- plans that do not match the model -------------------------------------------------------

TEST(SkipPlanChecks, AProfileWithoutTheSkipEdgesIsRefused) {
  ExecSpec s;
  s.model = kUNet;
  Plan plan = exec_plan(s);
  plan.profile.edges.clear();  // a chain
  try {
    exec::execute_plan(plan, float64_options(1));
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan: profile.edges: no edge 1 -> 20, but model unet"));
  }
}

TEST(SkipPlanChecks, FreezingBelowASkipSourceIsRefused) {
  ExecSpec s;
  s.model = kUNet;
  Plan plan = exec_plan(s);
  plan.frozen_layers = 4;
  try {
    exec::execute_plan(plan, float64_options(1));
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("plan: frozen_layers: 4, but layer 18 (dec1.conv0) reads frozen "
                          "layer 3 through a skip connection"));
  }
}

// ---- profile -> plan -> run -------------------------------------------------------------------

TEST(SkipProfile, TheProfilerNamesTheSkipEdgesAndItsPlanRuns) {
  exec::ProfileOptions o;
  o.micro_batches = {2};
  o.repeats = 1;
  o.warmup = 0;
  o.contention = false;
  o.float64 = true;
  const Profile p = exec::profile_model(kUNet, o);
  ASSERT_EQ(p.num_layers(), 23);
  std::set<std::pair<int, int>> edges;
  for (const auto& e : p.edges) {
    edges.insert({e.from, e.to});
    EXPECT_DOUBLE_EQ(e.bytes_per_sample,
                     p.layers[static_cast<size_t>(e.from)].output_bytes_per_sample);
  }
  EXPECT_EQ(edges.size(), 22u + 5u);
  EXPECT_TRUE(edges.count({1, 20}));
  // Encoder level 0's output: 4 channels of 32 x 32 doubles per sample.
  EXPECT_DOUBLE_EQ(p.layers[1].output_bytes_per_sample, 4 * 32 * 32 * 8);
  EXPECT_GT(p.layers[20].timings.at(0).backward_s, 0);
  // The decoder block's backward holds its concatenation's gradient: measured, above its inputs'.
  EXPECT_GT(p.layers[20].backward_bytes_per_sample,
            p.layers[19].output_bytes_per_sample + p.layers[1].output_bytes_per_sample);

  const sim::PlanRequest q = testing::local_cpu_request(kUNet, p, "1f1b", "optimal");
  const Plan plan = sim::make_plan(q);
  const auto opt = float64_options(2);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, plan.num_stages()),
                               testing::plain_training(plan, opt, 2)),
            1e-9);
}

// ---- training runs and processes --------------------------------------------------------------

class SkipTraining : public test::TempDirTest {
 protected:
  Plan plan(int stages) const {
    ExecSpec s;
    s.model = kUNet;
    s.stages = stages;
    s.chunks = 2;
    return exec_plan(s);
  }
  // Held-out loss per epoch of an in-process training run of 2 epochs of 2 steps.
  std::vector<double> eval_losses(const Plan& p, const std::string& name) const {
    const exec::TrainResult r =
        exec::Trainer(p, testing::synthetic_train_options(2, 2, dir_ / (name + ".jsonl"))).run();
    std::vector<double> out;
    for (const auto& e : r.epochs) out.push_back(e.eval_loss);
    return out;
  }
};

TEST_F(SkipTraining, EvaluationThroughStagesEqualsOneStage) {
  // The trainer evaluates through the stages, the skips crossing stage edges as in training.
  const auto one = eval_losses(plan(1), "one"), three = eval_losses(plan(3), "three");
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(three.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_GT(one[e], 0);
    EXPECT_NEAR(three[e], one[e], 1e-9 * one[e]) << "epoch " << e;
  }
}

TEST_F(SkipTraining, TwoProcessesRunAndTrainAsOneDoes) {
  // Three stages on two ranks: the encoder's features cross processes on edges 0 -> 2 and 1 -> 2.
  const Plan p = plan(3);
  const std::string path = testing::write_plan(p, dir_);
  const std::string common = fmt::format(
      "--nproc 2 --float64 --seed 7 --optimizer sgd --lr 0.05 --momentum 0.9 --no-pin "
      "--timeout 20 -q",
      path);
  testing::Outcome o = testing::sh(fmt::format(
      "timeout -k 5 120 {}/pipetwin run --plan {} {} --iterations 3 --save-parameters {}",
      PIPETWIN_BINARY_DIR, path, common, (dir_ / "weights").string()));
  ASSERT_EQ(o.status, 0) << o.output;
  std::vector<at::Tensor> got;
  for (int s = 0; s < 3; ++s) {
    for (auto& t :
         exec::load_tensors((dir_ / "weights" / fmt::format("replica0_stage{}.pt", s)).string()))
      got.push_back(t);
  }
  EXPECT_LT(max_relative_error(got, testing::plain_training(p, float64_options(3), 3)), 1e-9);

  const std::string log = (dir_ / "gloo.jsonl").string();
  o = testing::sh(fmt::format(
      "timeout -k 5 120 {}/pipetwin train --plan {} {} --data synthetic --steps-per-epoch 2 "
      "--epochs 2 --log {}",
      PIPETWIN_BINARY_DIR, path, common, log));
  ASSERT_EQ(o.status, 0) << o.output;
  std::vector<double> gloo;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) gloo.push_back(nlohmann::json::parse(line).at("eval_loss").get<double>());
  }
  const auto local = eval_losses(p, "local");
  ASSERT_EQ(gloo.size(), local.size());
  for (size_t e = 0; e < local.size(); ++e) EXPECT_NEAR(gloo[e], local[e], 1e-9 * local[e]);
}

}  // namespace
}  // namespace pipetwin
