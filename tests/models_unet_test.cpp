// models/unet: torchgpipe's U-Net(B, C) built for real — the same layers and parameter count as
// the analytic descriptor, cross-layer skips wired encoder -> decoder, forward by layer sets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <torch/utils.h>

#include "core/error.hpp"
#include "profiles/zoo/zoo.hpp"
#include "models/zoo.hpp"

namespace pipetwin::models {
namespace {

const char* kTest = "unet:B=2,C=4,image=32,norm=group";

TEST(ModelsUNet, LayersAndSkipsFollowTheAnalyticDescriptor) {
  for (const char* name : {kTest, "unet:B=3,C=8,image=64", "unet:B=6,C=72"}) {
    const zoo::ZooModel z = zoo::describe_model(name, "test");
    EXPECT_EQ(parameter_count(name), z.parameters()) << name;
    if (std::string(name) == "unet:B=6,C=72") continue;  // 362M: counted, not built
    const LayeredModel m = build_model(name);
    EXPECT_EQ(m.num_parameters(), z.parameters()) << name;
    ASSERT_EQ(m.layers.size(), z.layers.size()) << name;
    for (size_t i = 0; i < m.layers.size(); ++i) EXPECT_EQ(m.layers[i].name, z.layers[i].name);
    std::vector<std::pair<int, int>> skips;
    for (const auto& e : z.edges) {
      if (e.to != e.from + 1) skips.emplace_back(e.from, e.to);
    }
    std::vector<std::pair<int, int>> built;
    for (size_t i = 0; i < m.layers.size(); ++i) {
      if (m.layers[i].skip_from >= 0) built.emplace_back(m.layers[i].skip_from, int(i));
    }
    EXPECT_EQ(built, skips) << name;
  }
}

TEST(ModelsUNet, PublishedSizeOfTable3) {
  // torchgpipe Table 3: U-Net(6, 72) has 362.2M parameters.
  EXPECT_NEAR(static_cast<double>(parameter_count("unet:B=6,C=72")) / 362.2e6, 1.0, 0.001);
}

TEST(ModelsUNet, EncoderSkipsReachTheirDecoderBlocks) {
  const LayeredModel m = build_model(kTest);
  // B = 2: enc{i}.conv1 feeds dec{i}.conv0.
  for (int i = 0; i < 5; ++i) {
    const auto from = m.index_of(fmt::format("enc{}.conv1", i));
    const auto to = m.index_of(fmt::format("dec{}.conv0", i));
    EXPECT_EQ(m.layers[to].skip_from, static_cast<int>(from));
  }
  EXPECT_TRUE(m.has_skips());
  const auto edges = m.edges();
  EXPECT_EQ(edges.size(), m.layers.size() - 1 + 5);
  EXPECT_NE(std::find(edges.begin(), edges.end(), std::make_pair(1, 20)), edges.end());
}

TEST(ModelsUNet, TheSkipChangesTheOutput) {
  // The decoder reads the encoder's features: zeroing one skip changes the result.
  torch::NoGradGuard no_grad;
  LayeredModel m = build_model(kTest, torch::kFloat64, 3);
  const auto x = m.synthetic_input(2, 1);
  std::map<int, torch::Tensor> values{{LayeredModel::kModelInput, x}};
  std::vector<int> all;
  for (size_t i = 0; i < m.layers.size(); ++i) all.push_back(static_cast<int>(i));
  m.forward_layers(all, values);
  EXPECT_TRUE(values.at(static_cast<int>(m.layers.size()) - 1).equal(m.forward(x)));
  const int dec0 = static_cast<int>(m.index_of("dec0.conv0"));
  const int src = m.layers[static_cast<size_t>(dec0)].skip_from;
  values[src] = at::zeros_like(values[src]);
  std::vector<int> tail;
  for (int i = dec0; i < static_cast<int>(m.layers.size()); ++i) tail.push_back(i);
  m.forward_layers(tail, values);
  EXPECT_FALSE(values.at(static_cast<int>(m.layers.size()) - 1).equal(m.forward(x)));
  EXPECT_EQ(m.forward(x).sizes().vec(), (std::vector<int64_t>{2, 1, 32, 32}));
}

TEST(ModelsUNet, MissingSkipInputsAndCrossingRangesAreRefused) {
  LayeredModel m = build_model(kTest, torch::kFloat64, 3);
  const int dec4 = static_cast<int>(m.index_of("dec4.conv0"));
  std::map<int, torch::Tensor> values{{dec4 - 1, at::zeros({1, 64, 1, 1}, at::kDouble)}};
  try {
    m.forward_layers({dec4}, values);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("layer 12 (dec4.conv0) needs the output of layer 9"));
  }
  EXPECT_THROW(m.forward_range(values.at(dec4 - 1), dec4, m.layers.size()), std::invalid_argument);
}

TEST(ModelsUNet, BadOptionsAreInputErrors) {
  EXPECT_THROW(build_model("unet:image=48"), InputError);  // not a multiple of 32
  EXPECT_THROW(build_model("unet:C=5"), InputError);
  EXPECT_THROW(build_model("unet:B=1"), InputError);
  EXPECT_THROW(build_model("unet:norm=layer"), InputError);
  EXPECT_THROW(build_model("unet:tiny"), InputError);
}

}  // namespace
}  // namespace pipetwin::models
