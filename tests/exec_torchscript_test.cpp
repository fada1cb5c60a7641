// `torchscript:` models in the executor (models/torchscript.hpp): modules scripted and saved by
// Debian's python3-torch 1.13 (tests/data/torchscript_fixtures.py, the LibTorch pipetwin links)
// train in every schedule as single-process training in Python does — torch.optim.SGD with
// momentum on the loaded module, over the mini-batches the executor drew — on CPU threads and on
// two Gloo processes; asynchronous schedules train as the reference trainer replays their weight
// versions (exec/runtime/reference.hpp), from Python's first loss. And `pipetwin profile | plan |
// run | train` take one from the command line. Skipped, saying so, where python3-torch is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "exec/platform/tensor_io.hpp"
#include "exec/runtime/reference.hpp"
#include "exec_test_util.hpp"
#include "torchscript_test_util.hpp"

namespace pipetwin {
namespace {

using testing::fixture_model;
using ::testing::HasSubstr;
using testing::max_relative_error;

constexpr int kSteps = 3;

struct Case {
  std::string file;  // a fixture: mlp64.pt, tfm64.pt, ...
  std::string schedule;
  int devices = 2;
  int v = 1;  // model chunks per device (interleaved-1f1b, zbv, dualpipev)
  Checkpoint checkpoint = Checkpoint::kNone;
  int dp = 1;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << fmt::format("{} {} D={} v={} dp={} checkpoint {}", c.file, c.schedule, c.devices, c.v,
                     c.dp, checkpoint_name(c.checkpoint));
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  std::string name = fmt::format("{}_{}_D{}_v{}_dp{}_{}", c.file.substr(0, c.file.find('.')),
                                 c.schedule, c.devices, c.v, c.dp, checkpoint_name(c.checkpoint));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

bool float64(const std::string& file) {
  return file.find("64") != std::string::npos;
}

// Stages of the case's model placed as its schedule lays them out, batch 8 in 4 micro-batches.
Plan case_plan(const Case& c) {
  Plan p = testing::exec_plan(testing::ExecSpec{.model = fixture_model(c.file),
                                                .schedule = c.schedule,
                                                .stages = c.devices * c.v,
                                                .chunks = 4,
                                                .micro_batch = 2,
                                                .dp = c.dp,
                                                .checkpoint = c.checkpoint});
  const std::vector<int> device =
      virtual_stage_layout(stage_layout_of(c.schedule), c.devices, c.v, c.schedule);
  for (size_t s = 0; s < p.stages.size(); ++s) p.stages[s].device = device[s];
  p.validate("torchscript plan");
  return p;
}

exec::ExecOptions case_options(const std::string& file) {
  exec::ExecOptions o = testing::float64_options(kSteps);  // SGD, lr 0.05, momentum 0.9, seed 7
  o.float64 = float64(file);
  return o;
}

// Python's training of `file` on the mini-batches the executor draws for `plan`.
testing::PythonTraining python_reference(const Plan& plan, const std::string& file,
                                         const exec::ExecOptions& o) {
  const models::LayeredModel model =
      models::build_model(plan.model, o.float64 ? at::kDouble : at::kFloat, o.seed);
  auto data = exec::synthetic_batches(model, plan.batch_size, o.seed, o.float64);
  std::vector<at::Tensor> batches;
  for (int step = 0; step < o.iterations; ++step) {
    const auto [x, y] = data->mini_batch(step);
    batches.push_back(x);
    batches.push_back(y);
  }
  const std::string loss = model.task == models::Task::kRegression ? "mse" : "cross_entropy";
  testing::PythonTraining r =
      testing::python_training(file, batches, loss, o.optimizer.lr, o.optimizer.momentum);
  EXPECT_EQ(r.losses.size(), static_cast<size_t>(o.iterations));
  return r;
}

// The tolerance of "equal to Python's training": float32 as the issue states it; float64 runs land
// near 1e-14.
double tolerance(const std::string& file) {
  return float64(file) ? 1e-10 : 1e-6;
}

void expect_losses(const std::vector<double>& got, const std::vector<double>& want, double tol,
                   size_t count) {
  ASSERT_GE(got.size(), count);
  ASSERT_GE(want.size(), count);
  for (size_t i = 0; i < count; ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "step " << i;
}

class TorchScriptSync : public ::testing::TestWithParam<Case> {};

TEST_P(TorchScriptSync, EqualsPythonTraining) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const Case c = GetParam();
  const Plan plan = case_plan(c);
  const exec::ExecOptions o = case_options(c.file);
  const testing::PythonTraining py = python_reference(plan, c.file, o);
  exec::ExecResult r;
  try {
    r = exec::execute_plan(plan, o);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  expect_losses(r.step_loss, py.losses, tolerance(c.file), kSteps);
  for (int replica = 0; replica < c.dp; ++replica) {
    const auto got = testing::executor_parameters(r, plan.num_stages(), replica);
    ASSERT_EQ(got.size(), py.params.size());
    EXPECT_LT(max_relative_error(got, py.params), tolerance(c.file)) << "replica " << replica;
  }
  // Training moved the weights.
  const auto initial =
      models::build_model(plan.model, o.float64 ? at::kDouble : at::kFloat, 0).parameters();
  EXPECT_GT(max_relative_error(py.params, initial), 1e-3);
}

std::vector<Case> sync_cases() {
  std::vector<Case> out;
  for (const std::string file : {"mlp64.pt", "tfm64.pt"}) {
    for (const Case& c :
         {Case{file, "naive"}, Case{file, "gpipe"}, Case{file, "gpipe", 3, 1, Checkpoint::kAlways},
          Case{file, "1f1b", 3}, Case{file, "1f1b", 2, 1, Checkpoint::kExceptLast},
          Case{file, "interleaved-1f1b", 2, 2}, Case{file, "zb-h1", 2}, Case{file, "zb-h2", 3},
          Case{file, "zbv", 2, 2}, Case{file, "dualpipev", 2, 2},
          Case{file, "gpipe", 2, 1, Checkpoint::kNone, 2}}) {
      out.push_back(c);
    }
  }
  // float32, the 1e-6; a skip edge across stages; a regression loss.
  for (const Case& c : {Case{"mlp32.pt", "gpipe"}, Case{"mlp32.pt", "1f1b", 3},
                        Case{"mlp32.pt", "zbv", 2, 2}, Case{"tfm32.pt", "1f1b"},
                        Case{"tfm32.pt", "interleaved-1f1b", 2, 2}, Case{"skip64.pt", "gpipe", 3},
                        Case{"skip64.pt", "zb-h1", 2}, Case{"reg64.pt", "1f1b", 3}}) {
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schedules, TorchScriptSync, ::testing::ValuesIn(sync_cases()), case_name);

// Asynchronous schedules train on stale weights, so Python's synchronous SGD is not theirs: they
// equal the reference trainer's replay of their declared weight versions on the TorchScript model,
// start from Python's first loss (every micro-batch of step 0 reads the initial weights), and end
// away from synchronous training.
class TorchScriptAsync : public ::testing::TestWithParam<Case> {};

TEST_P(TorchScriptAsync, EqualsTheReferenceOfItsWeightVersions) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const Case c = GetParam();
  const Plan plan = case_plan(c);
  const exec::ExecOptions o = case_options(c.file);
  const testing::PythonTraining py = python_reference(plan, c.file, o);
  const exec::ExecResult r = exec::execute_plan(plan, o);
  const PlanContext ctx(plan, kSteps);
  const exec::ReferenceResult ref =
      exec::reference_training(plan, make_schedule(plan.schedule, ctx.shape), o);
  std::vector<at::Tensor> expected;
  for (const auto& st : ref.stage_parameters) expected.insert(expected.end(), st.begin(), st.end());
  const auto got = testing::executor_parameters(r, plan.num_stages());
  EXPECT_LT(max_relative_error(got, expected), 1e-9);
  expect_losses(r.step_loss, py.losses, tolerance(c.file), 1);
  EXPECT_GT(max_relative_error(got, py.params), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, TorchScriptAsync,
    ::testing::Values(Case{"mlp64.pt", "pipedream", 3}, Case{"mlp64.pt", "ddg"},
                      Case{"mlp64.pt", "feature-replay"}, Case{"mlp64.pt", "ftpipe-async", 3},
                      Case{"tfm64.pt", "pipedream", 3}, Case{"tfm64.pt", "ddg"},
                      Case{"tfm64.pt", "feature-replay"}, Case{"tfm64.pt", "ftpipe-async", 3}),
    case_name);

// Two processes (c10d Gloo on 127.0.0.1), each hosting its devices' stages: the weights Python's
// training ends with.
class TorchScriptGloo : public ::testing::TestWithParam<Case> {};

TEST_P(TorchScriptGloo, TwoProcessesEqualPythonTraining) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const Case c = GetParam();
  const test::TempDir dir;
  const Plan plan = case_plan(c);
  const exec::ExecOptions o = case_options(c.file);
  const testing::PythonTraining py = python_reference(plan, c.file, o);
  const testing::Outcome run = testing::sh(fmt::format(
      "{}/pipetwin run --plan {} --nproc 2 --iterations {} {} --seed {} --optimizer sgd --lr {} "
      "--momentum {} --no-pin --timeout 60 -q --save-parameters {}",
      PIPETWIN_BINARY_DIR, testing::write_plan(plan, dir.path()), kSteps,
      o.float64 ? "--float64" : "", o.seed, o.optimizer.lr, o.optimizer.momentum,
      dir.file("weights")));
  ASSERT_EQ(run.status, 0) << run.output;
  for (int replica = 0; replica < c.dp; ++replica) {
    std::vector<at::Tensor> got;
    for (int s = 0; s < plan.num_stages(); ++s) {
      for (const auto& t :
           exec::load_tensors(dir.file(fmt::format("weights/replica{}_stage{}.pt", replica, s))))
        got.push_back(t);
    }
    EXPECT_LT(max_relative_error(got, py.params), tolerance(c.file)) << "replica " << replica;
  }
}

std::vector<Case> gloo_cases() {
  std::vector<Case> out;
  for (const std::string file : {"mlp64.pt", "tfm64.pt"}) {
    for (const Case& c :
         {Case{file, "naive"}, Case{file, "gpipe"}, Case{file, "gpipe", 2, 1, Checkpoint::kAlways},
          Case{file, "1f1b"}, Case{file, "interleaved-1f1b", 2, 2}, Case{file, "zb-h1"},
          Case{file, "zb-h2"}, Case{file, "zbv", 2, 2}, Case{file, "dualpipev", 2, 2},
          Case{file, "gpipe", 1, 1, Checkpoint::kNone, 2}}) {
      out.push_back(c);
    }
  }
  out.push_back(Case{"mlp32.pt", "1f1b"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schedules, TorchScriptGloo, ::testing::ValuesIn(gloo_cases()), case_name);

// `pipetwin train` (exec/train/trainer.hpp) on synthetic data draws the same mini-batches.
TEST(TorchScriptTrain, TrainerEqualsPythonTraining) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const test::TempDir dir;
  const Case c{"tfm64.pt", "1f1b"};
  const Plan plan = case_plan(c);
  exec::TrainOptions t = testing::synthetic_train_options(kSteps, 1, dir.path() / "log.jsonl");
  t.exec.seed = case_options(c.file).seed;
  exec::Trainer trainer(plan, t);
  const exec::TrainResult r = trainer.run();
  ASSERT_EQ(r.steps, kSteps);
  exec::ExecOptions o = t.exec;
  o.iterations = kSteps;
  const testing::PythonTraining py = python_reference(plan, c.file, o);
  std::vector<at::Tensor> got;
  for (int s = 0; s < plan.num_stages(); ++s) {
    for (const auto& p : r.parameters.at({0, s})) got.push_back(p);
  }
  EXPECT_LT(max_relative_error(got, py.params), 1e-10);
}

class TorchScriptCli : public test::TempDirTest {
 protected:
  std::string bin() const { return std::string(PIPETWIN_BINARY_DIR) + "/pipetwin"; }
  testing::Outcome sh(const std::string& args) const { return testing::sh(bin() + " " + args); }
};

// The walk-through of docs/your-model.md: profile (flags for a module saved without metadata),
// plan on its profile, run and train the plan.
TEST_F(TorchScriptCli, ProfilePlanRunTrain) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const std::string model = fixture_model("mlp32_plain.pt");
  const std::string profile = (dir_ / "p.json").string(), plan = (dir_ / "plan.json").string();
  testing::Outcome o =
      sh(fmt::format("profile --model {} --input-shape 16 --micro-batch 1,4 --warmup 1 "
                     "--repeats 2 --no-contention --no-cold -q -o {}",
                     model, profile));
  ASSERT_EQ(o.status, 0) << o.output;
  const Profile p = load_profile(profile);
  EXPECT_EQ(p.model, model + ",input_shape=16");
  ASSERT_EQ(p.num_layers(), 6);
  EXPECT_EQ(p.layers[0].name, "fc0");
  o =
      sh(fmt::format("plan --profile {} --cluster local-cpu-2 -K 2 -B 8 -M 4 --schedule 1f1b "
                     "-o {}",
                     profile, plan));
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_EQ(load_plan(plan).model, model + ",input_shape=16");
  o = sh(fmt::format("run --plan {} --iterations 2 --no-pin --metrics {}", plan,
                     (dir_ / "m.json").string()));
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_THAT(o.output, HasSubstr("loss per step:"));
  o = sh(fmt::format("train --plan {} --data synthetic --steps-per-epoch 2 --no-pin -q --log {}",
                     plan, (dir_ / "log.jsonl").string()));
  EXPECT_EQ(o.status, 0) << o.output;
}

TEST_F(TorchScriptCli, RefusesWithOneLineNamingTheFileAndTheChild) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const std::string out = " -o " + (dir_ / "p.json").string();
  testing::expect_refused(
      bin() + " profile --model ",
      {{fixture_model("two_inputs.pt") + " --input-shape 16" + out,
        "two_inputs.pt: child 3 (\"head\") takes two tensors (x, skip) and no skip edge feeds "
        "the second"},
       {fixture_model("tuple_out.pt") + " --input-shape 16" + out,
        "tuple_out.pt: child 1 (\"pair\") returns (Tensor, Tensor)"},
       {fixture_model("mlp32_plain.pt") + out, "mlp32_plain.pt: no input shape"},
       {"mlp --input-shape 16" + out, "describe a torchscript:FILE.pt model, not \"mlp\""}});
}

}  // namespace
}  // namespace pipetwin
