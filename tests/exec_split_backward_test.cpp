// The split backward in the executor: BackwardInput (I) and BackwardWeight (W) of the zero-bubble
// schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Section 2) run through the
// split linear (models/split_linear.hpp) and the stages' WeightGradStore
// (exec/runtime/weight_grad_store.hpp). Every schedule with split backwards or virtual stages
// trains as single-process training does (float64, 1e-9, the liveness check on), W really is
// deferred, and the split linear's gradients are the plain linear's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "exec/profile/profiler.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/liveness_check.hpp"
#include "exec/runtime/reference.hpp"
#include "exec/runtime/session.hpp"
#include "exec_test_util.hpp"
#include "models/split_linear.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;
using ::testing::HasSubstr;
using testing::max_relative_error;

constexpr int kSteps = 2;
constexpr int kChunks = 8;  // M: what zbv (2D - 1), dualpipev (2D) and interleaved (D | M) accept
const char* kMlp = "mlp:layers=8,width=16,input=8";  // 9 layers: 8 stages at most

struct SplitCase {
  std::string schedule;
  int devices = 2;
  int v = 1;  // model chunks (virtual stages) per device
  Checkpoint checkpoint = Checkpoint::kNone;
  int dp = 1;
  std::string model = kMlp;
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << fmt::format("{} D={} v={} dp={} checkpoint {} {}", c.schedule, c.devices, c.v, c.dp,
                     checkpoint_name(c.checkpoint), c.model);
}

// devices * v stages of contiguous layers, placed as the schedule's layout wants
// (core/schedule/virtual_stages.hpp).
Plan split_plan(const SplitCase& c, int chunks = kChunks) {
  Plan p = exec_plan(ExecSpec{.model = c.model,
                              .schedule = c.schedule,
                              .stages = c.devices * c.v,
                              .chunks = chunks,
                              .micro_batch = 1,
                              .dp = c.dp,
                              .checkpoint = c.checkpoint});
  const std::vector<int> device =
      virtual_stage_layout(stage_layout_of(c.schedule), c.devices, c.v, c.schedule);
  for (size_t s = 0; s < p.stages.size(); ++s) p.stages[s].device = device[s];
  p.validate("split plan");
  return p;
}

std::vector<at::Tensor> reference_parameters(const Plan& plan, const exec::ExecOptions& o) {
  const PlanContext ctx(plan, o.iterations);
  const exec::ReferenceResult ref =
      exec::reference_training(plan, make_schedule(plan.schedule, ctx.shape), o);
  std::vector<at::Tensor> out;
  for (const auto& st : ref.stage_parameters) out.insert(out.end(), st.begin(), st.end());
  return out;
}

// The run's compute events of `op`, each checked against the version the schedule declares.
int events_at_declared_versions(const Plan& plan, const exec::ExecResult& r, Op op) {
  const PlanContext ctx(plan, kSteps);
  const Schedule sched = make_schedule(plan.schedule, ctx.shape);
  std::map<std::tuple<int, int, int>, int> declared;  // device, stage, mb -> version
  for (int d = 0; d < sched.num_devices(); ++d) {
    for (const auto& a : sched.devices[static_cast<size_t>(d)])
      if (a.op == op) declared[{d, a.stage, a.micro_batch}] = a.version;
  }
  int n = 0;
  for (const auto& e : r.timeline.events) {
    if (e.action.op != op) continue;
    ++n;
    const auto it = declared.find({e.device, e.action.stage, e.action.micro_batch});
    EXPECT_TRUE(it != declared.end()) << describe(e.action);
    if (it != declared.end()) {
      EXPECT_EQ(e.action.version, it->second) << describe(e.action);
    }
  }
  EXPECT_EQ(n, static_cast<int>(declared.size())) << op_name(op);
  return n;
}

class ExecSplitBackward : public ::testing::TestWithParam<SplitCase> {};

TEST_P(ExecSplitBackward, TrainsAsSingleProcessTraining) {
  const SplitCase c = GetParam();
  const Plan plan = split_plan(c);
  const exec::ExecOptions o = float64_options(kSteps);  // the liveness check on
  exec::ExecResult r;
  try {
    r = exec::execute_plan(plan, o);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const std::vector<at::Tensor> got = testing::executor_parameters(r, plan.num_stages());
  EXPECT_LT(max_relative_error(got, reference_parameters(plan, o)), 1e-9);
  if (c.dp == 1) {
    EXPECT_LT(max_relative_error(got, testing::plain_training(plan, o, kSteps)), 1e-9);
  }
  for (int replica = 1; replica < c.dp; ++replica) {
    EXPECT_TRUE(
        testing::all_equal(testing::executor_parameters(r, plan.num_stages(), replica), got));
  }
  // I and W are events of their own in the timeline (op names backward_input, backward_weight),
  // at the versions the schedule declares.
  const int split = events_at_declared_versions(plan, r, Op::kBackwardInput);
  EXPECT_EQ(events_at_declared_versions(plan, r, Op::kBackwardWeight), split);
  if (schedule_info(c.schedule).splits_backward) {
    EXPECT_GT(split, 0);
  }
}

std::string case_name(const ::testing::TestParamInfo<SplitCase>& i) {
  const SplitCase& c = i.param;
  std::string name = fmt::format("{}_D{}_v{}_dp{}_{}", c.schedule, c.devices, c.v, c.dp,
                                 checkpoint_name(c.checkpoint));
  if (c.model != kMlp) name += "_" + c.model.substr(0, c.model.find(':'));
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExecSplitBackward,
    ::testing::Values(SplitCase{"interleaved-1f1b", 2, 1}, SplitCase{"interleaved-1f1b", 2, 2},
                      SplitCase{"interleaved-1f1b", 4, 1}, SplitCase{"interleaved-1f1b", 4, 2},
                      SplitCase{"zb-h1", 2, 1}, SplitCase{"zb-h1", 4, 1}, SplitCase{"zb-h2", 2, 1},
                      SplitCase{"zb-h2", 4, 1}, SplitCase{"zbv", 2, 2}, SplitCase{"zbv", 4, 2},
                      SplitCase{"dualpipev", 2, 2}, SplitCase{"dualpipev", 4, 2},
                      // Checkpointing: a Recompute before each I rebuilds what W will need.
                      SplitCase{"zb-h1", 2, 1, Checkpoint::kAlways},
                      SplitCase{"zbv", 2, 2, Checkpoint::kExceptLast},
                      // Data parallelism: each bucket's all-reduce waits for the W's layers.
                      SplitCase{"zb-h1", 2, 1, Checkpoint::kNone, 2},
                      SplitCase{"zbv", 2, 2, Checkpoint::kNone, 2},
                      // Skip connections: stages of several inputs and outputs (convolutions,
                      // whose weight gradients come with I).
                      SplitCase{"zb-h2", 3, 1, Checkpoint::kNone, 1,
                                "unet:B=2,C=4,image=32,norm=group"}),
    case_name);

// Frozen layers (PipeTransformer Section 3.1) run without autograd: they record nothing, and a W
// of a stage with a frozen prefix computes its trained layers' gradients only. The run ends where
// the same plan under 1F1B (whole backwards) does.
TEST(ExecSplitBackward, FrozenPrefixTrainsAsWithWholeBackwards) {
  Plan plan = split_plan(SplitCase{"zb-h1", 2, 1});
  plan.frozen_layers = 3;  // stage 0 holds layers 0..4
  const exec::ExecOptions o = float64_options(kSteps);
  const exec::ExecResult split = exec::execute_plan(plan, o);
  plan.schedule = "1f1b";
  const exec::ExecResult whole = exec::execute_plan(plan, o);
  EXPECT_LT(max_relative_error(testing::executor_parameters(split, plan.num_stages()),
                               testing::executor_parameters(whole, plan.num_stages())),
            1e-12);
}

// ---- one stage by hand: W is deferred -------------------------------------------------------

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& t : ts) out.push_back(t.clone());
  return out;
}

TEST(ExecSplitBackward, WeightGradientsWaitForBackwardWeight) {
  const Plan plan = exec_plan(ExecSpec{.model = kMlp, .schedule = "zb-h1", .stages = 1});
  exec::PipelineSession split(plan, float64_options(1), nullptr);
  exec::PipelineSession whole(plan, float64_options(1), nullptr);
  exec::StageRuntime* st = split.runtime(0, 0);
  exec::StageRuntime* ref = whole.runtime(0, 0);
  const at::Tensor x = split.data().input(0, 0, 0), y = split.data().target(0, 0, 0);
  const int L = static_cast<int>(st->spec().layers.size());
  const std::vector<at::Tensor> zero = clones(st->gradients(0, L));

  // A forward not told its backward is split has nothing for W.
  st->forward(1, 0, {x}, exec::ForwardKeep::with_graph(0), y);
  EXPECT_THROW(st->backward_input(1, 0, {}), std::logic_error);
  EXPECT_THAT([&] { st->backward_weight(1, 0, nullptr); },
              ::testing::ThrowsMessage<std::runtime_error>(HasSubstr(
                  "stage 0: backward-weight of micro-batch 1 before its backward-input")));
  st->backward(1, 0, {}, nullptr);  // and its whole backward goes on as before
  const std::vector<at::Tensor> after_whole = clones(st->gradients(0, L));
  for (auto& g : st->gradients(0, L)) g.zero_();

  st->forward(0, 0, {x}, {.graph = true, .pinned_version = 0, .split = true}, y);
  st->backward_input(0, 0, {});
  // I ran: every weight of the MLP is a linear's, so no gradient moved; the closures wait.
  EXPECT_TRUE(testing::all_equal(st->gradients(0, L), zero));
  EXPECT_EQ(st->deferred_weight_work(0), L);  // one closure a linear: its weight and its bias
  EXPECT_GT(st->deferred_weight_bytes(), 0);
  EXPECT_EQ(st->awaiting_weight(), std::vector<int>{0});
  // The micro-batch is in flight until W, with its graph version and pin (the liveness walk's).
  EXPECT_EQ(st->holding().micro_batches, (std::vector<exec::HeldMicroBatch>{{0, 0, 0}}));
  EXPECT_THROW(st->backward_input(0, 0, {}), std::runtime_error);
  std::vector<int> reported;
  st->backward_weight(0, 0, [&](int layer) { reported.push_back(layer); });
  EXPECT_EQ(reported, (std::vector<int>{8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(st->awaiting_weight().empty());
  EXPECT_EQ(st->deferred_weight_bytes(), 0);
  EXPECT_TRUE(st->holding().micro_batches.empty());
  EXPECT_EQ(st->holding().versions, (std::vector<exec::HeldVersion>{{0, true, 0}}));
  EXPECT_FALSE(testing::all_equal(st->gradients(0, L), zero));
  EXPECT_LT(max_relative_error(st->gradients(0, L), after_whole), 1e-12);
  // The same micro-batch backwarded whole by another stage: the same gradients.
  ref->forward(0, 0, {x}, exec::ForwardKeep::with_graph(0), y);
  ref->backward(0, 0, {}, nullptr);
  EXPECT_LT(max_relative_error(st->gradients(0, L), ref->gradients(0, L)), 1e-12);
}

// The synthetic layers (models/synthetic.hpp) split too: I spins for the whole backward less the
// weight half and W for the weight half (here wgrad_ms = 0.2 of bwd_ms = 0.3 per sample), and the
// run trains as single-process training does.
TEST(ExecSplitBackward, SyntheticLayersDeferTheirWeightHalf) {
  // W spins 20 times as long as I, so that I's autograd overhead (largest under ThreadSanitizer,
  // about 0.25 ms) cannot make the halves' medians cross.
  const char* model = "uniform:layers=4,fwd_ms=0.1,bwd_ms=2.1,wgrad_ms=2,act_kb=1,param_kb=1";
  const Plan plan = split_plan(SplitCase{.schedule = "zb-h1", .model = model}, 4);
  const exec::ExecOptions o = float64_options(1);
  const exec::ExecResult r = exec::execute_plan(plan, o);
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, plan.num_stages()),
                               reference_parameters(plan, o)),
            1e-9);
  // Micro-batch size 1: I spins 0.1 ms per layer, W 2 ms; two layers a stage.
  std::vector<double> input, weight;
  for (const auto& e : r.timeline.events) {
    if (e.action.op == Op::kBackwardInput) input.push_back(e.duration());
    if (e.action.op == Op::kBackwardWeight) weight.push_back(e.duration());
  }
  ASSERT_EQ(input.size(), 8u);
  ASSERT_EQ(weight.size(), 8u);
  std::sort(input.begin(), input.end());
  std::sort(weight.begin(), weight.end());
  EXPECT_GE(input[0], 0.2e-3);
  EXPECT_GE(weight[0], 4e-3);
  EXPECT_LT(input[4], weight[4]);  // medians: W takes longer than I here
}

// The check of what awaits W names the stage and both sides.
TEST(ExecSplitBackward, LivenessCheckNamesMicroBatchesAwaitingTheirWeightHalf) {
  EXPECT_EQ(exec::awaiting_difference({{1, {2, 3}}}, {{1, {2, 3}}}), "");
  EXPECT_EQ(exec::awaiting_difference({{1, {2, 3}}}, {{1, {2}}}),
            "stage 1: awaiting backward-weight: the walk mb 2, mb 3; the stage mb 2");
  EXPECT_EQ(exec::awaiting_difference({}, {{0, {4}}}),
            "stage 0: awaiting backward-weight: the walk none; the stage mb 4");
}

// A split schedule checked against the walk of 1F1B (whole backwards) of the same shape: the
// run's I frees nothing where 1F1B's B frees the micro-batch, and the check says so.
TEST(ExecSplitBackward, LivenessCheckCatchesAWalkOfWholeBackwards) {
  const Plan plan = split_plan(SplitCase{"zb-h1", 2, 1}, 4);
  exec::ExecOptions o = float64_options(1);
  o.check_liveness_against = "1f1b";
  EXPECT_THAT([&] { exec::execute_plan(plan, o); },
              ::testing::ThrowsMessage<RunFailure>(HasSubstr("liveness check: device ")));
}

// ---- the profiler's weight half ---------------------------------------------------------------

// The profiler times the split backward's halves (exec/profile/profiler.hpp): a synthetic layer's
// weight half is what it spins for (wgrad_ms = 0.4 of bwd_ms = 0.6 per sample), and the notes
// compare I + W with the whole backward.
TEST(ExecSplitBackwardProfile, WeightHalfIsMeasured) {
  exec::ProfileOptions o;
  o.micro_batches = {1, 2};
  o.warmup = 1;
  o.repeats = 3;
  o.contention = false;
  const Profile p = exec::profile_model(
      "uniform:layers=2,fwd_ms=0.2,bwd_ms=0.6,wgrad_ms=0.4,act_kb=1,param_kb=1", o);
  for (const auto& l : p.layers) {
    for (const auto& t : l.timings) {
      const double expected = 0.4e-3 * t.micro_batch;
      EXPECT_GE(t.backward_weight_s, expected) << l.name << " b=" << t.micro_batch;
      EXPECT_LT(t.backward_weight_s, 2 * expected) << l.name << " b=" << t.micro_batch;
      EXPECT_LE(t.backward_weight_s, t.backward_s);
    }
  }
  EXPECT_THAT(p.notes, HasSubstr("split backward (I + W, weight halves of linear layers deferred) "
                                 "over the whole backward: "));
  // An MLP's linears: the weight half is a real share of each layer's backward; what the
  // profiler writes, the loader accepts.
  const Profile mlp = exec::profile_model("mlp:layers=2,width=64,input=16", o);
  for (const auto& l : mlp.layers) {
    for (const auto& t : l.timings) {
      EXPECT_GT(t.backward_weight_s, 0) << l.name;
      EXPECT_LE(t.backward_weight_s, t.backward_s) << l.name;
    }
  }
  EXPECT_NO_THROW(profile_from_json(JsonView(profile_to_json(mlp), "measured.json")));
}

// ---- the split linear against the plain one ------------------------------------------------

struct Grads {
  at::Tensor x, w, b;
};

// Gradients of sum(linear(x, w, b) * seed); `mode`: 0 plain at::linear, 1 the split linear
// computing at once, 2 deferring (the closures run after the backward).
Grads linear_grads(const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0,
                   const at::Tensor& seed, int mode) {
  const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  const at::Tensor b = b0.defined() ? b0.clone().requires_grad_(true) : at::Tensor();
  auto store = c10::make_intrusive<models::DeferredWeightGrads>();
  at::Tensor y;
  {
    const models::RecordWeightGrads record(
        mode == 0 ? c10::intrusive_ptr<models::DeferredWeightGrads>() : store);
    y = models::linear(x, w, b);
  }
  store->set_deferring(mode == 2);
  torch::autograd::backward({y}, {seed});
  if (mode == 2) {
    EXPECT_FALSE(w.grad().defined());
    EXPECT_EQ(store->pending(), 1);  // one closure: dW and db together
    store->run();
  }
  return {x.grad(), w.grad(), b.defined() ? b.grad() : at::Tensor()};
}

TEST(SplitLinear, GradientsEqualThePlainLinears) {
  at::manual_seed(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{5, 4}, {3, 5, 4}}) {
    for (bool bias : {true, false}) {
      const at::Tensor x = at::randn(shape, f64), w = at::randn({6, 4}, f64);
      const at::Tensor b = bias ? at::randn({6}, f64) : at::Tensor();
      std::vector<int64_t> out = shape;
      out.back() = 6;
      const at::Tensor seed = at::randn(out, f64);
      const Grads plain = linear_grads(x, w, b, seed, 0);
      for (int mode : {1, 2}) {
        const Grads split = linear_grads(x, w, b, seed, mode);
        EXPECT_TRUE(at::allclose(split.x, plain.x, 1e-14, 1e-14)) << mode;
        EXPECT_TRUE(at::allclose(split.w, plain.w, 1e-14, 1e-14)) << mode;
        if (bias) {
          EXPECT_TRUE(at::allclose(split.b, plain.b, 1e-14, 1e-14)) << mode;
        }
      }
    }
  }
}

// Under the CPU's bfloat16 autocast the split linear computes in bfloat16 as autocast's linear
// does, and hands back gradients in the tensors' own dtypes.
TEST(SplitLinear, UnderAutocastMatchesAutocastsLinear) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({3, 5, 16}), w = at::randn({8, 16}), b = at::randn({8});
  const at::Tensor seed = at::randn({3, 5, 8}, at::TensorOptions().dtype(at::kBFloat16));
  auto grads = [&](int mode) {
    const exec::AutocastGuard autocast(at::kCPU, at::kBFloat16, true);
    return linear_grads(x, w, b, seed, mode);
  };
  const Grads plain = grads(0);
  ASSERT_EQ(plain.w.scalar_type(), at::kFloat);
  for (int mode : {1, 2}) {
    const Grads split = grads(mode);
    EXPECT_EQ(split.x.scalar_type(), at::kFloat);
    EXPECT_EQ(split.w.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(split.x, plain.x, 1e-2, 1e-2)) << mode;
    EXPECT_TRUE(at::allclose(split.w, plain.w, 1e-2, 1e-2)) << mode;
    EXPECT_TRUE(at::allclose(split.b, plain.b, 1e-2, 1e-2)) << mode;
  }
}

// A split schedule under bfloat16 autocast ends where 1F1B does under the same autocast: the
// halves round as the whole backward does.
TEST(ExecSplitBackward, BfloatAutocastEndsWhereWholeBackwardsEnd) {
  Plan plan = split_plan(SplitCase{"zb-h1", 2, 1}, 4);
  exec::ExecOptions o = float64_options(1);
  o.float64 = false;
  o.autocast = at::kBFloat16;
  exec::ExecResult split, whole;
  try {
    split = exec::execute_plan(plan, o);
  } catch (const InputError& e) {
    ASSERT_THAT(e.what(), HasSubstr("cannot train under this CPU's autocast")) << e.what();
    GTEST_SKIP() << e.what();
  }
  plan.schedule = "1f1b";
  whole = exec::execute_plan(plan, o);
  const double err = max_relative_error(testing::executor_parameters(split, plan.num_stages()),
                                        testing::executor_parameters(whole, plan.num_stages()));
  std::printf("zb-h1 against 1f1b under bfloat16 autocast: weights' relative error %.3e\n", err);
  EXPECT_LT(err, 1e-4);
}

}  // namespace
}  // namespace pipetwin
