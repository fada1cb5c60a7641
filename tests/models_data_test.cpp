// models/: data — synthetic batches, per-sample losses against hand computations, the digits
// data set and its token view.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <torch/utils.h>
#include <cmath>

#include "core/error.hpp"
#include "models/dataset.hpp"
#include "models/zoo.hpp"

namespace pipetwin::models {
namespace {

TEST(ModelsData, SyntheticBatchesAreDeterministicInTheSeed) {
  const auto m = build_model("vit:test", torch::kFloat64);
  EXPECT_TRUE(m.synthetic_input(4, 9).equal(m.synthetic_input(4, 9)));
  EXPECT_FALSE(m.synthetic_input(4, 9).equal(m.synthetic_input(4, 10)));
  EXPECT_EQ(m.synthetic_input(4, 9).sizes().vec(), (std::vector<int64_t>{4, 3, 32, 32}));
  EXPECT_EQ(m.synthetic_input(4, 9).scalar_type(), torch::kFloat64);
  const auto labels = m.synthetic_target(64, 9);
  EXPECT_EQ(labels.scalar_type(), torch::kLong);
  EXPECT_GE(labels.min().item<int64_t>(), 0);
  EXPECT_LT(labels.max().item<int64_t>(), 10);
}

TEST(ModelsData, LanguageModelTargetIsTheInputShiftedByOne) {
  const auto m = build_model("gpt2:tiny");
  const auto x = m.synthetic_input(3, 5), t = m.synthetic_target(3, 5);
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 64}));
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{3, 64}));
  EXPECT_TRUE(x.slice(1, 1).equal(t.slice(1, 0, -1)));
  EXPECT_LT(x.max().item<int64_t>(), 1024);
}

TEST(ModelsData, ClassificationLossIsCrossEntropyPerSample) {
  const auto m = build_model("mlp:layers=0,input=2,classes=3", torch::kFloat64);
  const auto logits = torch::tensor({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, torch::kFloat64).view({2, 3});
  const auto target = torch::tensor({int64_t{2}, int64_t{1}});
  const auto loss = m.per_sample_loss(logits, target);
  ASSERT_EQ(loss.sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_NEAR(loss[0].item<double>(), std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0,
              1e-12);
  EXPECT_NEAR(loss[1].item<double>(), std::log(3.0), 1e-12);
}

// The gradient of a sample's cross entropy by its logits: softmax(logits) - onehot(target).
TEST(ModelsData, ClassificationLossGradientIsSoftmaxMinusOneHot) {
  const auto m = build_model("mlp:layers=0,input=2,classes=3", torch::kFloat64);
  const auto logits = torch::tensor({1.0, 2.0, 3.0, 0.5, -1.0, 0.0}, torch::kFloat64)
                          .view({2, 3})
                          .requires_grad_(true);
  const auto target = torch::tensor({int64_t{0}, int64_t{2}});
  m.per_sample_loss(logits, target).sum().backward();
  const double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double z1 = std::exp(0.5) + std::exp(-1.0) + 1.0;
  const double want[2][3] = {{std::exp(1.0) / z0 - 1, std::exp(2.0) / z0, std::exp(3.0) / z0},
                             {std::exp(0.5) / z1, std::exp(-1.0) / z1, 1.0 / z1 - 1}};
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < 3; ++c)
      EXPECT_NEAR(logits.grad()[i][c].item<double>(), want[i][c], 1e-12) << i << "," << c;
  }
}

TEST(ModelsData, LanguageModelLossIsTheTokenMeanPerSample) {
  const auto m = build_model("gpt2:tiny", torch::kFloat64);
  // One sample, two tokens, vocabulary of two.
  const auto logits = torch::tensor({0.0, 1.0, 2.0, 0.0}, torch::kFloat64).view({1, 2, 2});
  const auto target = torch::tensor({int64_t{1}, int64_t{1}}).view({1, 2});
  const double token0 = std::log(1.0 + std::exp(1.0)) - 1.0;
  const double token1 = std::log(std::exp(2.0) + 1.0) - 0.0;
  const auto loss = m.per_sample_loss(logits, target);
  ASSERT_EQ(loss.sizes().vec(), (std::vector<int64_t>{1}));
  EXPECT_NEAR(loss[0].item<double>(), (token0 + token1) / 2, 1e-12);
}

TEST(ModelsData, RegressionLossIsTheFeatureMeanSquaredError) {
  const auto m = build_model("uniform:layers=1,act_kb=0.015625", torch::kFloat64);  // 2 features
  const auto out = torch::tensor({1.0, 2.0, 0.0, 0.0}, torch::kFloat64).view({2, 2});
  const auto target = torch::tensor({0.0, 0.0, 3.0, 1.0}, torch::kFloat64).view({2, 2});
  const auto loss = m.per_sample_loss(out, target);
  EXPECT_NEAR(loss[0].item<double>(), 2.5, 1e-12);
  EXPECT_NEAR(loss[1].item<double>(), 5.0, 1e-12);
}

TEST(ModelsData, DigitsLoads) {
  const auto d = load_digits();
  ASSERT_EQ(d.size(), kDigitsSamples);
  EXPECT_EQ(d.classes, 10);
  EXPECT_EQ(d.inputs.sizes().vec(), (std::vector<int64_t>{1797, 1, 8, 8}));
  EXPECT_EQ(d.inputs.scalar_type(), torch::kFloat32);
  EXPECT_EQ(d.labels.scalar_type(), torch::kLong);
  EXPECT_EQ(std::get<0>(at::_unique(d.labels)).numel(), 10);
  EXPECT_EQ(d.labels.max().item<int64_t>(), 9);
  EXPECT_GE(d.inputs.min().item<float>(), 0.0f);
  EXPECT_LE(d.inputs.max().item<float>(), 1.0f);
  // The first row of digits.csv.gz: 0,0,5,13,9,1,0,0, 0,0,13,15,10,15,5,0, ... label 0.
  EXPECT_EQ(d.labels[0].item<int64_t>(), 0);
  EXPECT_EQ(d.labels[1].item<int64_t>(), 1);
  const auto row0 = d.inputs[0][0][0];
  const std::vector<float> expected = {0, 0, 5, 13, 9, 1, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(row0[i].item<float>(), expected[i] / 16.0f);
  EXPECT_FLOAT_EQ(d.inputs[0][0][1][3].item<float>(), 15.0f / 16.0f);
  EXPECT_EQ(d.slice(10, 20).size(), 10);
}

TEST(ModelsData, DigitsAsTokens) {
  const auto d = digits_as_tokens(load_digits());
  EXPECT_EQ(d.inputs.sizes().vec(), (std::vector<int64_t>{1797, kDigitsSeq}));
  EXPECT_EQ(d.inputs.scalar_type(), torch::kLong);
  EXPECT_TRUE((d.inputs.select(1, 0) == kDigitsClsToken).all().item<bool>());
  EXPECT_EQ(d.inputs[0][3].item<int64_t>(), 5);  // pixel 2 of the first image
  EXPECT_LE(d.inputs.slice(1, 1).max().item<int64_t>(), 16);
}

TEST(ModelsData, ZooModelsTakeTheDigits) {
  torch::NoGradGuard no_grad;
  const auto d = load_digits().slice(0, 4);
  const auto t = digits_as_tokens(d);
  for (const char* name : {"mlp", "vit:tiny,image=8,patch=2,channels=1,depth=1",
                           "resnet20:channels=1,image=8", "bert:tiny,seq=65,vocab=18,classes=10"}) {
    auto m = build_model(name);
    const auto out = m.forward(m.sample.token_input ? t.inputs : d.inputs);
    EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{4, 10})) << name;
    EXPECT_EQ(m.per_sample_loss(out, d.labels).size(0), 4) << name;
  }
}

TEST(ModelsData, MissingDigitsFileNamesThePathAndThePackage) {
  try {
    load_digits("/nonexistent/digits.csv.gz");
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("/nonexistent/digits.csv.gz"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("python3-sklearn"));
  }
}

}  // namespace
}  // namespace pipetwin::models
