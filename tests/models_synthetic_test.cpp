// models/: the synthetic uniform model (timed spin layers, their gradient).
#include <gtest/gtest.h>

#include <torch/utils.h>
#include <chrono>

#include "models/layers.hpp"
#include "models/synthetic.hpp"
#include "models/zoo.hpp"

namespace pipetwin::models {
namespace {

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(ModelsSynthetic, MirrorsTheCoreProfile) {
  auto m = build_model("uniform:layers=3,act_kb=1/2/4,param_kb=2,input_kb=0.5", torch::kFloat32);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].name, "layer0");
  EXPECT_EQ(m.layers[2].kind, "synthetic");
  EXPECT_EQ(m.task, Task::kRegression);
  EXPECT_EQ(m.sample.input_shape, (std::vector<int64_t>{128}));  // 512 B of float32
  EXPECT_EQ(m.layers[1].num_parameters(), 512);                  // 2 KiB of float32
  torch::NoGradGuard no_grad;
  const auto y = m.forward(m.synthetic_input(2, 0));
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 1024}));  // 4 KiB of float32
  // float64 halves the element count.
  EXPECT_EQ(build_model("uniform:layers=1,act_kb=1", torch::kFloat64).sample.input_shape,
            (std::vector<int64_t>{128}));
}

TEST(ModelsSynthetic, ReadsTheTimesOfTheCoreSyntheticProfile) {
  const auto c = synthetic_config(ModelSpec::parse("uniform:fwd_ms=1/2,overhead_ms=0.5", "test"));
  ASSERT_EQ(c.layers.size(), 2u);
  EXPECT_NEAR(c.layers[1].fwd_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.layers[1].bwd_ms, 4.0, 1e-9);  // default 2 * fwd_ms
  EXPECT_NEAR(c.layers[1].recompute_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.layers[1].overhead_ms, 0.5, 1e-9);
}

TEST(ModelsSynthetic, SpinsForTheAskedTime) {
  // forward 2 + 4*b ms, backward 2 + 8*b ms, recompute 2 + 6*b ms; b = 3.
  auto m = build_model("uniform:layers=1,fwd_ms=4,bwd_ms=8,recompute_ms=6,overhead_ms=2,act_kb=1",
                       torch::kFloat32);
  const auto x = m.synthetic_input(3, 0).requires_grad_(true);  // the layer has no parameters
  auto start = std::chrono::steady_clock::now();
  const auto y = m.forward(x);
  const double fwd = elapsed_ms(start);
  start = std::chrono::steady_clock::now();
  y.sum().backward();
  const double bwd = elapsed_ms(start);
  double recompute = 0;
  {
    SyntheticRecompute scope;
    torch::NoGradGuard no_grad;
    start = std::chrono::steady_clock::now();
    m.forward(x);
    recompute = elapsed_ms(start);
  }
  // A spin never ends early; a busy CI machine may make it late (generous upper bounds).
  EXPECT_GE(fwd, 14.0);
  EXPECT_LT(fwd, 14.0 + 50.0);
  EXPECT_GE(bwd, 26.0);
  EXPECT_LT(bwd, 26.0 + 50.0);
  EXPECT_GE(recompute, 20.0);
  EXPECT_LT(recompute, 20.0 + 50.0);
}

// Central finite differences of a random projection of the output, in float64.
TEST(ModelsSynthetic, GradientMatchesFiniteDifferences) {
  // 64 B -> 8 features, 32 B -> 4 parameters; the second layer changes the width (8 -> 2).
  auto m = build_model(
      "uniform:layers=2,input_kb=0.0625,act_kb=0.0625/0.015625,param_kb=0.03125,fwd_ms=0,bwd_ms=0",
      torch::kFloat64, 3);
  const auto x = m.synthetic_input(2, 1).requires_grad_(true);
  const auto r = at::randn({2, 2}, at::kDouble);
  auto objective = [&](const torch::Tensor& input) { return (m.forward(input) * r).sum(); };
  objective(x).backward();
  std::vector<torch::Tensor> wrt = m.parameters();
  wrt.push_back(x);
  const double h = 1e-6;
  for (const auto& t : wrt) {
    const auto analytic = t.grad().clone();
    auto flat = t.detach().view(-1);
    for (int64_t i = 0; i < flat.numel(); ++i) {
      torch::NoGradGuard no_grad;
      const double saved = flat[i].item<double>();
      flat[i] = saved + h;
      const double up = objective(x.detach()).item<double>();
      flat[i] = saved - h;
      const double down = objective(x.detach()).item<double>();
      flat[i] = saved;
      EXPECT_NEAR(analytic.view(-1)[i].item<double>(), (up - down) / (2 * h), 1e-7) << i;
    }
  }
}

}  // namespace
}  // namespace pipetwin::models
