// profiles/zoo/: descriptors against the published parameter counts, the shipped measured profiles
// of the test-size models (layer for layer), FLOP closed forms, skip edges, and bad names.
#include "profiles/zoo/zoo.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/model_graph.hpp"
#include "profiles/model_source.hpp"
#include "core/profile.hpp"
#include "profiles/zoo/configs.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::zoo {
namespace {

using test::input_error;
using ::testing::HasSubstr;

double unique_params(const std::string& name) {
  return static_cast<double>(describe_model(name).unique_parameters());
}

struct Published {
  const char* name;
  double count;      // as published
  double tolerance;  // relative
  const char* source;
};

// Tolerances: the rounding of the published figure, widened where the published figure is a
// rounded marketing number (T5-large's "770M" counts 737.7M, BERT-large's "340M" 335M).
const Published kPublished[] = {
    {"bert:base", 110e6, 0.01, "Devlin et al. 2019: 110M"},
    {"bert:large", 340e6, 0.02, "Devlin et al. 2019: 340M"},
    {"gpt2:124m", 124e6, 0.005, "OpenAI GPT-2 release: 124M"},
    {"gpt2:355m", 355e6, 0.005, "OpenAI GPT-2 release: 355M"},
    {"gpt2:774m", 774e6, 0.005, "OpenAI GPT-2 release: 774M"},
    {"gpt2:1.5b", 1558e6, 0.005, "OpenAI GPT-2 release: 1558M (1.5B)"},
    {"t5:small", 60e6, 0.02, "Raffel et al. 2020: 60M"},
    {"t5:base", 220e6, 0.02, "Raffel et al. 2020: 220M"},
    {"t5:large", 770e6, 0.05, "Raffel et al. 2020: 770M"},
    {"t5:3b", 2.85e9, 0.01, "FTPipe / Raffel et al.: 2.85B"},
    {"t5:11b", 11e9, 0.05, "Raffel et al. 2020: 11B"},
    {"vit:b16", 86e6, 0.01, "Dosovitskiy et al. 2021: 86M"},
    {"vit:l16", 307e6, 0.01, "Dosovitskiy et al. 2021: 307M"},
    {"resnet:50", 25.6e6, 0.005, "He et al. 2016: 25.6M"},
    {"resnet:101", 44.5e6, 0.005, "He et al. 2016: 44.5M"},
    {"resnet20", 0.27e6, 0.01, "He et al. 2016, Table 6: 0.27M"},
};

TEST(ZooParams, MatchPublishedCounts) {
  for (const auto& p : kPublished) {
    SCOPED_TRACE(p.name);
    EXPECT_NEAR(unique_params(p.name) / p.count, 1.0, p.tolerance) << p.source;
  }
}

TEST(ZooParams, TiedCopiesAreCountedOnceInThePublishedFigure) {
  // GPT-2's LM head and T5's decoder embedding + LM head are copies of the input embedding.
  // GPT-2's wte and head have the vocabulary padded to a multiple of 128: 50257 -> 50304 rows.
  const ZooModel g = describe_model("gpt2:124m");
  EXPECT_EQ(g.tied_params, 50304 * 768);
  EXPECT_EQ(g.layers.back().params, 2 * 768 + 50304 * 768);
  const ZooModel t = describe_model("t5:3b");
  EXPECT_EQ(t.tied_params, 2 * int64_t{32128} * 1024);
  // FTPipe Section 6: "a small version of T5-11B, with 1 encoder layers and 1 decoder layer
  // (535M parameters)" -- counted with the LM head, the shared embedding once.
  const ZooModel small = describe_model("t5:11b,enc_layers=1,dec_layers=1");
  const double ftpipe = static_cast<double>(small.unique_parameters() + 32128 * 1024);
  EXPECT_NEAR(ftpipe / 535e6, 1.0, 0.005);
}

TEST(ZooParams, Gpt2PadsItsVocabularyToAMultipleOf128) {
  // wte and the LM head have 50304 rows, 47 more than GPT-2's 50257 tokens; vocab_multiple=1
  // describes the unpadded shape.
  const ZooModel padded = describe_model("gpt2:124m");
  const ZooModel unpadded = describe_model("gpt2:124m,vocab_multiple=1");
  EXPECT_EQ(padded.parameters() - unpadded.parameters(), 2 * 47 * 768);
  EXPECT_EQ(padded.layers.front().params, (50304 + 1024) * 768);
  EXPECT_DOUBLE_EQ(padded.layers.back().forward_flops, 2.0 * 1024 * 768 * 50304);
  EXPECT_DOUBLE_EQ(padded.layers.back().output_elems, 1024.0 * 50304);
  EXPECT_DOUBLE_EQ(unpadded.layers.back().output_elems, 1024.0 * 50257);
  // A small vocabulary follows the same rule: 40 tokens in 128 rows, 1024 (gpt2:tiny) unchanged.
  EXPECT_EQ(gpt2_config(ModelSpec::parse("gpt2:tiny,vocab=40", "test")).padded_vocab(), 128);
  EXPECT_EQ(describe_model("gpt2:tiny,vocab=40").layers.front().params, (128 + 64) * 128);
  EXPECT_EQ(gpt2_config(ModelSpec::parse("gpt2:tiny", "test")).padded_vocab(), 1024);
  EXPECT_THAT(input_error([] { describe_model("gpt2:tiny,vocab_multiple=0", "--model"); }),
              HasSubstr("--model: gpt2: option vocab_multiple must be at least 1 (0 given)"));
}

// torchgpipe Table 3 (copied to experiments/reference/): five U-Net (B, C) and their parameter
// counts, printed to 4 (or 3) significant digits; ours must round to the printed figure.
TEST(ZooParams, UnetMatchesTorchgpipeTable3ToThePrintedDigits) {
  std::ifstream in(std::string(PIPETWIN_SOURCE_DIR) +
                   "/experiments/reference/torchgpipe-table3-unet-memory.csv");
  ASSERT_TRUE(in) << "experiments/reference/torchgpipe-table3-unet-memory.csv";
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("config", 0) == 0) continue;
    std::stringstream ss(line);
    std::string config, devices, b, c, params;
    std::getline(ss, config, ',');
    std::getline(ss, devices, ',');
    std::getline(ss, b, ',');
    std::getline(ss, c, ',');
    std::getline(ss, params, ',');
    const double published = std::stod(params);
    // "362.2e6" has 4 significant digits, "2.21e9" 3: half a unit of the last one.
    const std::string mantissa = params.substr(0, params.find('e'));
    const int digits = static_cast<int>(std::count_if(mantissa.begin(), mantissa.end(), ::isdigit));
    const double unit = std::pow(10.0, std::floor(std::log10(published)) - (digits - 1));
    const double ours = unique_params("unet:B=" + b + ",C=" + c);
    SCOPED_TRACE(config);
    EXPECT_LE(std::abs(ours - published), 0.5 * unit) << ours;
    ++rows;
  }
  EXPECT_EQ(rows, 5);
}

// GPipe (Huang et al. 2019, torchgpipe's reference [11]) Table 1 sizes its AmoebaNet-D(L, D)
// runs: (18, 208) 82M, (18, 416) 318M, (18, 544) 542M, (36, 544) 1.05B parameters. The
// papers in this project state only the (18, 256) configuration, so these counts are GPipe's.
TEST(ZooParams, AmoebanetMatchesGpipeTable1) {
  EXPECT_NEAR(unique_params("amoebanet:L=18,F=208") / 82e6, 1.0, 0.01);
  EXPECT_NEAR(unique_params("amoebanet:L=18,F=416") / 318e6, 1.0, 0.01);
  EXPECT_NEAR(unique_params("amoebanet:L=18,F=544") / 542e6, 1.0, 0.01);
  EXPECT_NEAR(unique_params("amoebanet:L=36,F=544") / 1.05e9, 1.0, 0.01);
}

TEST(ZooParams, AmoebanetScalesWithFiltersAndCells) {
  // The papers give no parameter count for AmoebaNet-D; its structure still fixes how the count
  // scales: quadratic in F (up to BatchNorm's linear term), and each normal cell is alike.
  const double p18 = unique_params("amoebanet:L=18,F=256");
  EXPECT_GT(unique_params("amoebanet:L=18,F=512") / p18, 3.9);
  EXPECT_LT(unique_params("amoebanet:L=18,F=512") / p18, 4.0);
  const ZooModel m = describe_model("amoebanet:L=18,F=256");
  EXPECT_EQ(m.num_layers(), 1 + 2 + 18 + 2 + 1);
  const int a = m.layer_index("cell3_normal3"), b = m.layer_index("cell3_normal4");
  EXPECT_EQ(m.layers[a].params, m.layers[b].params);
  EXPECT_EQ(m.layers.back().params, 16 * 256 * 1000 + 1000);  // Linear(16F -> classes)
}

// The test-size descriptors describe the LibTorch models layer for layer: names, kinds, bytes.
TEST(ZooShipped, TestSizeDescriptorsMatchMeasuredProfiles) {
  const auto shipped = list_shipped_profiles(std::string(PIPETWIN_SOURCE_DIR) + "/traces");
  int checked = 0;
  for (const auto& s : shipped) {
    if (s.source != "measured") continue;
    SCOPED_TRACE(s.path);
    const Profile p = load_profile(s.path);
    const ZooModel z = describe_model(p.model);
    ASSERT_EQ(z.num_layers(), p.num_layers());
    // Activations in the profile's dtype (autocast: bfloat16 hands 2-byte tensors on); the
    // weights are float32 master copies in every dtype.
    const double act = dtype_bytes(p.dtype);
    EXPECT_EQ(z.input_elems * (z.input_tokens ? 8 : 4), p.input_bytes_per_sample);
    for (int i = 0; i < p.num_layers(); ++i) {
      const auto& zl = z.layers[static_cast<size_t>(i)];
      const auto& pl = p.layers[static_cast<size_t>(i)];
      SCOPED_TRACE(pl.name);
      EXPECT_EQ(zl.name, pl.name);
      EXPECT_EQ(zl.kind, pl.kind);
      EXPECT_EQ(static_cast<double>(zl.params) * 4, pl.param_bytes);
      EXPECT_EQ(zl.output_elems * (zl.float32_output ? 4 : act), pl.output_bytes_per_sample);
      // Within the per-micro-batch constants the profiler divides by b (a causal mask, BatchNorm
      // statistics, the loss scalar: 4 bytes / 8 samples). Saved activations as LibTorch 1.13
      // keeps them on a CPU; on a GPU other kernels keep other tensors (LibTorch 2.x's fused
      // attention its log-sum-exp, not the attention weights), so those profiles are not held
      // to it.
      if (p.device != "cpu-core") continue;
      EXPECT_NEAR(zl.saved_elems * 4, pl.saved_bytes_per_sample,
                  std::max(0.01 * pl.saved_bytes_per_sample, 1.0));
    }
    ++checked;
  }
  // mlp, resnet20, vit:tiny, bert:tiny, gpt2:tiny on cpu-core and an H100; vit:base, bert:base
  // on the H100; five bfloat16 profiles on an H200
  EXPECT_GE(checked, 17);
}

// ---- FLOPs ---------------------------------------------------------------------------------

TEST(ZooFlops, BertBlockIsTheClosedForm) {
  // Forward FLOPs per sample of a BERT block: 24 s h^2 + 4 s^2 h, of which attention takes
  // 8 s h^2 + 4 s^2 h (q, k, v, output projections; Q K^T and P V) and the MLP 16 s h^2.
  const ZooModel m = describe_model("bert:large,seq=384");
  const double s = 384, h = 1024;
  const auto& attn = m.layers[static_cast<size_t>(m.layer_index("block3.attn"))];
  const auto& mlp = m.layers[static_cast<size_t>(m.layer_index("block3.mlp"))];
  EXPECT_DOUBLE_EQ(attn.forward_flops + mlp.forward_flops, 24 * s * h * h + 4 * s * s * h);
  EXPECT_DOUBLE_EQ(attn.forward_flops, 8 * s * h * h + 4 * s * s * h);
  EXPECT_DOUBLE_EQ(mlp.forward_flops, 16 * s * h * h);
}

TEST(ZooFlops, T5CrossAttentionAndHead) {
  const ZooModel m = describe_model("t5:3b,enc_seq=512,dec_seq=4");
  const double s = 512, t = 4, d = 1024, i = 32 * 128, v = 32128;
  const auto& cross = m.layers[static_cast<size_t>(m.layer_index("dec7.cross"))];
  // q and output projections over t tokens, k and v over s, then Q K^T and P V (t x s).
  EXPECT_DOUBLE_EQ(cross.forward_flops, 4 * t * d * i + 4 * s * d * i + 4 * t * s * i);
  const auto& enc_attn = m.layers[static_cast<size_t>(m.layer_index("enc7.attn"))];
  EXPECT_DOUBLE_EQ(enc_attn.forward_flops, 8 * s * d * i + 4 * s * s * i);
  EXPECT_DOUBLE_EQ(m.layers.back().forward_flops, 2 * t * d * v);
  // FTPipe Section 3.3: with 512 / 4 tokens an encoder layer costs several decoder layers.
  const auto flops_of = [&](const std::string& prefix) {
    double f = 0;
    for (const auto& l : m.layers) f += l.name.rfind(prefix, 0) == 0 ? l.forward_flops : 0;
    return f;
  };
  EXPECT_GT(flops_of("enc5.") / flops_of("dec5."), 5.0);
}

TEST(ZooFlops, ResNet50IsAbout4GMacs) {
  // He et al. Table 1: 3.8 x 10^9 FLOPs (multiply-adds) for ResNet-50 at 224 x 224.
  EXPECT_NEAR(describe_model("resnet:50").forward_flops() / 2 / 3.8e9, 1.0, 0.1);
}

// ---- edges ---------------------------------------------------------------------------------

TEST(ZooEdges, T5EncoderOutputFeedsEveryCrossAttention) {
  const ZooModel m = describe_model("t5:small,enc_seq=64,dec_seq=8");
  const int enc = m.layer_index("enc.norm");
  std::set<int> fed;
  for (const auto& e : m.edges) {
    EXPECT_LT(e.from, e.to);
    if (e.from == enc && m.layers[static_cast<size_t>(e.to)].kind == "cross-attention") {
      fed.insert(e.to);
      EXPECT_EQ(e.elems, 64 * 512);
    }
  }
  EXPECT_EQ(fed.size(), 6u);
  bool tokens = false;
  for (const auto& e : m.edges) tokens = tokens || (e.tokens && e.to == m.layer_index("dec.embed"));
  EXPECT_TRUE(tokens);
  EXPECT_EQ(m.input_elems, 64 + 8);
}

TEST(ZooEdges, UnetSkipsJumpFromEncoderToDecoder) {
  const ZooModel m = describe_model("unet:B=3,C=8");
  int skips = 0;
  for (const auto& e : m.edges) {
    if (e.to == e.from + 1) continue;
    const auto& from = m.layers[static_cast<size_t>(e.from)].name;
    const auto& to = m.layers[static_cast<size_t>(e.to)].name;
    const int level = from[3] - '0';
    EXPECT_EQ(from, "enc" + std::to_string(level) + ".conv2");
    EXPECT_EQ(to, "dec" + std::to_string(level) + ".conv0");
    const double side = 192 >> level;
    EXPECT_EQ(e.elems, (8 << level) * side * side);
    ++skips;
  }
  EXPECT_EQ(skips, 5);
  EXPECT_EQ(m.num_layers(), 11 * 3 + 1);
}

// mlp:skip=1, the model python/pipetwin_trace.py's SkipMLP is: the head reads fc0's output too
// and keeps the sum its Linear reads.
TEST(ZooEdges, SkipMlpHeadReadsFc0) {
  const ZooModel plain = describe_model("mlp:layers=3,width=16");
  const ZooModel m = describe_model("mlp:layers=3,width=16,skip=1");
  ASSERT_EQ(m.num_layers(), 4);
  std::vector<std::pair<int, int>> ends;
  for (const auto& e : m.edges) {
    ends.emplace_back(e.from, e.to);
    EXPECT_EQ(e.elems, 16);
  }
  EXPECT_EQ(ends, (std::vector<std::pair<int, int>>{{0, 1}, {0, 3}, {1, 2}, {2, 3}}));
  EXPECT_EQ(m.layers[3].saved_elems, plain.layers[3].saved_elems + 16);
  EXPECT_EQ(m.parameters(), plain.parameters());
  EXPECT_TRUE(plain.edges.empty());
  EXPECT_THAT(input_error([] { describe_model("mlp:layers=1,skip=1", "--model"); }),
              HasSubstr("--model: mlp: skip=1 needs at least 2 layers"));
  EXPECT_THAT(input_error([] { describe_model("mlp:skip=2", "--model"); }),
              HasSubstr("--model: mlp: skip must be 0 or 1 (2 given)"));
}

TEST(ZooEdges, EveryDescriptorIsAValidGraph) {
  for (const auto& name : zoo_names()) {
    SCOPED_TRACE(name);
    const ZooModel m = describe_model(name);
    EXPECT_EQ(m.name, ModelSpec::parse(name, "t").to_string());
    EXPECT_GT(m.parameters(), 0);
    Profile p;
    p.model = m.name;
    for (const auto& l : m.layers) {
      LayerProfile lp;
      lp.name = l.name;
      lp.timings = {{1, 1e-3, 2e-3, 1e-3, 1.0}};
      lp.output_bytes_per_sample = l.output_elems;
      p.layers.push_back(lp);
      EXPECT_GE(l.saved_elems, 0);
      EXPECT_GE(l.traffic_elems, l.saved_elems);
    }
    for (const auto& e : m.edges) p.edges.push_back({e.from, e.to, e.elems});
    const ModelGraph g = ModelGraph::from_profile(p, name);
    EXPECT_TRUE(g.index_order_is_topological());
  }
}

// ---- errors --------------------------------------------------------------------------------

TEST(ZooErrors, BadNamesNameTheBadItem) {
  EXPECT_THAT(input_error([] { describe_model("vit:huge"); }),
              HasSubstr("vit: unknown preset \"huge\""));
  EXPECT_THAT(input_error([] { describe_model("t5:3b,enc_len=5"); }),
              HasSubstr("unknown option \"enc_len\" for model t5"));
  EXPECT_THAT(input_error([] { describe_model("amoebanet:L=20,F=256"); }),
              HasSubstr("L 20 is not a multiple of 3"));
  EXPECT_THAT(input_error([] { describe_model("unet:B=1,C=64"); }),
              HasSubstr("option B must be at least 2 (1 given)"));
  EXPECT_THAT(input_error([] { describe_model("resnet:34"); }), HasSubstr("unknown preset \"34\""));
  EXPECT_THAT(input_error([] { describe_model("vit:tiny,depth=2,layers=3"); }),
              HasSubstr("give depth or layers, not both"));
  EXPECT_THAT(input_error([] { describe_model("bert:base,seq=1024"); }),
              HasSubstr("seq 1024 exceeds positions 512"));
  EXPECT_THAT(input_error([] { describe_model("lenet", "plan.json: model"); }),
              HasSubstr("plan.json: model: no analytic descriptor for model family \"lenet\""));
  EXPECT_THAT(input_error([] { dtype_bytes("int4", "--dtype"); }),
              HasSubstr("--dtype: unknown dtype \"int4\""));
}

TEST(ZooNames, AliasesDescribeTheSameModel) {
  EXPECT_EQ(describe_model("vit:b16").parameters(), describe_model("vit:base").parameters());
  EXPECT_EQ(describe_model("gpt2:1.5b").parameters(), describe_model("gpt2:xl").parameters());
  EXPECT_EQ(describe_model("vit:tiny,layers=3,hidden=96").parameters(),
            describe_model("vit:tiny,depth=3,dim=96").parameters());
  // resnet20 is the CIFAR network, resnet:depth=20 the same; resnet:50 the ImageNet one.
  EXPECT_EQ(describe_model("resnet20").parameters(),
            describe_model("resnet:depth=20").parameters());
  EXPECT_EQ(describe_model("resnet:50").layers.size(), 1u + 16 + 1);
}

// One table per family (profiles/zoo/configs.hpp), shared with models/: every name in it describes,
// and every name `pipetwin zoo` lists for a family both zoos build is in it.
TEST(ZooNames, EveryPresetTableNameDescribes) {
  std::set<std::string> tables;
  for (const auto& family : shared_families()) {
    for (const auto& name : preset_models(family)) {
      SCOPED_TRACE(name);
      EXPECT_EQ(describe_model(name).family, family);
      tables.insert(name);
    }
  }
  EXPECT_EQ(tables.size(), 7u + 6 + 11 + 8 + 1 + 1);  // vit, bert, gpt2, resnet, unet, mlp
  for (const auto& name : zoo_names()) {
    const auto spec = ModelSpec::parse(name, "test");
    const std::set<std::string> analytic_only = {"t5", "amoebanet", "vgg", "alexnet"};
    if (analytic_only.count(spec.family) != 0 || !spec.args.empty()) continue;
    EXPECT_EQ(tables.count(name), 1u) << name;
  }
  EXPECT_EQ(describe_model("gpt2:124m").parameters(),
            describe_gpt2(gpt2_config(ModelSpec::parse("gpt2:small", "test"))).parameters());
}

TEST(ZooNames, ImagenetResnetWidthScalesTheBlocks) {
  const ZooModel m = describe_model("resnet:50,width=8");
  const auto blocks = resnet_blocks(resnet_config(ModelSpec::parse("resnet:50,width=8", "t")));
  ASSERT_EQ(blocks.size(), 16u);
  EXPECT_EQ(m.num_layers(), 1 + 16 + 1);
  // block0: 1x1 8->8, 3x3 8->8, 1x1 8->32, projection 1x1 8->32, four BatchNorms.
  EXPECT_EQ(m.layers[1].params, 8 * 8 + 9 * 8 * 8 + 8 * 32 + 8 * 32 + 2 * (8 + 8 + 32 + 32));
  EXPECT_TRUE(blocks[0].project);
  EXPECT_EQ(blocks[3].stride, 2);  // the first block of stage 2
  EXPECT_FALSE(blocks[4].project);
  EXPECT_EQ(m.layers.back().params, 256 * 1000 + 1000);  // Linear(32 x width -> classes)
  EXPECT_EQ(describe_model("resnet:50,width=64").parameters(),
            describe_model("resnet:50").parameters());
}

}  // namespace
}  // namespace pipetwin::zoo
