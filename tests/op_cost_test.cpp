// profiles/zoo/op_cost.hpp, ops.hpp and op_params.hpp: the wave model's closed forms (a GEMM of
// exactly one wave against one tile more), the Winograd choice, the kernels a layer's passes
// launch, op-parameter files with bad fields, every shipped op file, and the op-level profiles
// the catalog gives GPUs (bfloat16 against float32 on the H100; which profile resolve_profile
// picks).
#include "profiles/zoo/op_cost.hpp"

#include <algorithm>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::zoo {
namespace {

namespace fs = std::filesystem;
using test::input_error;
using ::testing::HasSubstr;

Sourced n(double v) {
  return {v, "test"};
}

// A device of 4 units, 64 x 64 tiles at 1 TFLOP/s per unit, memory fast enough never to bind.
OpParams toy_gpu() {
  OpParams p;
  p.device = "toy";
  p.derivation = "datasheet";
  p.units = n(4);
  p.async = false;
  p.launch_s = n(0);
  p.host_s = n(0);
  p.host_node_s = n(0);
  p.host_tensor_s = n(0);
  p.bandwidth = n(1e18);
  p.cache_bytes = n(0);
  p.cache_bandwidth = n(1e18);
  p.attention_forward = n(0.5);
  p.attention_backward = n(0.4);
  p.gemm["float32"] = {n(64), n(64), n(1e12), n(0)};
  p.gemm["bfloat16"] = {n(64), n(64), n(4e12), n(0)};
  p.conv_forward = p.conv_dgrad = p.conv_wgrad = n(1);
  p.winograd_dtypes = {"float32"};
  return p;
}

double tile_s(double k, double unit_flops = 1e12) {
  return 2.0 * 64 * 64 * k / unit_flops;
}

TEST(WaveModel, ExactlyOneWaveCostsOneTile) {
  // 128 x 128 is 2 x 2 tiles: one wave on 4 units.
  const GemmCost c = gemm_cost(1, 128, 128, 256, toy_gpu(), "float32");
  EXPECT_EQ(c.tiles, 4);
  EXPECT_EQ(c.waves, 1);
  EXPECT_DOUBLE_EQ(c.compute_s, tile_s(256));
}

TEST(WaveModel, OneTileMoreAddsAWave) {
  const GemmCost one = gemm_cost(1, 128, 128, 256, toy_gpu(), "float32");
  const GemmCost more = gemm_cost(1, 129, 128, 256, toy_gpu(), "float32");  // 3 x 2 tiles
  EXPECT_EQ(more.tiles, 6);
  EXPECT_EQ(more.waves, 2);
  EXPECT_DOUBLE_EQ(more.compute_s - one.compute_s, tile_s(256));
  // ... and stays there until the second wave is full: 8 tiles.
  EXPECT_DOUBLE_EQ(gemm_cost(1, 256, 128, 256, toy_gpu(), "float32").compute_s, more.compute_s);
  EXPECT_EQ(gemm_cost(1, 257, 128, 256, toy_gpu(), "float32").waves, 3);
}

TEST(WaveModel, SmallGemmsLoseEfficiency) {
  // A 1-row GEMM pays a whole tile: 1/64 of the work at the price of a full tile.
  const GemmCost tiny = gemm_cost(1, 1, 64, 256, toy_gpu(), "float32");
  EXPECT_DOUBLE_EQ(tiny.compute_s, tile_s(256));
  const double achieved = 2.0 * 1 * 64 * 256 / tiny.compute_s;
  EXPECT_DOUBLE_EQ(achieved, 1e12 / 64);
}

TEST(WaveModel, TileOverheadAndBatchAndDtype) {
  OpParams p = toy_gpu();
  p.gemm["float32"].tile_k_overhead = n(64);
  EXPECT_DOUBLE_EQ(gemm_cost(1, 64, 64, 256, p, "float32").compute_s, tile_s(320));
  // 8 products of one tile each: 2 waves on 4 units.
  EXPECT_EQ(gemm_cost(8, 64, 64, 256, p, "float32").waves, 2);
  EXPECT_DOUBLE_EQ(gemm_cost(1, 64, 64, 256, toy_gpu(), "bfloat16").compute_s, tile_s(256, 4e12));
}

TEST(WaveModel, MemoryBoundWhenBandwidthIsLow) {
  OpParams p = toy_gpu();
  p.bandwidth = p.cache_bandwidth = n(1e9);
  const GemmCost c = gemm_cost(1, 64, 64, 64, p, "float32");
  EXPECT_DOUBLE_EQ(c.memory_s, 3.0 * 64 * 64 * 4 / 1e9);
  EXPECT_DOUBLE_EQ(c.body_s(), c.memory_s);
}

OpSpec conv3x3(int64_t channels, int64_t side, int64_t stride) {
  return conv_op("c", channels, channels, 3, side, side, stride, 1);
}

TEST(Winograd, ChosenFor3x3Stride1InItsDtypes) {
  const OpParams p = toy_gpu();
  const OpSpec c = conv3x3(256, 32, 1);
  const ConvCost fwd = conv_cost(c, ConvPass::forward, 32, p, "float32");
  EXPECT_EQ(fwd.algo, ConvAlgo::winograd);
  // Compute-bound: 16 products over 2x2-output tiles, 2.25x fewer multiplications than
  // implicit GEMM; with tiles that divide evenly the times are in that ratio.
  const GemmCost implicit = gemm_cost(1, 32.0 * 32 * 32, 256, 256.0 * 9, p, "float32");
  const GemmCost wino = gemm_cost(16, 32.0 * 16 * 16, 256, 256, p, "float32");
  EXPECT_DOUBLE_EQ(implicit.compute_s / wino.compute_s, 2.25);
  EXPECT_NEAR(fwd.body_s / wino.compute_s, 1, 1e-6);  // the transforms' traffic is free here
  EXPECT_EQ(conv_cost(c, ConvPass::dgrad, 32, p, "float32").algo, ConvAlgo::winograd);
}

TEST(Winograd, NotForOtherShapesPassesOrDtypes) {
  const OpParams p = toy_gpu();
  EXPECT_EQ(conv_cost(conv3x3(256, 32, 2), ConvPass::forward, 32, p, "float32").algo,
            ConvAlgo::implicit_gemm);
  EXPECT_EQ(
      conv_cost(conv_op("c", 256, 256, 1, 32, 32, 1, 0), ConvPass::forward, 32, p, "float32").algo,
      ConvAlgo::implicit_gemm);
  EXPECT_EQ(conv_cost(conv3x3(256, 32, 1), ConvPass::wgrad, 32, p, "float32").algo,
            ConvAlgo::implicit_gemm);
  EXPECT_EQ(conv_cost(conv3x3(256, 32, 1), ConvPass::forward, 32, p, "bfloat16").algo,
            ConvAlgo::implicit_gemm);
  OpParams memory_bound = p;  // the transforms' 4x traffic makes Winograd the slower one
  memory_bound.bandwidth = memory_bound.cache_bandwidth = n(1e9);
  EXPECT_EQ(conv_cost(conv3x3(256, 32, 1), ConvPass::forward, 32, memory_bound, "float32").algo,
            ConvAlgo::implicit_gemm);
}

TEST(Kernels, LinearBackwardHalves) {
  const std::vector<OpSpec> ops = {linear_op("fc", 10, 32, 48)};
  const LayerKernels k = expand_ops(ops, 4, {});
  ASSERT_EQ(k.forward.size(), 1u);
  EXPECT_EQ(k.forward[0].m, 40);
  EXPECT_EQ(k.forward[0].n, 48);
  EXPECT_EQ(k.forward[0].k, 32);
  ASSERT_EQ(k.input_half.size(), 1u);  // dX = dY W: 40 x 32 over 48
  EXPECT_EQ(k.input_half[0].n, 32);
  EXPECT_EQ(k.input_half[0].k, 48);
  ASSERT_EQ(k.weight_half.size(), 2u);  // dW = dY^T X: 48 x 32 over 40, and the bias's sum
  EXPECT_EQ(k.weight_half[0].m, 48);
  EXPECT_EQ(k.weight_half[0].k, 40);
  EXPECT_EQ(k.weight_half[1].elt, EltClass::reduce);
  EXPECT_EQ(k.param_tensors, 2);
  ExpandOptions first;
  first.first_layer = true;
  EXPECT_TRUE(expand_ops(ops, 4, first).input_half.empty());
}

TEST(Kernels, AttentionFusedOrUnfused) {
  const std::vector<OpSpec> ops = {attention_op("a", 2, 16, 16, 8, true, 0)};
  ExpandOptions fused;
  fused.fused_attention = true;
  const LayerKernels f = expand_ops(ops, 3, fused);
  ASSERT_EQ(f.forward.size(), 1u);
  EXPECT_DOUBLE_EQ(f.forward[0].flops, 4.0 * 6 * 16 * 16 * 8 * 0.5);  // causal: half the blocks
  ASSERT_EQ(f.input_half.size(), 1u);
  EXPECT_DOUBLE_EQ(f.input_half[0].flops, 2.5 * f.forward[0].flops);
  const LayerKernels u = expand_ops(ops, 3, {});
  int gemms = 0;
  for (const auto& k : u.forward) gemms += k.kind == OpKind::gemm;
  EXPECT_EQ(gemms, 2);  // Q K^T and P V, with copies, scale, mask and softmax between
  EXPECT_GT(u.forward.size(), 6u);
}

TEST(Kernels, EmbeddingBackwardFillsTheTable) {
  const LayerKernels k = expand_ops({embedding_op("e", 64, 128, 1024)}, 2, {});
  ASSERT_EQ(k.input_half.size(), 2u);
  EXPECT_DOUBLE_EQ(k.input_half[0].writes, 1024.0 * 128);  // per micro-batch, not per sample
  EXPECT_DOUBLE_EQ(k.input_half[1].elems, 2.0 * 64 * 128);
}

TEST(Kernels, EveryZooLayerOfTheTestModelsListsItsOps) {
  for (const char* name :
       {"vit:tiny", "bert:tiny", "gpt2:tiny", "mlp", "resnet20", "unet", "t5:small", "vgg:16"}) {
    for (const auto& l : describe_model(name).layers) {
      EXPECT_FALSE(l.ops.empty()) << name << " " << l.name;
    }
  }
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string shipped_h100() {
  return op_params_path(Catalog::default_dir(), "h100-sxm");
}

// The H100 file with `edit` applied to its JSON, loaded: the error message.
std::string error_after(const std::function<void(Json&)>& edit, const fs::path& dir) {
  Json doc = load_json_file(shipped_h100());
  edit(doc);
  const fs::path path = dir / "broken.json";
  write(path, doc.dump());
  return input_error([&] { load_op_params(path.string()); });
}

TEST(OpParamsFile, BadFieldsGiveOneLineErrorsNamingFileAndField) {
  test::TempDir dir;
  const auto check = [&](const std::function<void(Json&)>& edit, const std::string& field) {
    const std::string e = error_after(edit, dir.path());
    EXPECT_THAT(e, HasSubstr("broken.json")) << e;
    EXPECT_THAT(e, HasSubstr(field)) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  check([](Json& d) { d["gemm"]["bfloat16"]["tile_m"]["value"] = -3; }, "gemm.bfloat16.tile_m");
  check([](Json& d) { d["gemm"]["bfloat16"]["unit_flops"].erase("source"); },
        "gemm.bfloat16.unit_flops");
  check([](Json& d) { d["bandwidth"]["source"] = ""; }, "bandwidth.source");
  check([](Json& d) { d["attention_efficiency"]["forward"]["value"] = 1.5; },
        "attention_efficiency.forward.value");
  check([](Json& d) { d["gemm"]["float8"] = d["gemm"]["bfloat16"]; }, "gemm.float8");
  check([](Json& d) { d["conv"]["winograd_dtypes"]["value"] = {"int4"}; },
        "conv.winograd_dtypes.value");
  check([](Json& d) { d["elementwise"] = {{"sparkle", {}}}; }, "elementwise.sparkle");
  check([](Json& d) { d["derivation"] = "guessed"; }, "derivation");
  check([](Json& d) { d.erase("units"); }, "units");
  check([](Json& d) { d["launch"] = 1; }, "launch");
  check([](Json& d) { d["async"] = true; }, "async");
}

TEST(OpParamsFile, EveryShippedFileLoadsWithSourcesAndRoundTrips) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(Catalog::default_dir()) / "ops")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    const OpParams p = load_op_params(e.path().string());
    EXPECT_EQ(p.device + ".json", e.path().filename().string());
    EXPECT_FALSE(p.units.source.empty());
    for (const auto& [dtype, g] : p.gemm) EXPECT_FALSE(g.unit_flops.source.empty()) << dtype;
    const OpParams again = op_params_from_json(JsonView(op_params_to_json(p), "again"));
    EXPECT_EQ(dump_json(op_params_to_json(again)), dump_json(op_params_to_json(p)));
    if (p.derivation == "derived") EXPECT_THAT(p.notes, HasSubstr("not at hand"));
  }
  EXPECT_GE(files, 10);
}

TEST(OpParamsFile, MissingDtypeNamesTheFile) {
  const OpParams p = load_op_params(op_params_path(Catalog::default_dir(), "tesla-p40"));
  EXPECT_THAT(input_error([&] { p.gemm_for("bfloat16"); }),
              HasSubstr("tesla-p40.json: gemm: no parameters for dtype bfloat16"));
}

double total_compute(const Profile& p) {
  double t = 0;
  for (const auto& l : p.layers) t += l.timings[0].forward_s + l.timings[0].backward_s;
  return t;
}

TEST(OpLevelProfile, Gpt2OnH100Bfloat16IsAtLeast3xFasterThanFloat32) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  const DeviceSpec& h100 = catalog.device("h100-sxm", "test");
  const OpParams p = load_op_params(op_params_path(Catalog::default_dir(), "h100-sxm"));
  AnalyticOptions o;
  o.micro_batches = {4};
  o.dtype = "float32";
  const Profile f32 = op_level_profile(describe_model("gpt2:124m"), h100, p, o);
  o.dtype = "bfloat16";
  const Profile bf16 = op_level_profile(describe_model("gpt2:124m"), h100, p, o);
  EXPECT_GE(total_compute(f32) / total_compute(bf16), 3.0);
  for (const auto& l : bf16.layers) {
    EXPECT_GE(l.timings[0].backward_weight_s, 0) << l.name;
    EXPECT_LE(l.timings[0].backward_weight_s, l.timings[0].backward_s) << l.name;
  }
}

TEST(OpLevelProfile, ResolveUsesTheOpModelOnGpusWithOpFiles) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  ResolveOptions o;
  o.dtype = "bfloat16";
  // A profile measured on the H200 is not scaled to the H100: the op-level model prices it.
  const Profile h100 = resolve_profile("gpt2:124m", "", catalog.device("h100-sxm", "test"), o);
  EXPECT_EQ(h100.source, "analytic");
  EXPECT_THAT(h100.notes, HasSubstr("op-level model"));
  o.dtype = "float32";
  EXPECT_THAT(resolve_profile("bert:large", "", catalog.device("a100-80gb", "test"), o).notes,
              HasSubstr("op-level model"));
  // The Pascal GPU of torchgpipe keeps the roofline derived from published measurements.
  EXPECT_THAT(resolve_profile("bert:large", "", catalog.device("tesla-p40", "test"), o).notes,
              HasSubstr("roofline"));
  // An efficiency file given by the user wins.
  o.efficiency_file =
      (fs::path(Catalog::default_dir()) / "efficiency" / "h100-sxm-float32.json").string();
  EXPECT_THAT(resolve_profile("bert:large", "", catalog.device("h100-sxm", "test"), o).notes,
              HasSubstr("roofline"));
}

}  // namespace
}  // namespace pipetwin::zoo
