// Tensor parallelism (models/tensor_parallel_model.hpp, exec/platform/tp_comm.hpp): the shards of
// a GPT-2 or BERT model, run by t threads over an in-process group, give the whole model's loss
// and the slices of its gradients; `pipetwin run --nproc 4` of a TP = 2 x PP = 2 plan (Gloo on
// 127.0.0.1) ends with the shards of single-process training's weights, with and without sequence
// parallelism, dropout on; refusals are one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <ATen/core/grad_mode.h>

#include "core/json_io.hpp"
#include "exec/platform/tensor_io.hpp"
#include "exec/platform/tp_comm.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec_test_util.hpp"
#include "models/dropout.hpp"
#include "models/tensor_parallel_model.hpp"

namespace pipetwin {
namespace {

using testing::ExecSpec;
using ::testing::HasSubstr;
using testing::Outcome;

constexpr const char* kGpt2 =
    "gpt2:tiny,layers=2,dim=32,heads=2,vocab=128,ctx=16,seq=16,dropout=0.1";
constexpr const char* kBert =
    "bert:tiny,layers=2,hidden=32,heads=2,ffn=64,vocab=128,positions=16,seq=16,dropout=0.1";

// A rank of a group that never communicates: slices weights (tensor_parallel_layers) only.
class RankOnly : public models::TpComm {
 public:
  RankOnly(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(at::Tensor&, Op) override { throw std::logic_error("RankOnly"); }
  at::Tensor all_gather(const at::Tensor&, int64_t) override { throw std::logic_error("RankOnly"); }
  at::Tensor reduce_scatter(const at::Tensor&, int64_t) override {
    throw std::logic_error("RankOnly");
  }

 private:
  int rank_, size_;
};

std::vector<at::Tensor> parameters_of(const std::vector<torch::nn::AnyModule>& modules) {
  std::vector<at::Tensor> out;
  for (const auto& m : modules) {
    for (const auto& p : m.ptr()->parameters()) out.push_back(p);
  }
  return out;
}

// Rank `rank`'s shards of `values` (one tensor per parameter of `model`, in its order) for layers
// `layers`: the model with its parameters set to `values`, sliced as a run slices its weights.
std::vector<at::Tensor> shards_of(models::LayeredModel model, const std::vector<at::Tensor>& values,
                                  const std::vector<int>& layers, int rank, int t, bool sp) {
  at::NoGradGuard no_grad;
  auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) params[i].copy_(values.at(i));
  return parameters_of(
      models::tensor_parallel_layers(model, layers, std::make_shared<RankOnly>(rank, t), sp));
}

std::vector<int> all_layers(const models::LayeredModel& m) {
  std::vector<int> out;
  for (size_t l = 0; l < m.layers.size(); ++l) out.push_back(static_cast<int>(l));
  return out;
}

// One forward and backward of the whole model, and of its t = 2 shards on two threads, under one
// dropout key: the losses agree and each rank's gradients are its slices of the whole's.
void expect_shards_match_whole(const std::string& name, bool sp) {
  constexpr int kT = 2;
  constexpr uint64_t kKey = 99;
  models::LayeredModel whole = models::build_model(name, at::kDouble, 3);
  const at::Tensor x = whole.synthetic_input(2, 5), target = whole.synthetic_target(2, 5);
  double whole_loss = 0;
  {
    models::DropoutKey key(kKey);
    const at::Tensor loss = whole.per_sample_loss(whole.forward(x), target).sum();
    loss.backward();
    whole_loss = loss.item<double>();
  }
  std::vector<at::Tensor> grads;
  for (const auto& p : whole.parameters()) grads.push_back(p.grad());
  auto group = std::make_shared<exec::InProcessTpGroup>(kT);
  std::vector<double> losses(kT);
  std::vector<std::vector<at::Tensor>> shard_grads(kT);
  std::vector<std::string> errors(kT);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kT; ++r) {
    ranks.emplace_back([&, r] {
      try {
        const models::LayeredModel fresh = models::build_model(name, at::kDouble, 3);
        auto comm = std::make_shared<exec::InProcessTpComm>(group, r);
        auto layers = models::tensor_parallel_layers(fresh, all_layers(fresh), comm, sp);
        models::DropoutKey key(kKey);
        at::Tensor y = x;
        for (auto& l : layers) y = l.forward(y);
        const at::Tensor loss = models::tensor_parallel_loss(fresh, y, target, *comm).sum();
        loss.backward();
        losses[r] = loss.item<double>();
        for (const auto& p : parameters_of(layers)) shard_grads[r].push_back(p.grad());
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kT; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_NEAR(losses[r], whole_loss, 1e-12 * std::abs(whole_loss)) << "rank " << r;
    const auto expected = shards_of(whole, grads, all_layers(whole), r, kT, sp);
    ASSERT_EQ(shard_grads[r].size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_TRUE(shard_grads[r][i].defined()) << "rank " << r << " gradient " << i;
      ASSERT_TRUE(expected[i].defined()) << "rank " << r << " expected " << i;
    }
    EXPECT_LT(testing::max_relative_error(shard_grads[r], expected), 1e-9) << "rank " << r;
  }
}

TEST(TensorParallelLayers, Gpt2ShardsGiveTheWholeModelsLossAndGradients) {
  expect_shards_match_whole(kGpt2, false);
}

TEST(TensorParallelLayers, Gpt2WithSequenceParallelism) {
  expect_shards_match_whole(kGpt2, true);
}

TEST(TensorParallelLayers, BertShardsGiveTheWholeModelsLossAndGradients) {
  expect_shards_match_whole(kBert, false);
}

TEST(TensorParallelLayers, BertWithSequenceParallelism) {
  expect_shards_match_whole(kBert, true);
}

TEST(TensorParallelLayers, VocabParallelCrossEntropyIsCrossEntropy) {
  // Two ranks, each holding half of 6 classes' logits; rows whose targets fall on either rank.
  const at::Tensor logits = at::randn({5, 6}, at::kDouble) * 4;
  const at::Tensor target = at::tensor(std::vector<int64_t>{0, 2, 3, 5, 4});
  const at::Tensor expected = at::cross_entropy_loss(logits, target, {}, at::Reduction::None);
  auto group = std::make_shared<exec::InProcessTpGroup>(2);
  std::vector<at::Tensor> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      exec::InProcessTpComm comm(group, r);
      got[r] = models::vocab_parallel_cross_entropy(logits.narrow(1, 3 * r, 3), target, comm);
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(at::allclose(got[0], expected, 1e-14, 1e-14));
  EXPECT_TRUE(at::equal(got[0], got[1]));
}

TEST(TensorParallelLayers, RefusesModelsWithoutTransformerLayersAndIndivisibleShapes) {
  auto refusal = [](const std::string& name, int t, bool sp) {
    try {
      models::check_tensor_parallel(models::build_model(name), t, sp);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal("resnet:depth=8", 2, false),
            "tensor_parallel: tensor parallelism needs a transformer family (gpt2, bert); resnet "
            "has none");
  EXPECT_THAT(refusal("gpt2:tiny,heads=4,dim=32", 3, false), HasSubstr("heads"));
  EXPECT_THAT(refusal("gpt2:tiny,dim=32,heads=2,vocab=101,vocab_multiple=1", 2, false),
              HasSubstr("does not divide the vocab rows of"));
  EXPECT_THAT(refusal("bert:tiny,hidden=32,heads=2,ffn=66,vocab=128", 4, false),
              HasSubstr("heads"));
  EXPECT_THAT(refusal("gpt2:tiny,dim=32,heads=2,seq=15,ctx=16", 2, true), HasSubstr("sequence"));
  EXPECT_EQ(refusal("gpt2:tiny,dim=32,heads=2,seq=15,ctx=16", 2, false), "");
}

// ---- processes -------------------------------------------------------------------------------

Plan tp_plan(const std::string& model, int stages, int dp, bool sp,
             const std::string& schedule = "1f1b") {
  Plan p = testing::exec_plan(ExecSpec{.model = model,
                                       .schedule = schedule,
                                       .stages = stages,
                                       .chunks = 2,
                                       .micro_batch = 2,
                                       .dp = dp});
  p.tensor_parallel.size = 2;
  p.tensor_parallel.sequence_parallel = sp;
  p.profile.tensor_parallel = p.tensor_parallel;
  p.validate("tp plan");
  return p;
}

class TensorParallelRun : public test::TempDirTest {
 protected:
  Outcome run(const Plan& plan, int nproc, int iterations) {
    return testing::sh(fmt::format(
        "{}/pipetwin run --plan {} --nproc {} --iterations {} --float64 --seed 7 --optimizer sgd "
        "--lr 0.05 --momentum 0.9 --no-pin --timeout 30 -q --save-parameters {}",
        PIPETWIN_BINARY_DIR, testing::write_plan(plan, dir_), nproc, iterations,
        (dir_ / "weights").string()));
  }
  // Every replica's and rank's shards equal the shards of reference training (the plan without
  // tensor parallelism, the same dropout keys).
  void expect_reference_shards(const Plan& plan, int iterations) {
    Plan whole_plan = plan;
    whole_plan.tensor_parallel = {};
    whole_plan.profile.tensor_parallel = {};
    const exec::ExecOptions o = testing::float64_options(iterations);
    const PlanContext ctx(whole_plan, iterations);
    const exec::ReferenceResult ref =
        exec::reference_training(whole_plan, make_schedule(whole_plan.schedule, ctx.shape), o);
    std::vector<at::Tensor> trained;
    for (const auto& st : ref.stage_parameters) trained.insert(trained.end(), st.begin(), st.end());
    const models::LayeredModel model = models::build_model(plan.model, at::kDouble, 7);
    const bool sp = plan.tensor_parallel.sequence_parallel;
    for (int replica = 0; replica < plan.dp; ++replica) {
      for (int r = 0; r < 2; ++r) {
        for (int s = 0; s < plan.num_stages(); ++s) {
          const auto got = exec::load_tensors(
              (dir_ / "weights" / fmt::format("replica{}_stage{}_tp{}.pt", replica, s, r))
                  .string());
          const auto expected = shards_of(model, trained, ctx.stages[s].layers, r, 2, sp);
          EXPECT_LT(testing::max_relative_error(got, expected), 1e-9)
              << "replica " << replica << " stage " << s << " tp rank " << r;
        }
      }
    }
  }
};

TEST_F(TensorParallelRun, Gpt2TwoByTwoOnFourProcessesEqualsSingleProcess) {
  const Plan plan = tp_plan(kGpt2, 2, 1, false);
  const Outcome o = run(plan, 4, 2);
  ASSERT_EQ(o.status, 0) << o.output;
  expect_reference_shards(plan, 2);
}

TEST_F(TensorParallelRun, Gpt2WithSequenceParallelismAndSplitBackward) {
  // zb-h1 (Qi et al. 2024): the weight gradients of the split linears come after the collectives.
  const Plan plan = tp_plan(kGpt2, 2, 1, true, "zb-h1");
  const Outcome o = run(plan, 4, 2);
  ASSERT_EQ(o.status, 0) << o.output;
  expect_reference_shards(plan, 2);
}

TEST_F(TensorParallelRun, BertTwoByTwoWithSequenceParallelismAndWeightStashing) {
  // PipeDream: stage 0 keeps two weight versions, each an instance of its shards.
  const Plan plan = tp_plan(kBert, 2, 1, true, "pipedream");
  const Outcome o = run(plan, 4, 2);
  ASSERT_EQ(o.status, 0) << o.output;
  expect_reference_shards(plan, 2);
}

TEST_F(TensorParallelRun, BertWithDataParallelismAcrossShards) {
  // TP = 2 x DP = 2, one stage: the gradient all-reduce joins the same shard of both replicas.
  const Plan plan = tp_plan(kBert, 1, 2, false);
  const Outcome o = run(plan, 4, 2);
  ASSERT_EQ(o.status, 0) << o.output;
  expect_reference_shards(plan, 2);
}

// `pipetwin train` of a TP = 2 x PP = 2 plan: the epochs' losses are single-process training's,
// and a run stopped after 2 steps and resumed from its shards' checkpoints ends with the
// uninterrupted run's state, bit for bit.
class TensorParallelTrain : public test::TempDirTest {
 protected:
  Outcome train(const Plan& plan, int nproc, const std::string& name, const std::string& extra) {
    return testing::sh(fmt::format(
        "{}/pipetwin train --plan {} {} --data synthetic --epochs 2 --steps-per-epoch 2 "
        "--eval-batches 1 "
        "--float64 --seed 7 --optimizer sgd --lr 0.05 --momentum 0.9 --no-pin --timeout 30 -q "
        "--log {} {}",
        PIPETWIN_BINARY_DIR, testing::write_plan(plan, dir_),
        nproc > 1 ? fmt::format("--nproc {}", nproc) : "", (dir_ / (name + ".jsonl")).string(),
        extra));
  }
  std::vector<std::pair<double, double>> losses(const std::string& name) {
    std::vector<std::pair<double, double>> out;
    std::ifstream in(dir_ / (name + ".jsonl"));
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line);
      out.emplace_back(j.at("train_loss").get<double>(), j.at("eval_loss").get<double>());
    }
    return out;
  }
  std::string ckpt(const std::string& name) { return (dir_ / name).string(); }
};

TEST_F(TensorParallelTrain, LossesEqualSingleProcessAndResumeEqualsUninterrupted) {
  const Plan plan = tp_plan(kGpt2, 2, 1, true);
  Plan whole = plan;
  whole.tensor_parallel = {};
  whole.profile.tensor_parallel = {};
  Outcome o = train(whole, 1, "whole", "");
  ASSERT_EQ(o.status, 0) << o.output;
  o = train(plan, 4, "full", "--checkpoint-every 2 --checkpoint-dir " + ckpt("full"));
  ASSERT_EQ(o.status, 0) << o.output;
  const auto expected = losses("whole"), got = losses("full");
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(expected.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(got[e].first, expected[e].first, 1e-9 * expected[e].first) << "epoch " << e;
    EXPECT_NEAR(got[e].second, expected[e].second, 1e-9 * expected[e].second) << "epoch " << e;
  }
  o = train(plan, 4, "part", "--max-steps 2 --checkpoint-every 2 --checkpoint-dir " + ckpt("part"));
  ASSERT_EQ(o.status, 0) << o.output;
  std::filesystem::copy(ckpt("part") + "/tp1", ckpt("step2-tp1"));
  o = train(plan, 4, "part", "--resume --checkpoint-every 2 --checkpoint-dir " + ckpt("part"));
  ASSERT_EQ(o.status, 0) << o.output;
  for (int k = 0; k < 2; ++k) {
    const std::string a = fmt::format("{}/tp{}", ckpt("full"), k);
    const std::string b = fmt::format("{}/tp{}", ckpt("part"), k);
    const auto ma = exec::read_manifest(a), mb = exec::read_manifest(b);
    ASSERT_TRUE(ma && mb);
    EXPECT_EQ(ma->step, 4);
    EXPECT_EQ(mb->step, 4);
    for (int r = 0; r < ma->world; ++r) {
      const exec::RankState sa = exec::read_rank_file(a, *ma, r);
      const exec::RankState sb = exec::read_rank_file(b, *mb, r);
      ASSERT_EQ(sa.stages.size(), sb.stages.size());
      for (size_t s = 0; s < sa.stages.size(); ++s) {
        ASSERT_EQ(sa.stages[s].tensors.size(), sb.stages[s].tensors.size());
        for (size_t i = 0; i < sa.stages[s].tensors.size(); ++i) {
          EXPECT_TRUE(at::equal(sa.stages[s].tensors[i].value, sb.stages[s].tensors[i].value))
              << "tp" << k << " rank " << r << " " << sa.stages[s].tensors[i].name;
        }
      }
    }
  }
  // Slices whose checkpoints are of different steps (a crash between their manifests).
  std::filesystem::remove_all(ckpt("part") + "/tp1");
  std::filesystem::copy(ckpt("step2-tp1"), ckpt("part") + "/tp1");
  o = train(plan, 4, "part", "--resume --checkpoint-dir " + ckpt("part"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("checkpoints are of steps 2 and 4"));
}

TEST_F(TensorParallelRun, RefusesAWrongRankCountAndThreads) {
  const Plan plan = tp_plan(kGpt2, 2, 1, false);
  const Outcome o = run(plan, 2, 1);
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.output, HasSubstr("needs 4 ranks, the job has 2"));
  try {
    exec::execute_plan(plan, testing::float64_options(1));
    ADD_FAILURE() << "ran in threads";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("run with --nproc"));
  }
}

}  // namespace
}  // namespace pipetwin
