// The micro-benchmark (exec/profile/microbench.hpp) on this machine: it times every group the
// op-parameter fit needs, the fit of its timings (profiles/zoo/op_fit.hpp) is a valid op file
// that says where each number comes from, and that file prices the cases it was fitted to.
// No assertion depends on how fast the machine is.
#include "exec/profile/microbench.hpp"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/zoo/op_cost.hpp"
#include "profiles/zoo/op_params.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::exec {
namespace {

using ::testing::HasSubstr;

const zoo::MicrobenchData& quick_data() {
  static const zoo::MicrobenchData data = [] {
    MicrobenchOptions o;
    o.quick = true;
    o.warmup = 1;
    o.repeats = 3;
    return run_microbench(o);
  }();
  return data;
}

TEST(Microbench, TimesEveryGroupTheFitNeeds) {
  const zoo::MicrobenchData& d = quick_data();
  EXPECT_EQ(d.device, "cpu-core");
  EXPECT_FALSE(d.async);
  EXPECT_GT(d.host_s, 0);
  EXPECT_GE(d.node_s, 0);
  EXPECT_GE(d.copies.size(), 2u);
  std::set<std::string> groups;
  std::set<std::string> classes;
  for (const auto& c : d.cases) {
    EXPECT_GT(c.measured_s, 0) << c.group << " " << c.op.name;
    groups.insert(c.group);
    if (c.group == "elementwise") classes.insert(c.op.name);
  }
  for (const char* g : {"gemm", "linear", "conv", "elementwise", "attention"})
    EXPECT_TRUE(groups.count(g)) << g;
  for (const char* c : {"gelu", "gelu_tanh", "softmax", "layer_norm", "batch_norm", "embedding"})
    EXPECT_TRUE(classes.count(c)) << c;
}

TEST(Microbench, FitIsAnOpFileThatPricesItsCases) {
  const zoo::OpParams p = zoo::fit_op_params(quick_data());
  EXPECT_EQ(p.derivation, "measured");
  EXPECT_THAT(p.host_s.source, HasSubstr("calibrate --microbench"));
  EXPECT_EQ(p.units.value, 1);
  test::TempDir dir;
  const std::string path = (dir.path() / "ops.json").string();
  zoo::save_op_params(p, path);
  const zoo::OpParams again = zoo::load_op_params(path);
  EXPECT_EQ(again.gemm_for("float32").tile_m.value, p.gemm_for("float32").tile_m.value);
  for (const auto& c : quick_data().cases) {
    if (c.group != "gemm") continue;
    EXPECT_GT(zoo::predict_case(c, again, "float32"), 0);
  }
}

}  // namespace
}  // namespace pipetwin::exec
