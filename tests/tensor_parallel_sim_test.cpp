// Tensor parallelism and the distributed optimizer in the cost model (core/cost_model.hpp), the
// plan (core/plan.hpp) and the simulator (sim/pipeline_sim.hpp): collective times against the
// ring's closed form, the backward's overlap, the plan's refusals, the timeline's tensor stream,
// ZeRO-1's shards, and `plan` of GPT-2 1.5B on a DGX H100 with t = 2.
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "studies/plan_options.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;

// One node of four devices at 10 GB/s and 1 us per message.
Cluster node4() {
  return test::two_level_cluster(1, 4, 10e9, 1e-6, 1e9, 1e-5);
}

// Four synthetic layers (1 ms forward, 2 ms backward), each with `bytes` per sample all-reduced
// once in its forward and once in its backward, as a t = 2 shard.
Profile shard(double bytes) {
  Profile p = test::synthetic("uniform:layers=4,fwd_ms=1,bwd_ms=2,act_kb=64,param_kb=64");
  p.tensor_parallel = {2};
  for (auto& l : p.layers) {
    l.tp_forward = {{CollectiveKind::kAllReduce, bytes}};
    l.tp_backward = {{CollectiveKind::kAllReduce, bytes}};
  }
  return p;
}

TEST(TensorParallelCost, ForwardAddsTheRingAllReduce) {
  Profile whole = shard(1e6);
  whole.tensor_parallel = {};
  const CostModel without(whole, node4());
  const CostModel with(shard(1e6), node4());
  // 2 (t - 1) / t * S / B + 2 (t - 1) alpha, S = 4 samples x 1 MB.
  const double ring = 4e6 / 10e9 + 2e-6;
  EXPECT_NEAR(with.forward_s(1, 4) - without.forward_s(1, 4), ring, 1e-15);
  EXPECT_NEAR(with.recompute_s(1, 4) - without.recompute_s(1, 4), ring, 1e-15);
  EXPECT_NEAR(with.tp_collective_s(CollectiveKind::kAllGather, 4e6), ring / 2, 1e-15);
  EXPECT_EQ(with.tp_group(), (std::vector<int>{0, 1}));
  // The backward's all-reduce hides behind half the weight-gradient time (0.5 x 4 ms here).
  EXPECT_DOUBLE_EQ(with.tp_backward_s(1, 4), 0);
  const CostModel big(shard(1e7), node4());
  EXPECT_NEAR(big.tp_backward_s(1, 4), 4e7 / 10e9 + 2e-6 - 0.5 * big.backward_weight_s(1, 4),
              1e-15);
  const StageCost st = big.stage_cost({0, 1}, 4);
  EXPECT_NEAR(st.tp_forward_s, 2 * (4e7 / 10e9 + 2e-6), 1e-15);
}

Plan tp_plan(int t, int K, int dp, bool distributed = false) {
  Plan p;
  p.model = "tp-test";
  p.profile = shard(1e6);
  p.profile.tensor_parallel = {t};
  p.cluster = test::two_level_cluster(2, 4, 10e9, 1e-6, 1e9, 1e-5);
  p.batch_size = 8 * dp;
  p.chunks = 4;
  p.dp = dp;
  p.tensor_parallel = {t};
  p.distributed_optimizer = distributed;
  const int per = 4 / K;
  for (int s = 0; s < K; ++s) {
    StagePlan st;
    for (int l = s * per; l < (s + 1) * per; ++l) st.layers.push_back(l);
    st.device = s;
    p.stages.push_back(st);
  }
  return p;
}

TEST(TensorParallelPlan, RefusalsNameTheField) {
  Plan p = tp_plan(2, 2, 1);
  p.profile.tensor_parallel = {};
  EXPECT_NE(input_error([&] {
              p.validate("plan.json");
            }).find("plan.json: tensor_parallel: the plan's (t=2) is not its profile's (t=1)"),
            std::string::npos);
  Plan wide = tp_plan(2, 2, 3);  // 3 replicas x 2 stages x 2 = 12 devices on 8
  EXPECT_NE(input_error([&] { wide.validate("plan.json"); }).find("needs 12 devices"),
            std::string::npos);
  Plan spans = tp_plan(2, 2, 1);
  spans.placement = {3, 0};  // devices 3 and 4: nodes 0 and 1
  EXPECT_NE(input_error([&] { spans.validate("plan.json"); }).find("spans nodes 0 and 1"),
            std::string::npos);
  spans.tp_across_nodes = true;
  EXPECT_NO_THROW(spans.validate("plan.json"));
  Plan round = plan_from_json(JsonView(plan_to_json(spans), "round"));
  EXPECT_EQ(round.tensor_parallel, spans.tensor_parallel);
  EXPECT_TRUE(round.tp_across_nodes);
}

TEST(TensorParallelSim, CollectivesOnTheTensorStream) {
  const Plan p = tp_plan(2, 2, 1);
  const PlanContext ctx(p, 0);
  EXPECT_EQ(ctx.placement, (std::vector<int>{0, 2}));  // groups {0, 1} and {2, 3}
  EXPECT_EQ(tp_group(ctx, 1), (std::vector<int>{2, 3}));
  const sim::SimResult r = sim::simulate_plan(ctx);
  int tensor = 0;
  for (const auto& e : r.timeline.events) {
    if (e.action.op != Op::kTensorParallel) continue;
    ++tensor;
    EXPECT_EQ(stream_of(e.action.op), StreamKind::kTensor);
    const StageCost& st = ctx.stages[static_cast<size_t>(e.action.stage)];
    const double part =
        e.action.payload == Payload::kActivation ? st.tp_forward_s : st.tp_backward_s;
    EXPECT_NEAR(e.duration(), part, 1e-12);
  }
  // Forwards only (the backward's all-reduces hide behind the weight gradients here).
  EXPECT_EQ(tensor, 2 * 4 * ctx.shape.iterations);
  Plan no_comm = p;
  for (auto& l : no_comm.profile.layers) l.tp_forward.clear();
  const sim::SimResult base = sim::simulate_plan(PlanContext(no_comm, 0));
  EXPECT_GT(r.metrics.iteration_time_s, base.metrics.iteration_time_s);
}

TEST(TensorParallelSim, DistributedOptimizerShardsStateAndSplitsTheAllReduce) {
  const PlanContext plain(tp_plan(1, 2, 2), 0);
  const PlanContext zero(tp_plan(1, 2, 2, true), 0);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(zero.stages[s].optimizer_bytes, plain.stages[s].optimizer_bytes / 2);
    // The parameters' all-gather: half a ring all-reduce of the stage's parameters over its
    // two replicas (devices s and 2 + s of one node at 10 GB/s): (n - 1)/n S/B + (n - 1) alpha.
    const double gather = 0.5 * zero.stages[s].param_bytes / 10e9 + 1e-6;
    EXPECT_NEAR(zero.stages[s].parameter_gather_s, gather, 1e-15);
    EXPECT_NEAR(zero.stages[s].optimizer_s, plain.stages[s].optimizer_s / 2 + gather, 1e-15);
  }
  const sim::SimResult a = sim::simulate_plan(plain), b = sim::simulate_plan(zero);
  auto allreduce = [](const sim::SimResult& r) {
    for (const auto& e : r.timeline.events)
      if (e.action.op == Op::kAllReduce) return e.duration();
    return 0.0;
  };
  EXPECT_NEAR(allreduce(b), allreduce(a) / 2, 1e-12);
}

TEST(TensorParallelPlan, Gpt2XlOnADgxH100HalvesTheWeightsPerDevice) {
  sim::PlanOptions o;
  o.model = "gpt2:1.5b,heads=32";
  o.cluster = "dgx-h100";
  o.stages = 4;
  o.schedule = "1f1b";
  o.batch = 64;
  o.chunks = "16";
  o.dtype = "bfloat16";
  o.optimizer = "adam";
  const Plan one = sim::plan_with_options(o, {}, false).plan;
  o.tp = 2;
  const Plan two = sim::plan_with_options(o, {}, false).plan;
  EXPECT_EQ(two.tp(), 2);
  const PlanContext c1(one, 0), c2(two, 0);
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_NEAR(c2.stages[s].param_bytes / c1.stages[s].param_bytes, 0.5, 0.01) << s;
  }
  const sim::SimResult r = sim::simulate_plan(c2);
  EXPECT_GT(r.metrics.iteration_time_s, 0);
  o.model = "gpt2:1.5b";
  EXPECT_NE(input_error([&] {
              sim::plan_with_options(o, {}, false);
            }).find("25 attention heads of layer \"block0.attn\" are not divisible"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin
