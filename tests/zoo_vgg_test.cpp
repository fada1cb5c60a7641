// profiles/zoo/vgg.cpp: VGG and AlexNet against torchvision's parameter counts, their layer lists
// and shapes, FLOP closed forms, and bad names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/zoo/zoo.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::zoo {
namespace {

using test::input_error;
using ::testing::HasSubstr;

TEST(ZooVgg, ParameterCountsAreTorchvisions) {
  // sum(p.numel() for p in torchvision.models.vgg16().parameters()), likewise the others.
  EXPECT_EQ(describe_model("vgg:16").parameters(), 138357544);
  EXPECT_EQ(describe_model("vgg16").parameters(), 138357544);
  EXPECT_EQ(describe_model("vgg:11").parameters(), 132863336);
  EXPECT_EQ(describe_model("vgg:13").parameters(), 133047848);
  EXPECT_EQ(describe_model("vgg:19").parameters(), 143667240);
  EXPECT_EQ(describe_model("alexnet").parameters(), 61100840);
}

TEST(ZooVgg, Vgg16LayersAreTorchvisionsModules) {
  const ZooModel m = describe_model("vgg:16");
  EXPECT_EQ(m.family, "vgg");
  // 13 convolutions and their ReLUs, 5 max-pools, the adaptive pool, 3 Linear, 2 ReLU, 2 Dropout.
  ASSERT_EQ(m.num_layers(), 13 * 2 + 5 + 1 + 3 + 2 + 2);
  EXPECT_EQ(m.layers[0].name, "conv1_1");
  EXPECT_EQ(m.layers[1].kind, "relu");
  EXPECT_EQ(m.layers[4].name, "pool1");
  EXPECT_EQ(m.layers[30].name, "pool5");
  EXPECT_EQ(m.layers[31].name, "avgpool");
  EXPECT_EQ(m.layers[34].kind, "dropout");
  EXPECT_EQ(m.layers[38].kind, "head");
  // pool5: 512 x 7 x 7 feeds fc6 (25088 x 4096 + 4096).
  EXPECT_EQ(m.layers[30].output_elems, 512.0 * 7 * 7);
  EXPECT_EQ(m.layers[32].params, 25088 * 4096 + 4096);
  // conv1_1 at 224 x 224: 2 x (64 x 3 x 9) x 224^2 FLOPs.
  EXPECT_DOUBLE_EQ(m.layers[0].forward_flops, 2.0 * 64 * 3 * 9 * 224 * 224);
  // VGG-16's 15.47 G multiply-adds per image (torchvision's model card: 15.47 GFLOPS).
  EXPECT_NEAR(m.forward_flops() / 2 / 15.47e9, 1.0, 0.005);
  EXPECT_TRUE(m.edges.empty());
}

TEST(ZooVgg, AlexNetShapes) {
  const ZooModel m = describe_model("alexnet");
  ASSERT_EQ(m.num_layers(), 5 * 2 + 3 + 1 + 3 + 2 + 2);
  // 224 -> conv1 (11/4, padding 2) 55 -> pool 27 -> conv2 27 -> pool 13 -> ... -> pool 6.
  EXPECT_EQ(m.layers[0].output_elems, 64.0 * 55 * 55);
  EXPECT_EQ(m.layers[2].output_elems, 64.0 * 27 * 27);
  EXPECT_EQ(m.layers[5].output_elems, 192.0 * 13 * 13);
  EXPECT_EQ(m.layers[12].name, "pool3");
  EXPECT_EQ(m.layers[12].output_elems, 256.0 * 6 * 6);
  EXPECT_EQ(m.layers[14].name, "drop6");  // AlexNet drops before each hidden Linear
  EXPECT_EQ(m.layers[15].params, 9216 * 4096 + 4096);
  // 0.71 G multiply-adds per image (torchvision's model card: 0.71 GFLOPS).
  EXPECT_NEAR(m.forward_flops() / 2 / 0.714e9, 1.0, 0.01);
}

TEST(ZooVgg, OptionsAndBadNames) {
  EXPECT_EQ(describe_model("alexnet:classes=10").layers.back().params, 4096 * 10 + 10);
  EXPECT_EQ(describe_model("vgg:16,image=32").parameters(), 138357544);  // adaptive 7 x 7
  EXPECT_THAT(input_error([] { describe_model("vgg:17"); }),
              HasSubstr("vgg: unknown preset \"17\" (known: 11, 13, 16, 19)"));
  EXPECT_THAT(input_error([] { describe_model("vgg16:19"); }), HasSubstr("\"19\""));
  EXPECT_THAT(input_error([] { describe_model("alexnet:image=32"); }),
              HasSubstr("alexnet: option image must be at least 63 (32 given)"));
  EXPECT_THAT(input_error([] { describe_model("vgg:16,depth=3"); }), HasSubstr("depth"));
}

}  // namespace
}  // namespace pipetwin::zoo
