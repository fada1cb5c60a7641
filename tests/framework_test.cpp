// The framework's terms in the cost model (core/framework.hpp): each one where the header says it
// goes, against the same model without it; the identity changes nothing, bit for bit; the file
// format round-trips and refuses bad terms in one line.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/framework.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

Framework terms() {
  Framework f;
  f.name = "test";
  f.iteration_s = 1e-3;
  f.micro_batch_s = 2e-4;
  f.layer_launch_s = 5e-5;
  f.compute_scale = 1.5;
  f.communication_scale = 2;
  return f;
}

class FrameworkCostTest : public ::testing::Test {
 protected:
  const Profile profile_ = test::synthetic("uniform:layers=4,fwd_ms=1,bwd_ms=2,act_kb=64");
  const Cluster cluster_ = test::two_level_cluster(2, 2, 10e9, 1e-6, 1e9, 1e-5);
  CostModel with(const Framework& f) const {
    CostOptions o;
    o.framework = f;
    return CostModel(profile_, cluster_, o);
  }
};

TEST_F(FrameworkCostTest, EachTermWhereItBelongs) {
  const CostModel base = with(Framework{});
  const CostModel fw = with(terms());
  const StageCost a = base.stage_cost({0, 1}, 2);
  const StageCost b = fw.stage_cost({0, 1}, 2);
  // Two layers: the compute scale on each, a launch per layer and pass, one micro-batch term.
  EXPECT_DOUBLE_EQ(b.forward_s, a.forward_s * 1.5 + 2 * 5e-5 + 2e-4);
  EXPECT_DOUBLE_EQ(b.backward_s, a.backward_s * 1.5 + 2 * 5e-5 + 2e-4);
  EXPECT_DOUBLE_EQ(b.optimizer_s, a.optimizer_s * 1.5 + 1e-3);  // once per iteration
  EXPECT_DOUBLE_EQ(fw.forward_s(0, 2), base.forward_s(0, 2) * 1.5 + 5e-5);
  EXPECT_DOUBLE_EQ(fw.transfer_s(1e6, 0, 2), base.transfer_s(1e6, 0, 2) * 2);
  EXPECT_DOUBLE_EQ(fw.allreduce_s(1e6, {0, 1, 2, 3}), base.allreduce_s(1e6, {0, 1, 2, 3}) * 2);
}

TEST_F(FrameworkCostTest, TheIdentityChangesNothingBitForBit) {
  Framework identity;
  identity.name = "neutral";
  EXPECT_TRUE(identity.identity());
  const StageCost a = with(Framework{}).stage_cost({1, 2, 3}, 4);
  const StageCost b = with(identity).stage_cost({1, 2, 3}, 4);
  EXPECT_EQ(a.forward_s, b.forward_s);
  EXPECT_EQ(a.backward_s, b.backward_s);
  EXPECT_EQ(a.recompute_s, b.recompute_s);
  EXPECT_EQ(a.optimizer_s, b.optimizer_s);
  EXPECT_FALSE(terms().identity());
}

TEST(FrameworkFile, RoundTripsAndRefusesBadTerms) {
  const Framework f = terms();
  const Framework back = framework_from_json(JsonView(framework_to_json(f), "fw.json"));
  for (int i = 0; i < kFrameworkTerms; ++i)
    EXPECT_EQ(framework_term(back, FrameworkTerm(i)), framework_term(f, FrameworkTerm(i)));
  EXPECT_EQ(back.name, "test");
  Json bad = framework_to_json(f);
  bad["terms"]["compute_scale"] = 0;
  EXPECT_THAT(test::input_error([&] { framework_from_json(JsonView(bad, "fw.json")); }),
              HasSubstr("compute_scale"));
  bad = framework_to_json(f);
  bad["terms"]["launch"] = 1;
  EXPECT_THAT(test::input_error([&] { framework_from_json(JsonView(bad, "fw.json")); }),
              HasSubstr("launch"));
  EXPECT_EQ(parse_framework_term("micro_batch", "--terms"), FrameworkTerm::kMicroBatch);
  EXPECT_EQ(parse_framework_term("communication_scale", "--terms"), FrameworkTerm::kCommunication);
  EXPECT_THAT(test::input_error([] { parse_framework_term("speed", "--terms"); }),
              HasSubstr("--terms: unknown framework term \"speed\""));
}

}  // namespace
}  // namespace pipetwin
