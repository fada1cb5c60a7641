// PipeTransformer live (`pipetwin train --elastic`; exec/train/elastic_policy.hpp,
// exec/train/trainer.hpp "Elastic training"): frozen layers keep their weights bit for bit and
// train as single-process training with those layers frozen; a transition from K = 2 to K = 1 with
// twice the replicas keeps every layer's weights and optimizer state, in one process and over 2
// Gloo processes, and a checkpoint taken after it resumes bit for bit; a live run on the digits
// shrinks K, grows the replicas and still learns; the policy re-plans as the simulator replays.
// What goes wrong live is in exec_elastic_faults_test.cpp.
#include <ATen/core/grad_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "core/elastic/autopipe.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "core/error.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"
#include "exec_elastic_test_util.hpp"
#include "exec_test_util.hpp"
#include "sim/elastic_sim.hpp"

namespace pipetwin {
namespace {

using testing::bound_every_two_steps;
using testing::Elastic;
using testing::exec_plan;
using testing::kDepth4TwoStages;
using testing::Outcome;
using testing::sh;
using testing::write_plan;

// Parameters of every stage of `replica`, in model order (stages hold contiguous layers).
std::vector<at::Tensor> model_order(const exec::TrainResult& r, const Plan& plan, int replica = 0) {
  std::vector<at::Tensor> out;
  for (int s = 0; s < plan.num_stages(); ++s) {
    for (const auto& t : r.parameters.at({replica, s})) out.push_back(t);
  }
  return out;
}

size_t parameters_below(const models::LayeredModel& m, int layer) {
  size_t n = 0;
  for (int l = 0; l < layer; ++l) n += m.layers[static_cast<size_t>(l)].parameters().size();
  return n;
}

// Plain single-process training of the whole batch in which, from step `freeze_at` on, model
// layers [0, frozen) are frozen: forward in eval mode without autograd, no update.
std::vector<at::Tensor> frozen_training(const Plan& plan, const exec::ExecOptions& o, int steps,
                                        int freeze_at, int frozen) {
  models::LayeredModel model = models::build_model(plan.model, at::kDouble, o.seed);
  auto data = exec::synthetic_batches(model, plan.batch_size, o.seed, true);
  data->configure(plan.batch_size, 1, 1);
  std::vector<at::Tensor> params = model.parameters();
  exec::Optimizer opt(o.optimizer);
  for (int step = 0; step < steps; ++step) {
    const int f = step >= freeze_at ? frozen : 0;
    opt.freeze_prefix(parameters_below(model, f));
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    auto [x, y] = data->mini_batch(step);
    {
      at::NoGradGuard no_grad;
      for (int l = 0; l < f; ++l) {
        model.layers[static_cast<size_t>(l)].module.ptr()->eval();
        x = model.layers[static_cast<size_t>(l)].module.forward(x);
      }
    }
    for (size_t l = static_cast<size_t>(f); l < model.layers.size(); ++l) {
      x = model.layers[l].module.forward(x);
    }
    model.per_sample_loss(x, y).mean().backward();
    std::vector<at::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    at::NoGradGuard no_grad;
    opt.step(params, grads, params);
  }
  return params;
}

// The simulator replaying `trace` on the start plan's profile, cluster, K and per-replica batch
// re-plans every epoch as the live run did.
void expect_replay_replans_as(const Plan& plan, const elastic::EpochLog& live,
                              const elastic::FreezeTrace& trace) {
  sim::ElasticConfig c;
  c.model = plan.model;
  c.profile = plan.profile;
  c.cluster = plan.cluster;
  c.stages = plan.num_stages();
  c.batch = plan.batch_size / plan.dp;
  c.epochs = static_cast<int>(live.epochs.size());
  c.samples = live.epochs.front().samples;
  c.trace = trace;
  c.autocache = false;
  c.overheads = elastic::TransitionOverheads::none();
  const sim::ElasticRun replay = sim::simulate_elastic_run(c);
  ASSERT_EQ(replay.log.epochs.size(), live.epochs.size());
  for (size_t i = 0; i < live.epochs.size(); ++i) {
    const auto& x = replay.log.epochs[i];
    const auto& y = live.epochs[i];
    EXPECT_EQ(x.K, y.K) << i;
    EXPECT_EQ(x.dp, y.dp) << i;
    EXPECT_EQ(x.chunks, y.chunks) << i;
    EXPECT_EQ(x.frozen_layers, y.frozen_layers) << i;
    EXPECT_EQ(x.steps, y.steps) << i;
  }
}


// Two steps on all layers, then the embedding and transformer layer 0 freeze on a re-partitioned
// pipeline: the frozen layers keep the weights of step 2 bit for bit, and the run ends where
// single-process training with those layers frozen from step 2 on ends.
TEST_F(Elastic, FrozenLayersKeepTheirWeightsAndTrainingEqualsFrozenTraining) {
  const Plan plan = exec_plan({.model = "vit:test", .stages = 2, .chunks = 2, .micro_batch = 3});
  const exec::ElasticPolicy policy(plan, exec::ElasticOptions{});
  const Plan frozen = policy.plan_for(1, 2);
  ASSERT_EQ(frozen.frozen_layers, 3);  // embed, block0.attn, block0.mlp
  ASSERT_EQ(frozen.dp, 1);
  exec::TrainOptions o = options(6, 1);
  o.policy_interval_steps = 2;
  exec::TrainOptions two = o;
  two.max_steps = 2;
  const std::vector<at::Tensor> at_two = model_order(exec::Trainer(plan, two).run(), plan);
  exec::Trainer t(plan, o);
  t.set_policy([&](const exec::Trainer& tr, int64_t step) -> std::optional<exec::Transition> {
    if (step != 2) return std::nullopt;
    EXPECT_EQ(tr.frozen_layers(), 0);
    return exec::Transition{frozen, 1};
  });
  const exec::TrainResult r = t.run();
  EXPECT_EQ(t.frozen_layers(), 1);
  EXPECT_EQ(t.plan().frozen_layers, 3);
  const std::vector<at::Tensor> end = model_order(r, frozen);
  const models::LayeredModel m = models::build_model(plan.model, at::kDouble, 7);
  const size_t n = parameters_below(m, 3);
  ASSERT_GT(n, 0u);
  for (size_t i = 0; i < end.size(); ++i) {
    if (i < n) {
      EXPECT_TRUE(at::equal(end[i], at_two[i])) << "frozen parameter " << i << " moved";
    } else {
      EXPECT_FALSE(at::equal(end[i], at_two[i])) << "active parameter " << i << " did not train";
    }
  }
  const auto reference = frozen_training(plan, o.exec, 6, 2, 3);
  EXPECT_LT(testing::max_relative_error(end, reference), 1e-12);
  // Not frozen, training would have gone elsewhere.
  EXPECT_GT(testing::max_relative_error(end, frozen_training(plan, o.exec, 6, 2, 0)), 1e-6);
}

// K = 2, dp = 1 -> K = 1, dp = 2 in one process: right after the transition (the checkpoint of
// step 2 is taken after it) both replicas hold every layer's weights and momentum exactly as
// they were; training goes on with the two replicas equal.
TEST_F(Elastic, ATransitionToMoreReplicasKeepsEveryLayersState) {
  const Plan pa = exec_plan({.model = "vit:test", .stages = 2, .chunks = 2, .micro_batch = 2});
  const Plan pb = exec::ElasticPolicy(pa, exec::ElasticOptions{}).plan_for(0, 1);
  ASSERT_EQ(pb.num_stages(), 1);
  ASSERT_EQ(pb.dp, 2);
  exec::TrainOptions o = options(4, 1);
  o.checkpoint_every_steps = 2;
  o.checkpoint_dir = (dir_ / "before").string();
  o.max_steps = 2;
  exec::Trainer(pa, o).run();
  o.checkpoint_dir = (dir_ / "after").string();
  o.max_steps = 4;
  o.policy_interval_steps = 2;
  exec::Trainer t(pa, o);
  t.set_policy([&](const exec::Trainer&, int64_t step) -> std::optional<exec::Transition> {
    return step == 2 ? std::optional<exec::Transition>(exec::Transition{pb, 0}) : std::nullopt;
  });
  const exec::TrainResult r = t.run();
  EXPECT_EQ(t.plan().dp, 2);
  EXPECT_TRUE(testing::all_equal(r.parameters.at({0, 0}), r.parameters.at({1, 0})));
  // The run's checkpoint of step 4 replaced that of step 2: look at step 2 through a rerun.
  o.checkpoint_dir = (dir_ / "at-two").string();
  o.max_steps = 2;
  exec::Trainer t2(pa, o);
  t2.set_policy([&](const exec::Trainer&, int64_t) -> std::optional<exec::Transition> {
    return exec::Transition{pb, 0};
  });
  t2.run();
  expect_same_state(checkpoint_state((dir_ / "before").string(), 2),
                    checkpoint_state((dir_ / "at-two").string(), 2), 2);
}

// The same transition chosen by the policy itself (the alpha bound: 3 of 4 layers at the first
// freeze step, after which K = 2 compresses to 1 and AutoDP doubles the replicas), on 2 Gloo
// processes: each rank ends the transition with every layer's state as it was; a checkpoint
// taken after the transition resumes, in new processes, to the weights of an uninterrupted run.
TEST_F(Elastic, OverTwoProcessesTheTransitionKeepsStateAndCheckpointsResume) {
  const Plan pa = exec_plan(kDepth4TwoStages);
  const std::string plan = write_plan(pa, dir_);
  exec::ElasticPolicy policy(pa, bound_every_two_steps());
  ASSERT_EQ(policy.freeze_step(), elastic::bound_frozen_layers(4, 0.75, 1));
  const exec::Transition expected = policy.transition(policy.frozen_layers());
  ASSERT_EQ(expected.plan.num_stages(), 1);  // the case this test is about
  ASSERT_EQ(expected.plan.dp, 2);
  exec::TrainOptions o = options(4, 1);
  o.checkpoint_every_steps = 2;
  o.checkpoint_dir = (dir_ / "before").string();
  o.max_steps = 2;
  exec::Trainer(pa, o).run();
  auto train = [&](const std::string& ckpt, int max_steps, const std::string& extra) {
    return sh(fmt::format(
        "timeout -k 5 120 {}/pipetwin train --plan {} --nproc 2 --data synthetic "
        "--steps-per-epoch 4 --epochs 1 --float64 --seed 7 --lr 0.05 --momentum 0.9 --no-pin "
        "--timeout 20 -q --elastic --alpha 0.75 --freeze-interval 2step --freeze-rule bound "
        "--checkpoint-every 2 --checkpoint-dir {} --log {} --max-steps {} {}",
        PIPETWIN_BINARY_DIR, plan, (dir_ / ckpt).string(), (dir_ / (ckpt + ".jsonl")).string(),
        max_steps, extra));
  };
  Outcome out = train("gloo", 2, "");
  ASSERT_EQ(out.status, 0) << out.output;
  expect_same_state(checkpoint_state((dir_ / "before").string(), 2),
                    checkpoint_state((dir_ / "gloo").string(), 2), 2);
  out = train("gloo", 4, "--resume");
  ASSERT_EQ(out.status, 0) << out.output;
  out = train("whole", 4, "");
  ASSERT_EQ(out.status, 0) << out.output;
  const auto resumed = checkpoint_state((dir_ / "gloo").string(), 4);
  const auto whole = checkpoint_state((dir_ / "whole").string(), 4);
  ASSERT_EQ(resumed.size(), whole.size());
  for (const auto& [key, tensors] : whole) {
    EXPECT_TRUE(testing::all_equal(resumed.at(key), tensors)) << key.first << " " << key.second;
  }
  // The manifest names the plan after the transition.
  EXPECT_EQ(expected.plan.frozen_layers, 7);  // the embedding and 3 blocks of 2 sub-layers
  EXPECT_EQ(exec::read_manifest((dir_ / "whole").string())->plan,
            exec::plan_fingerprint(expected.plan, "f64"));
}

// A live elastic run of a small ViT on the digits, 2 processes over Gloo, Equation 1 on the
// measured gradient norms: K shrinks, the replicas grow, the loss falls and held-out accuracy
// rises; every freeze stays within Equation 3's bound; and the simulator, replaying the run's
// freeze trace, re-plans epoch by epoch exactly as the run did (K, dp, M, frozen layers).
TEST_F(Elastic, ALiveRunShrinksThePipelineAndTheReplayRePlansTheSameWay) {
  Plan p0 = exec_plan({.model = "vit:test,image=8,patch=4,channels=1,depth=4,dim=64,heads=2",
                       .stages = 2,
                       .chunks = 2,
                       .micro_batch = 16});
  p0.cluster.devices_per_node = 2;  // the job's devices: AutoDP's replicas are 2 / K
  const exec::ElasticOptions e{.alpha = 0.4, .unit = elastic::FreezeUnit::kStep, .interval = 22};
  const Plan plan = exec::ElasticPolicy(p0, e).plan_for(0, 2);  // AutoPipe's T = 0 plan
  const std::string plan_file = write_plan(plan, dir_);
  const std::string log = (dir_ / "epochs.json").string(), trace = (dir_ / "trace.json").string();
  const Outcome out = sh(fmt::format(
      "timeout -k 5 120 {}/pipetwin train --plan {} --nproc 2 --data digits --epochs 3 --seed 7 "
      "--optimizer adam --lr 0.001 --no-pin --timeout 20 -q --elastic --alpha 0.4 "
      "--freeze-interval 22step --log {} --epoch-log {} --freeze-trace {}",
      PIPETWIN_BINARY_DIR, plan_file, (dir_ / "log.jsonl").string(), log, trace));
  ASSERT_EQ(out.status, 0) << out.output;
  const elastic::EpochLog live = elastic::load_epoch_log(log);
  const elastic::FreezeTrace ft = elastic::load_freeze_trace(trace);
  ASSERT_EQ(live.epochs.size(), 3u);
  const auto& first = live.epochs.front();
  const auto& last = live.epochs.back();
  EXPECT_EQ(first.K, 2);
  EXPECT_EQ(first.dp, 1);
  EXPECT_EQ(last.K, 1);
  EXPECT_EQ(last.dp, 2);
  EXPECT_GT(last.frozen_layers, 0);
  EXPECT_LT(*last.loss, *first.loss);
  EXPECT_GT(*last.accuracy, *first.accuracy);
  EXPECT_EQ(last.steps * 2, first.steps);  // twice the samples per step, the same epoch
  EXPECT_EQ(last.samples, first.samples);
  for (const auto& ev : ft.events) {
    EXPECT_LE(ev.frozen_layers,
              elastic::bound_frozen_layers(4, 0.4, static_cast<int>(ev.step / 22)))
        << "step " << ev.step;
  }
  for (const auto& ep : live.epochs) {
    EXPECT_EQ(ep.frozen_layers, ft.frozen_at(ep.epoch, ep.samples)) << ep.epoch;
  }
  expect_replay_replans_as(plan, live, ft);
}

}  // namespace
}  // namespace pipetwin
