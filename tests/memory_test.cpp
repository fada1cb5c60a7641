// Peak memory read off the schedule (core/memory.hpp) against closed forms per schedule:
// how many micro-batches' activations each stage holds, checkpointing, and weight stashing.
#include <gtest/gtest.h>

#include "core/memory.hpp"
#include "core/schedule/generators.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kKiB = 1024;

// K stages of one layer each: output act_kb per sample (the next stage's input), saved_kb saved
// for backward, param_kb parameters, optimizer_kb optimizer state.
struct Mem {
  double in, saved, params, opt;
};
constexpr Mem kLayer{8, 40, 100, 200};

MemoryWalk walk(const std::string& schedule, int K, int M, Checkpoint ck, int N = 2) {
  testing::PlanSpec s;
  s.model = fmt::format("uniform:layers={},act_kb={},saved_kb={},param_kb={},optimizer_kb={}", K,
                        kLayer.in, kLayer.saved, kLayer.params, kLayer.opt);
  s.schedule = schedule;
  s.stages = K;
  s.chunks = M;
  s.checkpoint = ck;
  const PlanContext ctx(testing::synthetic_plan(s), N);
  const CompiledSchedule cs(make_schedule(schedule, ctx.shape), schedule);
  return walk_memory(cs, ctx.stages);
}

double static_bytes() {
  return (2 * kLayer.params + kLayer.opt) * kKiB;
}
double act(int n_full, int n_inputs_only = 0, int working = 0) {
  return (n_full * (kLayer.in + kLayer.saved) + n_inputs_only * kLayer.in +
          working * kLayer.saved) *
         kKiB;
}
// A backward of stage s: the gradient of its output and, but on the first stage (the model input
// needs none), of its input, and its parameters' gradients before accumulation.
double working(int s) {
  return ((s > 0 ? 2 : 1) * kLayer.in + kLayer.params) * kKiB;
}
// n output gradients received ahead of the backward that consumes them (none on the last stage).
double received(int s, int K, int n) {
  return s < K - 1 ? n * kLayer.in * kKiB : 0.0;
}
// Tensors received ahead on stage s of a one-forward-one-backward pipeline (1F1B, PipeDream,
// FTPipe) with n = min(K - s, M) micro-batches in flight. In the drain (all forwards done) the
// next stage may have sent all n - 1 gradients left besides the one being consumed. In the steady
// phase (M > K - s: forwards after the first backward) the previous stage is one forward ahead:
// one input and, but on the last stage, one output gradient wait at a backward.
double received_1f1b(int s, int K, int M) {
  const int n = std::min(K - s, M);
  const int drain = s < K - 1 ? n - 1 : 0;
  const int steady = M > K - s ? (s < K - 1 ? 2 : 1) : 0;
  return std::max(drain, steady) * kLayer.in * kKiB;
}

TEST(Memory, GPipeHoldsAllMicroBatches) {
  // Stage s + 1 runs its backwards after its last forward, which needs only stage s's last
  // forward: all M output gradients may reach stage s before its first backward, which consumes
  // one of them.
  const int K = 4, M = 6;
  const auto w = walk("gpipe", K, M, Checkpoint::kNone);
  for (int s = 0; s < K; ++s) {
    EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes,
                     static_bytes() + act(M) + working(s) + received(s, K, M - 1))
        << "stage " << s;
    EXPECT_DOUBLE_EQ(w.devices[s].working_bytes, working(s));
    EXPECT_DOUBLE_EQ(w.devices[s].received_bytes, received(s, K, M - 1));
    EXPECT_EQ(w.devices[s].max_in_flight, M);
  }
}

TEST(Memory, CheckpointingKeepsInputsAndOneWorkingSet) {
  // torchgpipe: memory reduced by a factor of about M: M inputs plus one set of saved activations.
  const int K = 3, M = 8;
  for (Checkpoint ck : {Checkpoint::kExceptLast, Checkpoint::kAlways}) {
    const auto w = walk("gpipe", K, M, ck);
    for (int s = 0; s < K; ++s) {
      EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes,
                       static_bytes() + act(0, M, 1) + working(s) + received(s, K, M - 1))
          << "stage " << s;
    }
  }
}

TEST(Memory, OneFOneBHoldsKMinusSMicroBatches) {
  // Stage s forwards n = min(K - s, M) micro-batches before its first backward.
  const int K = 4;
  for (int M : {2, 8}) {
    const auto w = walk("1f1b", K, M, Checkpoint::kNone);
    for (int s = 0; s < K; ++s) {
      const int n = std::min(K - s, M);
      EXPECT_EQ(w.devices[s].max_in_flight, n) << "M=" << M << " stage " << s;
      EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes,
                       static_bytes() + act(n) + working(s) + received_1f1b(s, K, M))
          << "M=" << M << " stage " << s;
    }
  }
}

TEST(Memory, NaiveHoldsOne) {
  // One micro-batch at a time: nothing arrives ahead of its consumer.
  const int K = 3;
  const auto w = walk("naive", K, 5, Checkpoint::kNone);
  for (int s = 0; s < K; ++s) {
    EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes, static_bytes() + act(1) + working(s));
    EXPECT_DOUBLE_EQ(w.devices[s].received_bytes, 0.0);
  }
}

TEST(Memory, PipeDreamStashesKMinusKPlusOneVersions) {
  // EPFL Section 2.4: device k stores K - k + 1 intermediate states (inputs, activations, weights).
  // Mini-batches are not flushed: the 4K micro-batches of the run form one steady pipeline.
  const int K = 4;
  const auto w = walk("pipedream", K, 1, Checkpoint::kNone, 4 * K);
  for (int s = 0; s < K; ++s) {
    const int n = K - s;  // K - k + 1 with k = s + 1
    EXPECT_EQ(w.devices[s].max_in_flight, n);
    EXPECT_EQ(w.devices[s].max_weight_versions, n);
    EXPECT_DOUBLE_EQ(w.devices[s].peak_bytes, static_bytes() + act(n) +
                                                  (n - 1) * kLayer.params * kKiB + working(s) +
                                                  received_1f1b(s, K, 4 * K))
        << "stage " << s;
  }
}

TEST(Memory, DdgStoresStatesFeatureReplayOnlyInputs) {
  const int K = 4;
  const auto ddg = walk("ddg", K, 1, Checkpoint::kNone, 4 * K);
  const auto fr = walk("feature-replay", K, 1, Checkpoint::kNone, 4 * K);
  const auto ft = walk("ftpipe-async", K, 1, Checkpoint::kNone, 4 * K);
  for (int s = 0; s < K; ++s) {
    const int n = K - s;
    EXPECT_DOUBLE_EQ(ddg.devices[s].peak_bytes, static_bytes() + act(n) +
                                                    (n - 1) * kLayer.params * kKiB + working(s) +
                                                    received(s, K, n - 1))
        << "ddg stage " << s;
    // Features Replay and FTPipe: inputs only, plus the recomputed working set; the last stage
    // does not recompute and holds one full micro-batch; no weight stash. DDG and Features Replay
    // lock the step boundary (delayed_order.hpp), so no input arrives ahead of its forward;
    // FTPipe runs like PipeDream, its 4K micro-batches one after the other without a flush.
    const double inputs = s == K - 1 ? act(1) : act(0, n, 1);
    EXPECT_DOUBLE_EQ(fr.devices[s].peak_bytes,
                     static_bytes() + inputs + working(s) + received(s, K, n - 1))
        << "feature-replay stage " << s;
    EXPECT_DOUBLE_EQ(ft.devices[s].peak_bytes,
                     static_bytes() + inputs + working(s) + received_1f1b(s, K, 4 * K))
        << "ftpipe stage " << s;
  }
}

// `model` as one stage, one micro-batch, run naively.
testing::PlanSpec one_stage(const std::string& model) {
  testing::PlanSpec s;
  s.model = model;
  s.schedule = "naive";
  s.stages = 1;
  s.chunks = 1;
  return s;
}

TEST(Memory, BackwardHoldsALayersParameterGradients) {
  // Two layers in one stage, the lower one with large parameters (an embedding table): its
  // parameter gradient, computed before it is added into the step's gradients, dominates the
  // backward once the upper layer has released its saved activations.
  testing::PlanSpec s = one_stage("uniform:layers=2,act_kb=8,saved_kb=40,param_kb=1000/10");
  const PlanContext ctx(testing::synthetic_plan(s), 1);
  const double upper = (8 + 8 + 10) * kKiB;  // output grad, input grad, parameters
  // No input gradient; the upper layer's saved activations and the lower layer's output are gone.
  const double lower = (8 + 0 + 1000 - 40 - 8) * kKiB;
  EXPECT_DOUBLE_EQ(ctx.stages[0].backward_bytes, std::max(upper, lower));
  const CompiledSchedule cs(make_schedule("naive", ctx.shape), "naive");
  const auto w = walk_memory(cs, ctx.stages);
  EXPECT_DOUBLE_EQ(w.devices[0].peak_bytes,
                   w.devices[0].static_bytes + (8 + 2 * 40) * kKiB + lower);  // input + saved
  // Doubling the micro-batch doubles the activation terms, not the parameter gradient.
  s.micro_batch = 2;
  const PlanContext ctx2(testing::synthetic_plan(s), 1);
  EXPECT_DOUBLE_EQ(ctx2.stages[0].backward_bytes, (16 + 1000 - 80 - 16) * kKiB);
}

TEST(Memory, WorkspacesCountWhileTheirPassRuns) {
  // Two layers in one stage (8 KiB outputs, 40 KiB saved, 100 KiB parameters), with measured
  // workspaces (Profile::forward_workspace_bytes_per_sample, backward_...): a convolution whose
  // forward reorders its input (500 KiB) and a top layer whose backward keeps weight-gradient
  // buffers (200 KiB).
  Plan plan =
      testing::synthetic_plan(one_stage("uniform:layers=2,act_kb=8,saved_kb=40,param_kb=100"));
  plan.profile.layers[0].forward_workspace_bytes_per_sample = 500 * kKiB;
  plan.profile.layers[1].forward_workspace_bytes_per_sample = 30 * kKiB;
  plan.profile.layers[1].backward_workspace_bytes_per_sample = 200 * kKiB;
  const PlanContext ctx(plan, 1);
  const StageCost& st = ctx.stages[0];
  // Forward: layer 0 peaks at its saved 40 + 500; layer 1 at 80 + 30; what the forward leaves
  // (80 saved) is counted apart. Without saving: the larger workspace alone.
  EXPECT_DOUBLE_EQ(st.forward_bytes, (40 + 500 - 80) * kKiB);
  EXPECT_DOUBLE_EQ(st.forward_nograd_bytes, 500 * kKiB);
  // Backward: the top layer holds its output gradient (the stage's, kept until the backward
  // ends) and its workspace, its input gradient and its parameter gradient: 8 + 200 + 8 + 100;
  // the bottom layer less (100 of parameters after 40 + 8 released).
  EXPECT_DOUBLE_EQ(st.backward_bytes, (8 + 200 + 8 + 100) * kKiB);
  const CompiledSchedule cs(make_schedule("naive", ctx.shape), "naive");
  const auto w = walk_memory(cs, ctx.stages);
  // The peak is the forward's: input 8 + saved 80 + 460 of workspace above them.
  EXPECT_DOUBLE_EQ(w.devices[0].peak_bytes, w.devices[0].static_bytes + (8 + 80 + 460) * kKiB);
  EXPECT_DOUBLE_EQ(w.devices[0].working_bytes, 460 * kKiB);
  // Checkpointing: the forward keeps only the input (8 + 500 of workspace); the recompute peaks
  // as a forward does.
  plan.schedule = "gpipe";
  plan.checkpoint = Checkpoint::kAlways;
  const PlanContext ck(plan, 1);
  const CompiledSchedule ccs(make_schedule("gpipe", ck.shape), "gpipe");
  const auto wc = walk_memory(ccs, ck.stages);
  EXPECT_DOUBLE_EQ(wc.devices[0].peak_bytes, wc.devices[0].static_bytes + (8 + 80 + 460) * kKiB);
  const auto first_forward = static_cast<size_t>(ccs.id({0, 0}));
  EXPECT_DOUBLE_EQ(wc.after_action[first_forward], wc.devices[0].static_bytes + 8 * kKiB);
}

TEST(Memory, FrozenLayersCountLambdaOfTheirFootprint) {
  testing::PlanSpec s;
  s.model = "uniform:layers=2,param_kb=600,optimizer_kb=1200";
  s.stages = 1;
  s.chunks = 1;
  Plan p = testing::synthetic_plan(s);
  p.frozen_layers = 1;
  const PlanContext ctx(p, 1);
  const CompiledSchedule cs(make_schedule("gpipe", ctx.shape), "gpipe");
  const auto w = walk_memory(cs, ctx.stages);
  const double active = (2 * 600 + 1200) * kKiB;
  EXPECT_DOUBLE_EQ(w.devices[0].static_bytes, active + active / 6);
}

}  // namespace
}  // namespace pipetwin
