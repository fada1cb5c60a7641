// core/elastic/freeze_policy: Equation 1 on gradient norms, its closed form Equation 3, the
// gradient-norm accumulator and the freeze interval.
#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/elastic/freeze_policy.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;

// Equation 1's bound term iterated on reals: L(T) = L(T-1) + alpha (L - L(T-1)), L(0) = 0.
double bound_by_recursion(int L, double alpha, int T) {
  double x = 0;
  for (int t = 1; t <= T; ++t) x = x + alpha * (L - x);
  return x;
}

TEST(Equation3, ClosedFormMatchesTheRecursionAndThePrintedSum) {
  for (const auto& [L, alpha] :
       std::vector<std::pair<int, double>>{{12, 1.0 / 3}, {24, 0.2}, {12, 0.5}}) {
    for (int T = 1; T <= 12; ++T) {
      const double recursion = bound_by_recursion(L, alpha, T);
      EXPECT_NEAR(alpha_bound(L, alpha, T), recursion, 1e-9) << L << " " << alpha << " " << T;
      EXPECT_NEAR(alpha_bound_as_printed(L, alpha, T), recursion, 1e-9)
          << L << " " << alpha << " " << T;
    }
  }
  // Equation 4: L(1) = alpha L.
  EXPECT_DOUBLE_EQ(alpha_bound(12, 1.0 / 3, 1), 4.0);
  // L (1 - (2/3)^2) = 12 * 5/9.
  EXPECT_NEAR(alpha_bound(12, 1.0 / 3, 2), 20.0 / 3, 1e-12);
}

TEST(Equation3, WholeLayersForVitB16AtAlphaOneThird) {
  // floor(12 (1 - (2/3)^T)): 4, 6.67, 8.44, 9.63, 10.42, 10.95, 11.30.
  std::vector<int> got;
  for (int T = 1; T <= 7; ++T) got.push_back(bound_frozen_layers(12, 1.0 / 3, T));
  EXPECT_THAT(got, ::testing::ElementsAre(4, 6, 8, 9, 10, 10, 11));
}

TEST(Equation3, LargerAlphaFreezesFaster) {
  for (int T = 1; T <= 8; ++T) {
    EXPECT_LT(alpha_bound(24, 0.2, T), alpha_bound(24, 1.0 / 3, T));
    EXPECT_LT(alpha_bound(24, 1.0 / 3, T), alpha_bound(24, 0.5, T));
    EXPECT_LT(alpha_bound(24, 0.5, T), 24.0);  // never everything
  }
}

TEST(FreezePolicy, WithoutGradientNormsFollowsTheBoundAlone) {
  FreezePolicy policy({12, 1.0 / 3, FreezeUnit::kEpoch, 1});
  for (int T = 1; T <= 10; ++T) {
    EXPECT_EQ(policy.freeze_step(), bound_frozen_layers(12, 1.0 / 3, T)) << T;
    EXPECT_NEAR(policy.frozen_real(), alpha_bound(12, 1.0 / 3, T), 1e-9);
  }
  EXPECT_EQ(policy.T(), 10);
}

TEST(FreezePolicy, SmallestGradientNormCapsTheBound) {
  // L = 12, alpha = 1/3. Step 1: bound 4; layer 1 has the smallest norm, so layers 0 and 1
  // freeze: min(4, 2) = 2.
  FreezePolicy policy({12, 1.0 / 3, FreezeUnit::kEpoch, 1});
  std::vector<double> norms(12, 5.0);
  norms[1] = 1.0;
  policy.add_gradient_norms(norms);
  EXPECT_EQ(policy.freeze_step(), 2);
  // Step 2: bound 2 + (12 - 2)/3 = 5.33; smallest active norm at layer 7 (count 8): 5 layers.
  norms.assign(12, 5.0);
  norms[0] = 0.1;  // frozen: ignored
  norms[7] = 2.0;
  policy.add_gradient_norms(norms);
  EXPECT_EQ(policy.freeze_step(), 5);
  EXPECT_NEAR(policy.frozen_real(), 2 + 10.0 / 3, 1e-12);
  // Step 3: bound 5.33 + 6.67/3 = 7.56; smallest at layer 5 (count 6): 6 layers, carried as 6.
  norms.assign(12, 5.0);
  norms[5] = 0.5;
  policy.add_gradient_norms(norms);
  EXPECT_EQ(policy.freeze_step(), 6);
  EXPECT_DOUBLE_EQ(policy.frozen_real(), 6.0);
}

TEST(FreezePolicy, UsesTheMeanNormSinceTheLastFreezeStep) {
  // Layer 2 is smallest on one step, layer 3 on average (2+2)/2 = 2 < (0.5+6)/2 = 3.25.
  FreezePolicy policy({12, 0.5, FreezeUnit::kStep, 2});
  std::vector<double> a(12, 10.0), b(12, 10.0);
  a[2] = 0.5;
  a[3] = 2.0;
  b[2] = 6.0;
  b[3] = 2.0;
  policy.add_gradient_norms(a);
  policy.add_gradient_norms(b);
  EXPECT_EQ(policy.accumulator().steps(), 2);
  EXPECT_EQ(policy.freeze_step(), 4);  // min(6, 3 + 1)
  EXPECT_EQ(policy.accumulator().steps(), 0);
}

TEST(FreezePolicy, ArgminCountsFromTheFirstActiveLayer) {
  EXPECT_EQ(argmin_count({0.1, 3, 2, 2, 5}, 1), 3);  // layer 2 (first of the tie), count 3
  EXPECT_EQ(argmin_count({0.1, 3, 2, 2, 5}, 0), 1);
  EXPECT_EQ(argmin_count({}, 0), -1);
  EXPECT_DOUBLE_EQ(equation1(2.0, 12, 0.25, -1), 4.5);
  EXPECT_DOUBLE_EQ(equation1(2.0, 12, 0.25, 3), 3.0);
}

TEST(FreezePolicy, IntervalInEpochsOrSteps) {
  FreezePolicy epochs({12, 0.3, FreezeUnit::kEpoch, 2});
  EXPECT_FALSE(epochs.due_at_epoch(0));
  EXPECT_FALSE(epochs.due_at_epoch(1));
  EXPECT_TRUE(epochs.due_at_epoch(2));
  EXPECT_TRUE(epochs.due_at_epoch(4));
  EXPECT_FALSE(epochs.due_after_step(2));
  FreezePolicy steps({12, 0.3, FreezeUnit::kStep, 100});
  EXPECT_FALSE(steps.due_after_step(99));
  EXPECT_TRUE(steps.due_after_step(200));
  EXPECT_FALSE(steps.due_at_epoch(2));
}

TEST(FreezePolicyErrors, NameTheBadValue) {
  EXPECT_EQ(input_error([] {
              FreezePolicy({12, 1.0, FreezeUnit::kEpoch, 1});
            }),
            "freeze policy: alpha must be in (0, 1) (1 given)");
  EXPECT_EQ(input_error([] {
              FreezePolicy({12, 0.0, FreezeUnit::kEpoch, 1});
            }),
            "freeze policy: alpha must be in (0, 1) (0 given)");
  EXPECT_EQ(input_error([] {
              FreezePolicy({0, 0.3, FreezeUnit::kEpoch, 1});
            }),
            "freeze policy: layers must be positive (0 given)");
  EXPECT_EQ(input_error([] {
              FreezePolicy({4, 0.3, FreezeUnit::kStep, 0});
            }),
            "freeze policy: freeze interval must be positive (0 given)");
  FreezePolicy policy({4, 0.3, FreezeUnit::kEpoch, 1});
  EXPECT_EQ(input_error([&] {
              policy.add_gradient_norms({1, 2, 3});
            }),
            "gradient norms: 3 values for 4 layers");
  EXPECT_EQ(input_error([&] {
              policy.add_gradient_norms({1, -2, 3, 4});
            }),
            "gradient norms: layer 1: expected a finite non-negative norm, got -2");
  EXPECT_EQ(input_error([&] {
              policy.add_gradient_norms({1, NAN, 3, 4});
            }),
            "gradient norms: layer 1: expected a finite non-negative norm, got nan");
  EXPECT_EQ(input_error([] { parse_freeze_unit("hour", "--freeze-unit"); }),
            "--freeze-unit: expected \"epoch\" or \"step\", got \"hour\"");
  EXPECT_EQ(parse_freeze_unit("steps", "x"), FreezeUnit::kStep);
}

}  // namespace
}  // namespace pipetwin::elastic
