// core/linear_fit.hpp: t(b) = a + c*b by non-negative least squares, with residuals.
#include "core/linear_fit.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace pipetwin {
namespace {

constexpr double kTol = 1e-12;

TEST(LinearFit, RecoversExactLinesAtAnySampleSet) {
  struct Case {
    double a, c;
    std::vector<double> b;
  };
  const std::vector<Case> cases = {
      {0.5, 0.25, {1, 2, 4, 8}},
      {0.0, 3e-3, {1, 2, 4, 8}},
      {2e-4, 0.0, {1, 16}},
      {1e-5, 7e-6, {3, 5, 6, 64, 128}},
  };
  for (const auto& k : cases) {
    std::vector<double> t;
    for (double b : k.b) t.push_back(k.a + k.c * b);
    const LinearFit fit = fit_linear(k.b, t);
    EXPECT_NEAR(fit.a, k.a, kTol) << "a=" << k.a << " c=" << k.c;
    EXPECT_NEAR(fit.c, k.c, kTol) << "a=" << k.a << " c=" << k.c;
    EXPECT_NEAR(fit.rms_residual, 0, kTol);
    EXPECT_NEAR(fit.max_rel_residual, 0, 1e-9);
    // Extrapolation and interpolation follow the line.
    EXPECT_NEAR(fit(3), k.a + 3 * k.c, kTol);
    EXPECT_NEAR(fit(256), k.a + 256 * k.c, 1e-10);
  }
}

TEST(LinearFit, OneSampleIsAProportion) {
  const LinearFit fit = fit_linear({4}, {2e-3});
  EXPECT_EQ(fit.a, 0);
  EXPECT_NEAR(fit.c, 0.5e-3, kTol);
  EXPECT_NEAR(fit(8), 4e-3, kTol);
  EXPECT_NEAR(fit.rms_residual, 0, kTol);
}

TEST(LinearFit, RepeatedSizeIsAProportionThroughTheMean) {
  // b = {2, 2}, t = {1, 3}: c = (2*1 + 2*3) / (4 + 4) = 1, residuals +1 and -1.
  const LinearFit fit = fit_linear({2, 2}, {1, 3});
  EXPECT_EQ(fit.a, 0);
  EXPECT_NEAR(fit.c, 1, kTol);
  EXPECT_NEAR(fit.rms_residual, 1, kTol);
  EXPECT_NEAR(fit.max_rel_residual, 1, kTol);  // |2 - 1| / 1
}

TEST(LinearFit, NegativeSlopeFallsBackToTheMean) {
  // Unconstrained: c = -1, a = 4. Time cannot fall with more samples: c = 0, a = mean = 2,
  // residuals -1, 0, +1.
  const LinearFit fit = fit_linear({1, 2, 3}, {3, 2, 1});
  EXPECT_EQ(fit.c, 0);
  EXPECT_NEAR(fit.a, 2, kTol);
  EXPECT_NEAR(fit.rms_residual, std::sqrt(2.0 / 3.0), kTol);
  EXPECT_NEAR(fit.max_rel_residual, 1, kTol);  // |2 - 1| / 1 at b = 3
  EXPECT_NEAR(fit(100), 2, kTol);
}

TEST(LinearFit, NegativeInterceptFallsBackToAProportion) {
  // Unconstrained: t = -1 + 2b. Refit with a = 0: c = (1*1 + 2*3) / (1 + 4) = 1.4;
  // residuals 1.4 - 1 = 0.4 and 2.8 - 3 = -0.2.
  const LinearFit fit = fit_linear({1, 2}, {1, 3});
  EXPECT_EQ(fit.a, 0);
  EXPECT_NEAR(fit.c, 1.4, kTol);
  EXPECT_NEAR(fit.rms_residual, std::sqrt((0.16 + 0.04) / 2), kTol);
  EXPECT_NEAR(fit.max_rel_residual, 0.4, kTol);
  // Extrapolating towards zero never predicts a negative time.
  EXPECT_GE(fit(0.01), 0);
}

TEST(LinearFit, NoisyDataMatchesHandComputedLeastSquares) {
  // mean b = 2.5, mean t = 3.5, Sxx = 5, Sxy = 4.7: c = 0.94, a = 3.5 - 0.94 * 2.5 = 1.15.
  // Predictions 2.09, 3.03, 3.97, 4.91; residuals -0.01, 0.13, -0.23, 0.11.
  const LinearFit fit = fit_linear({1, 2, 3, 4}, {2.1, 2.9, 4.2, 4.8});
  EXPECT_NEAR(fit.c, 0.94, kTol);
  EXPECT_NEAR(fit.a, 1.15, kTol);
  EXPECT_NEAR(fit.rms_residual, std::sqrt(0.082 / 4), kTol);
  EXPECT_NEAR(fit.max_rel_residual, 0.23 / 4.2, kTol);
  EXPECT_NEAR(fit(10), 1.15 + 9.4, 1e-11);
}

TEST(LinearFit, ZeroTimesFitZeroAndAreLeftOutOfTheRelativeResidual) {
  const LinearFit zero = fit_linear({1, 2, 4}, {0, 0, 0});
  EXPECT_EQ(zero(8), 0);
  EXPECT_EQ(zero.max_rel_residual, 0);
  // t = {0, 2}: exact line t = -2 + 2b has a < 0; proportion c = (0 + 4) / (1 + 4) = 0.8 with
  // residuals 0.8 (at t = 0, not a relative error) and 1.6 - 2 = -0.4 (relative 0.2).
  const LinearFit fit = fit_linear({1, 2}, {0, 2});
  EXPECT_EQ(fit.a, 0);
  EXPECT_NEAR(fit.c, 0.8, kTol);
  EXPECT_NEAR(fit.max_rel_residual, 0.2, kTol);
}

TEST(LinearFit, EvaluationClampsAtZero) {
  LinearFit f;
  f.a = -1;
  f.c = 0.5;
  EXPECT_EQ(f(1), 0);
  EXPECT_EQ(f(4), 1);
}

TEST(LinearFit, RejectsMismatchedOrEmptySamples) {
  EXPECT_THROW(fit_linear({}, {}), std::invalid_argument);
  EXPECT_THROW(fit_linear({1, 2}, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace pipetwin
