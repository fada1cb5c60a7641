// core/precision.hpp and its users: bytes per parameter by dtype and optimizer against the mixed-
// precision accounting (Micikevicius et al. 2018, ZeRO section 3.1), optimizer rewrites of
// measured and analytic profiles, profile resolution by dtype, and what `plan --dtype bfloat16
// --optimizer adam` does to a plan's memory and time, counted by hand from the zoo descriptor.
#include "core/precision.hpp"

#include <algorithm>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/plan.hpp"
#include "profiles/model_source.hpp"
#include "profiles/zoo/analytic.hpp"
#include "profiles/zoo/op_params.hpp"
#include "profiles/zoo/zoo.hpp"
#include "sim/planner.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::HasSubstr;

TEST(ParamBytes, FollowTheMixedPrecisionTable) {
  const OptimizerKind sgd = parse_optimizer("sgd"), momentum = parse_optimizer("momentum"),
                      adam = parse_optimizer("adam");
  // float32: weight, gradient, and the state in float32; Adam's step moves 7 x 4 bytes.
  const ParamBytes f32 = param_bytes("float32", adam);
  EXPECT_DOUBLE_EQ(f32.weight, 4);
  EXPECT_DOUBLE_EQ(f32.gradient, 4);
  EXPECT_DOUBLE_EQ(f32.master, 0);
  EXPECT_DOUBLE_EQ(f32.state, 8);
  EXPECT_DOUBLE_EQ(f32.total(), 16);
  EXPECT_DOUBLE_EQ(f32.step_traffic, 28);
  // bfloat16 + Adam is ZeRO's 2 + 2 + 12 = 16 bytes; its step moves 8 + 2 + 2 + 16 bytes.
  const ParamBytes bf16 = param_bytes("bfloat16", adam);
  EXPECT_DOUBLE_EQ(bf16.weight, 2);
  EXPECT_DOUBLE_EQ(bf16.gradient, 2);
  EXPECT_DOUBLE_EQ(bf16.master, 4);
  EXPECT_DOUBLE_EQ(bf16.state, 8);
  EXPECT_DOUBLE_EQ(bf16.optimizer(), 12);
  EXPECT_DOUBLE_EQ(bf16.total(), 16);
  EXPECT_DOUBLE_EQ(bf16.step_traffic, 28);
  EXPECT_DOUBLE_EQ(param_bytes("float16", sgd).total(), 8);
  EXPECT_DOUBLE_EQ(param_bytes("float16", sgd).step_traffic, 12);
  EXPECT_DOUBLE_EQ(param_bytes("bfloat16", momentum).total(), 12);
  // float64 keeps its state in float64.
  EXPECT_DOUBLE_EQ(param_bytes("float64", momentum).state, 8);
  EXPECT_DOUBLE_EQ(param_bytes("float64", momentum).step_traffic, 40);
}

TEST(ParamBytes, UnknownOptimizerOrDtypeNamesTheFlag) {
  EXPECT_THAT(input_error([] { parse_optimizer("lamb"); }),
              HasSubstr("--optimizer: unknown optimizer \"lamb\" (known: sgd, momentum, adam)"));
  EXPECT_THAT(input_error([] { param_bytes("float8", parse_optimizer("sgd")); }),
              HasSubstr("unknown dtype \"float8\""));
}

Profile measured_sgd_profile() {
  Profile p;
  p.model = "toy";
  p.device = "cpu-core";
  p.optimizer = "sgd";
  LayerProfile l;
  l.name = "fc";
  l.timings.push_back({1, 1e-3, 2e-3, 1e-3, 1.0});
  l.param_bytes = 4e6;
  l.optimizer_step_s = 3e-4;
  l.optimizer_new_version_s = 6e-4;
  p.layers = {l, l};
  return p;
}

TEST(ApplyOptimizer, MeasuredStepScalesByTraffic) {
  Profile p = measured_sgd_profile();
  apply_optimizer(p, parse_optimizer("adam"));
  EXPECT_EQ(p.optimizer, "adam");
  for (const auto& l : p.layers) {
    EXPECT_DOUBLE_EQ(l.optimizer_bytes, 8e6);                // two moments of the weights
    EXPECT_DOUBLE_EQ(l.optimizer_step_s, 3e-4 * 7.0 / 3.0);  // (3 + 2 x 2) / 3 x the SGD step
    EXPECT_DOUBLE_EQ(l.optimizer_new_version_s, 6e-4 * 7.0 / 3.0);
  }
  apply_optimizer(p, parse_optimizer("momentum"));
  EXPECT_DOUBLE_EQ(p.layers[0].optimizer_bytes, 4e6);
  EXPECT_DOUBLE_EQ(p.layers[0].optimizer_step_s, 3e-4 * 5.0 / 3.0);
}

TEST(ApplyOptimizer, MeasuredAutocastProfileKeepsFloat32Weights) {
  // A profile measured under autocast holds float32 weights: the state is per weight byte, and
  // no master copy is added on top.
  Profile p = measured_sgd_profile();
  p.dtype = "bfloat16";
  apply_optimizer(p, parse_optimizer("adam"));
  EXPECT_DOUBLE_EQ(p.layers[0].optimizer_bytes, 8e6);
}

TEST(ApplyOptimizer, AProfileThatDoesNotSayIsRefusedWhenItHasStepTimes) {
  Profile p = measured_sgd_profile();
  p.optimizer.clear();
  EXPECT_THAT(input_error([&] { apply_optimizer(p, parse_optimizer("adam")); }),
              HasSubstr("does not say which optimizer its step times were measured with"));
  for (auto& l : p.layers) l.optimizer_step_s = l.optimizer_new_version_s = 0;
  apply_optimizer(p, parse_optimizer("adam"));  // nothing to scale: only the bytes change
  EXPECT_DOUBLE_EQ(p.layers[1].optimizer_bytes, 8e6);
}

TEST(ApplyOptimizer, AnalyticMixedPrecisionKeepsTheMasterCopy) {
  zoo::AnalyticOptions o;
  o.dtype = "bfloat16";
  o.optimizer = "sgd";
  Catalog catalog = Catalog::load(Catalog::default_dir());
  const DeviceSpec& h100 = *catalog.find_device("h100-sxm");
  Profile p = zoo::analytic_profile(zoo::describe_model("bert:large"), h100, o);
  const LayerProfile mlp = p.layers[2];
  EXPECT_DOUBLE_EQ(mlp.optimizer_bytes, 2 * mlp.param_bytes);  // 4-byte master over 2-byte weights
  apply_optimizer(p, parse_optimizer("adam"));
  EXPECT_DOUBLE_EQ(p.layers[2].optimizer_bytes, 6 * mlp.param_bytes);  // (4 + 8) / 2
  // The same profile built for Adam directly agrees on the bytes.
  o.optimizer = "adam";
  const Profile direct = zoo::analytic_profile(zoo::describe_model("bert:large"), h100, o);
  EXPECT_DOUBLE_EQ(direct.layers[2].optimizer_bytes, p.layers[2].optimizer_bytes);
}

TEST(ResolveByDtype, MeasuredProfileOfAnotherDtypeGivesWayToTheAnalyticOne) {
  // bert:tiny ships float32 profiles measured on cpu-core and an H100; bfloat16 has none.
  const Profile f32 = resolve_profile("bert:tiny", "", "h100-sxm", ResolveOptions{});
  EXPECT_EQ(f32.source, "measured");
  const Profile bf16 =
      resolve_profile("bert:tiny", "", "h100-sxm", ResolveOptions{"bfloat16", "", ""});
  EXPECT_EQ(bf16.source, "analytic");
  EXPECT_EQ(bf16.dtype, "bfloat16");
  EXPECT_EQ(bf16.optimizer, "adam");
  // A device without a bfloat16 peak (a P40 has no tensor cores) computes at its float32 one,
  // with the bfloat16 bytes.
  const Profile p40 =
      resolve_profile("vit:large", "", "tesla-p40", ResolveOptions{"bfloat16", "", ""});
  const Profile p40_f32 =
      resolve_profile("vit:large", "", "tesla-p40", ResolveOptions{"float32", "", ""});
  EXPECT_DOUBLE_EQ(p40.layers[3].saved_bytes_per_sample,
                   p40_f32.layers[3].saved_bytes_per_sample / 2);
}

TEST(ResolveByDtype, ProfileFileOfAnotherDtypeIsRefused) {
  const std::string path = default_traces_dir() + "/cpu-core/mlp.profile.json";
  EXPECT_THAT(input_error([&] {
                resolve_profile("", path, "cpu-core", ResolveOptions{"bfloat16", "", ""});
              }),
              HasSubstr("mlp.profile.json: dtype: the profile was measured in float32, not "
                        "bfloat16 (--dtype)"));
  // The shipped profiles were measured with plain SGD: adam makes their state two moments.
  const Profile adam = resolve_profile("", path, "cpu-core", ResolveOptions{"", "adam", ""});
  for (const auto& l : adam.layers) EXPECT_DOUBLE_EQ(l.optimizer_bytes, 2 * l.param_bytes);
}

struct PlannedModel {
  Plan plan;
  PlanContext ctx;
};

PlannedModel plan_bert(const std::string& dtype, const std::string& optimizer) {
  static const Catalog catalog = Catalog::load(Catalog::default_dir());
  sim::PlanRequest r;
  r.cluster = load_cluster("dgx-h100", catalog);
  r.model = "bert:large";
  r.profile = resolve_profile(r.model, "", r.cluster.device, ResolveOptions{dtype, optimizer, ""});
  r.catalog = &catalog;
  r.stages = 2;
  r.batch_size = 32;
  r.chunks = 4;
  r.partitioner = "uniform";
  Plan plan = sim::make_plan(r);
  PlanContext ctx(plan, 0);
  return {std::move(plan), std::move(ctx)};
}

TEST(PlanPrecision, Bfloat16AdamMemoryIsTheHandCount) {
  const zoo::ZooModel m = zoo::describe_model("bert:large");
  const PlannedModel bf16 = plan_bert("bfloat16", "adam");
  const PlannedModel f32 = plan_bert("float32", "sgd");
  for (size_t s = 0; s < bf16.ctx.stages.size(); ++s) {
    double params = 0, saved_elems = 0;
    for (int l : bf16.plan.stages[s].layers) {
      params += static_cast<double>(m.layers[static_cast<size_t>(l)].params);
      saved_elems += m.layers[static_cast<size_t>(l)].saved_elems;
    }
    const StageCost& b = bf16.ctx.stages[s];
    // 2 (weights) + 2 (gradients) + 4 (float32 master) + 8 (Adam's two float32 moments).
    EXPECT_DOUBLE_EQ(b.param_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(b.grad_bytes, 2 * params);
    EXPECT_DOUBLE_EQ(b.optimizer_bytes, 12 * params);
    EXPECT_DOUBLE_EQ(b.static_bytes(), 16 * params);
    // float32 + SGD: 4 + 4.
    EXPECT_DOUBLE_EQ(f32.ctx.stages[s].static_bytes(), 8 * params);
    // Saved activations: 2 bytes per element, half of float32's, for the 8-sample micro-batch.
    EXPECT_DOUBLE_EQ(b.saved_bytes, 8 * saved_elems * 2);
    EXPECT_DOUBLE_EQ(f32.ctx.stages[s].saved_bytes, 2 * b.saved_bytes);
  }
}

// The H100 is priced by the op-level model (profiles/zoo/op_cost.hpp, hardware/ops/h100-sxm.json).
TEST(PlanPrecision, Bfloat16RunsAtItsPeakAndAdamStepsMoveMoreBytes) {
  const PlannedModel bf16 = plan_bert("bfloat16", "adam");
  const PlannedModel bf16_sgd = plan_bert("bfloat16", "sgd");
  const PlannedModel f32 = plan_bert("float32", "adam");
  const zoo::OpParams ops =
      zoo::load_op_params(zoo::op_params_path(Catalog::default_dir(), "h100-sxm"));
  const zoo::ZooModel m = zoo::describe_model("bert:large");
  const int mlp = m.layer_index("block0.mlp");
  const auto at = [mlp](const PlannedModel& p, int b) {
    const auto& timings = p.plan.profile.layers[static_cast<size_t>(mlp)].timings;
    const auto t = std::find_if(timings.begin(), timings.end(),
                                [b](const LayerTiming& x) { return x.micro_batch == b; });
    EXPECT_NE(t, timings.end());
    return t->forward_s;
  };
  // A compute-bound block at micro-batch 32: its GEMMs run on the tensor cores, priced at the
  // bfloat16 rate (0.8 x 989.5 TFLOP/s over 132 SMs per SM) against float32's (0.85 x 67).
  const double rate_ratio =
      ops.gemm_for("bfloat16").unit_flops.value / ops.gemm_for("float32").unit_flops.value;
  EXPECT_GT(rate_ratio, 10);
  EXPECT_GT(at(f32, 32) / at(bf16, 32), 5.0);
  EXPECT_LT(at(bf16, 1), at(f32, 1));  // micro-batch 1: half the bytes
  // The optimizer step is bound by its traffic on the device once the host issued the first
  // call: host_s + calls x launch_s + traffic / bandwidth, Adam's 28 bytes per parameter in
  // 8 calls against SGD's 12 in one.
  const LayerProfile& a = bf16.plan.profile.layers[static_cast<size_t>(mlp)];
  const LayerProfile& s = bf16_sgd.plan.profile.layers[static_cast<size_t>(mlp)];
  const double host = ops.host_s.value, launch = ops.launch_s.value;
  EXPECT_NEAR((a.optimizer_step_s - host - 8 * launch) / (s.optimizer_step_s - host - launch),
              28.0 / 12.0, 1e-9);
  EXPECT_GT(bf16.ctx.stages[0].optimizer_s, bf16_sgd.ctx.stages[0].optimizer_s);
  EXPECT_EQ(bf16.plan.profile.dtype, "bfloat16");
  EXPECT_EQ(bf16_sgd.plan.profile.optimizer, "sgd");
}

}  // namespace
}  // namespace pipetwin
