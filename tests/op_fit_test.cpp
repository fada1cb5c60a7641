// profiles/zoo/op_fit.hpp and op_validation.hpp: fitting op parameters to micro-benchmark timings
// recovers the parameters that made them; the layer refinement fitted on the other models
// recovers a known one; the op-level model against the shipped CPU profiles, layer by layer.
#include "profiles/zoo/op_fit.hpp"

#include <cmath>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "profiles/model_source.hpp"
#include "profiles/zoo/op_cost.hpp"
#include "profiles/zoo/op_validation.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::zoo {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Sourced n(double v) {
  return {v, "truth"};
}

// A one-core CPU: 16 x 8 micro-kernel blocks, a 4 MiB cache.
OpParams truth() {
  OpParams p;
  p.device = "toy-cpu";
  p.derivation = "measured";
  p.units = n(1);
  p.async = false;
  p.launch_s = n(0);
  p.host_s = n(3e-6);
  p.host_node_s = n(5e-6);
  p.host_tensor_s = n(1e-6);
  p.bandwidth = n(1e10);
  p.cache_bytes = n(4194304);
  p.cache_bandwidth = n(5e10);
  p.attention_forward = p.attention_backward = n(0.5);
  p.gemm["float32"] = {n(16), n(8), n(1e11), n(32)};
  p.conv_forward = n(0.7);
  p.conv_dgrad = n(0.6);
  p.conv_wgrad = n(0.5);
  p.conv_fixed_s = n(2e-5);
  p.elementwise["gelu"] = {n(1e9), n(5e8)};
  p.elementwise["softmax"] = {n(4e8), n(2e8)};
  return p;
}

// What the micro-benchmark would have timed on the device `p` describes.
MicrobenchData timings(const OpParams& p) {
  MicrobenchData d;
  d.device = "toy-cpu";
  d.machine = "a test";
  d.units = 1;
  d.units_source = "one core";
  d.host_s = p.host_s.value;
  d.node_s = p.host_node_s.value;
  d.tensor_s = p.host_tensor_s.value;
  for (double bytes = 65536; bytes <= 268435456; bytes *= 4)
    d.copies.push_back({bytes, p.host_s.value + bytes / bandwidth_for(bytes, p)});
  auto add = [&](const std::string& group, const OpSpec& op, int b, bool backward,
                 ConvPass pass = ConvPass::forward) {
    BenchCase c{group, op, b, false, backward, pass, 0, 0};
    c.measured_s = predict_case(c, p, "float32");
    d.cases.push_back(c);
  };
  for (const auto& [m, nn, k] : std::vector<std::array<int64_t, 3>>{{1, 256, 64},
                                                                    {8, 256, 256},
                                                                    {65, 576, 192},
                                                                    {130, 192, 192},
                                                                    {512, 128, 512},
                                                                    {33, 65, 17},
                                                                    {1024, 512, 128},
                                                                    {100, 100, 100},
                                                                    {7, 9, 300},
                                                                    {260, 768, 192}})
    add("gemm", bmm_op("mm", 1, m, nn, k), 1, false);
  add("gemm", bmm_op("mm", 6, 65, 65, 64), 1, false);
  for (const auto& [ci, side, stride] :
       std::vector<std::array<int64_t, 3>>{{16, 32, 1}, {32, 16, 1}, {16, 32, 2}}) {
    const OpSpec conv = conv_op("conv", ci, ci, 3, side, side, stride, 1);
    for (int b : {1, 8}) {
      add("conv", conv, b, false);
      add("conv", conv, b, true, ConvPass::dgrad);
      add("conv", conv, b, true, ConvPass::wgrad);
    }
  }
  for (double elems : {16384.0, 65536.0, 262144.0}) {
    for (EltClass c : {EltClass::gelu, EltClass::softmax}) {
      add("elementwise", elt_op(elt_name(c), c, elems), 1, false);
      add("elementwise", elt_op(elt_name(c), c, elems), 1, true);
    }
  }
  return d;
}

TEST(OpFit, RecoversTheParametersThatMadeTheTimings) {
  const OpParams want = truth();
  const OpParams got = fit_op_params(timings(want));
  EXPECT_EQ(got.derivation, "measured");
  EXPECT_DOUBLE_EQ(got.host_s.value, 3e-6);
  EXPECT_NEAR(got.bandwidth.value / 1e10, 1, 1e-9);
  EXPECT_NEAR(got.cache_bandwidth.value / 5e10, 1, 1e-9);
  EXPECT_DOUBLE_EQ(got.cache_bytes.value, 4194304);
  const GemmParams& g = got.gemm_for("float32");
  EXPECT_EQ(g.tile_m.value, 16);
  EXPECT_EQ(g.tile_n.value, 8);
  EXPECT_EQ(g.tile_k_overhead.value, 32);
  EXPECT_NEAR(g.unit_flops.value / 1e11, 1, 1e-6);
  EXPECT_NEAR(got.conv_forward.value, 0.7, 1e-6);
  EXPECT_NEAR(got.conv_dgrad.value, 0.6, 1e-6);
  EXPECT_NEAR(got.conv_wgrad.value, 0.5, 1e-6);
  EXPECT_NEAR(got.conv_fixed_s.value, 2e-5, 1e-11);
  EXPECT_NEAR(got.elementwise.at("gelu").forward.value / 1e9, 1, 1e-6);
  EXPECT_NEAR(got.elementwise.at("gelu").backward.value / 5e8, 1, 1e-6);
  EXPECT_NEAR(got.elementwise.at("softmax").backward.value / 2e8, 1, 1e-6);
  EXPECT_THAT(got.gemm_for("float32").unit_flops.source, HasSubstr("calibrate --microbench"));
  EXPECT_LT(got.fit.at("groups").at("gemm.forward").at("worst_error").get<double>(), 1e-6);
}

TEST(OpFit, NeedsGemmsAndCopies) {
  MicrobenchData d = timings(truth());
  d.copies.resize(1);
  EXPECT_THAT(test::input_error([&] { fit_op_params(d); }), HasSubstr("two sizes"));
  d = timings(truth());
  d.cases.erase(std::remove_if(d.cases.begin(), d.cases.end(),
                               [](const BenchCase& c) { return c.group == "gemm"; }),
                d.cases.end());
  EXPECT_THAT(test::input_error([&] { fit_op_params(d); }), HasSubstr("GEMM"));
}

// A layer pass priced at `predicted` and measured as `scale` x that plus the boundary times.
OpTask task(const std::string& model, double predicted, bool first, bool last, bool backward,
            double scale, double boundary_fwd, double boundary_bwd) {
  OpTask t;
  t.model = model;
  t.predicted_s = predicted;
  t.first = first;
  t.last = last;
  t.backward = backward;
  t.measured_s =
      scale * predicted + ((first || last) ? (backward ? boundary_bwd : boundary_fwd) : 0);
  return t;
}

TEST(OpValidation, RefinementFittedOnTheOtherModelsRecoversKnownOnes) {
  std::vector<OpTask> tasks;
  for (const char* m : {"a", "b", "c"}) {
    for (int i = 0; i < 6; ++i) {
      for (bool bwd : {false, true}) {
        const double x = 1e-4 * (1 + i);
        tasks.push_back(task(m, x, i == 0, i == 5, bwd, 1.2, 4e-5, 9e-5));
      }
    }
  }
  tasks.push_back(task("held", 1, false, false, false, 9, 0, 0));  // far off, left out
  const LayerRefinement r = fit_refinement(tasks, "held");
  EXPECT_NEAR(r.scale.value, 1.2, 1e-9);
  EXPECT_NEAR(r.first_forward_s.value, 4e-5, 1e-12);
  EXPECT_NEAR(r.last_backward_s.value, 9e-5, 1e-12);
  EXPECT_NEAR(refined(tasks.front(), r), tasks.front().measured_s, 1e-12);
  // One outlier layer does not pull the robust fit.
  tasks.back().model = "a";
  EXPECT_NEAR(fit_refinement(tasks).scale.value, 1.2, 0.01);
  // A boundary that would be negative is fixed at 0.
  std::vector<OpTask> faster;
  for (int i = 0; i < 6; ++i)
    faster.push_back(task("a", 1e-4 * (1 + i), i == 0, false, false, 1, -5e-5, 0));
  EXPECT_EQ(fit_refinement(faster).first_forward_s.value, 0.0);
}

TEST(OpValidation, ShippedCpuProfilesLayerByLayer) {
  const std::string ops = op_params_path(Catalog::default_dir(), "cpu-core");
  ASSERT_TRUE(fs::exists(ops));
  std::vector<Profile> profiles;
  std::vector<std::string> paths;
  for (const auto& s : list_shipped_profiles(default_traces_dir())) {
    if (s.device != "cpu-core" || s.source != "measured") continue;
    profiles.push_back(load_profile(s.path));
    paths.push_back(s.path);
  }
  ASSERT_EQ(profiles.size(), 5u);
  const OpValidation v = validate_op_model(profiles, load_op_params(ops), paths);
  ASSERT_EQ(v.models.size(), 5u);
  int tasks = 0;
  for (const auto& p : profiles) {
    for (const auto& l : p.layers) tasks += 2 * static_cast<int>(l.timings.size());
  }
  EXPECT_EQ(v.raw.count, tasks);
  // The parts of every prediction add up to it on a synchronous device.
  for (const auto& t : v.tasks) {
    EXPECT_NEAR(t.host_s + t.gemm_s + t.conv_s + t.elt_s, t.predicted_s, 1e-12) << t.layer;
  }
  // The model prices layers it never saw within a factor of two at worst (the shipped profiles
  // were measured on another day than the op file).
  EXPECT_LT(v.held.median, 0.3);
  EXPECT_THAT(test::input_error([&] {
                Profile wrong = profiles.front();
                wrong.layers.front().name = "nope";
                validate_op_model({wrong}, load_op_params(ops), {"wrong.json"});
              }),
              HasSubstr("wrong.json: layers[0].name"));
}

}  // namespace
}  // namespace pipetwin::zoo
