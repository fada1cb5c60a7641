// models/: the zoo — determinism, shapes of every preset, layer-by-layer equivalence, micro-batch
// equivalence of gradients, parameter counts (closed form vs built, and vs the papers), errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/zoo.hpp"
#include "profiles/zoo/configs.hpp"

namespace pipetwin::models {
namespace {

// A preset at a size a unit test can afford: one over 8M parameters gets one block, 8 dimensions
// a head, short sequences, a small vocabulary (ImageNet ResNets: base width 8, image 32), so
// every layer kind stays and the build is a few MB.
std::string test_size(const std::string& name) {
  const auto spec = ModelSpec::parse(name, "test");
  if (!zoo::is_zoo_family(spec) || zoo::describe_model(spec).parameters() < 8'000'000) {
    return name;
  }
  const std::string& f = spec.family;
  if (f == "vit") {
    return name + fmt::format(",depth=1,dim={},image=32", 8 * zoo::vit_config(spec).heads);
  }
  if (f == "bert") {
    return name +
           fmt::format(",layers=1,hidden={},seq=16,vocab=100", 8 * zoo::bert_config(spec).heads);
  }
  if (f == "gpt2") {
    return name +
           fmt::format(",layers=1,dim={},seq=16,vocab=100", 8 * zoo::gpt2_config(spec).heads);
  }
  if (f == "resnet") return name + ",width=8,image=32,classes=10";
  if (f == "unet") return "unet:B=2,C=8,image=32";
  return name;
}

void expect_output_shape(const LayeredModel& m, const torch::Tensor& out, int64_t batch) {
  switch (m.task) {
    case Task::kClassification:
      EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{batch, m.sample.classes})) << m.name;
      break;
    case Task::kLanguageModel: {
      // GPT-2's logits have the padded vocabulary's width (configs.hpp Gpt2Config).
      const int64_t rows = zoo::gpt2_config(ModelSpec::parse(m.name, "test")).padded_vocab();
      EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{batch, m.sample.input_shape.at(0), rows}))
          << m.name;
      break;
    }
    case Task::kRegression: {
      std::vector<int64_t> shape = {batch};
      shape.insert(shape.end(), m.sample.target_shape.begin(), m.sample.target_shape.end());
      EXPECT_EQ(out.sizes().vec(), shape) << m.name;
      break;
    }
  }
}

bool same_parameters(const LayeredModel& a, const LayeredModel& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!pa[i].equal(pb[i])) return false;
  }
  return true;
}

TEST(ModelsZoo, BuildIsDeterministicInTheSeed) {
  for (const char* name : {"mlp", "resnet20", "vit:test", "bert:tiny,seq=8", "gpt2:tiny",
                           "uniform:layers=3,param_kb=1"}) {
    for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
      const auto a = build_model(name, dtype, 7);
      const auto b = build_model(name, dtype, 7);
      const auto c = build_model(name, dtype, 8);
      EXPECT_TRUE(same_parameters(a, b)) << name;
      EXPECT_FALSE(same_parameters(a, c)) << name;
      EXPECT_EQ(a.parameters().front().scalar_type(), dtype) << name;
    }
  }
}

TEST(ModelsZoo, NamesAreCanonical) {
  const auto m = build_model("vit:tiny,patch=2,image=8,channels=1");
  EXPECT_EQ(m.name, "vit:tiny,channels=1,image=8,patch=2");
  EXPECT_EQ(canonical_model_name("resnet20"), "resnet20");
  EXPECT_EQ(m.layers.front().name, "embed");
  EXPECT_EQ(m.layers[1].name, "block0.attn");
  EXPECT_EQ(m.layers[2].name, "block0.mlp");
  EXPECT_EQ(m.layers.back().name, "head");
  EXPECT_EQ(m.layers.size(), 2u + 2u * 12u);
  EXPECT_EQ(m.index_of("block3.mlp"), 8u);
}

TEST(ModelsZoo, ResNet20HasTheElevenLayersOfTheEpflSplit) {
  const auto m = build_model("resnet20");
  ASSERT_EQ(m.layers.size(), 11u);
  EXPECT_EQ(m.layers.front().name, "stem");
  EXPECT_EQ(m.layers[9].name, "block8");
  EXPECT_EQ(m.layers.back().name, "head");
}

TEST(ModelsZoo, Gpt2AttentionIsCausal) {
  torch::NoGradGuard no_grad;
  auto m = build_model("gpt2:tiny,seq=8", torch::kFloat64);
  const auto x = m.synthetic_input(2, 0);
  auto changed = x.clone();
  changed.select(1, 7).fill_(0);  // only the last token differs
  const auto a = m.forward(x), b = m.forward(changed);
  EXPECT_TRUE(a.slice(1, 0, 7).equal(b.slice(1, 0, 7)));
  EXPECT_FALSE(a.select(1, 7).equal(b.select(1, 7)));
}

// The padded vocabulary (models/gpt2.hpp): 40 tokens in 128 rows of wte and of the LM head; the
// data never draw a padded token, so wte's padded rows get no gradient, while the head's do (the
// softmax covers every row).
TEST(ModelsZoo, Gpt2PadsTheRowsNotTheTokens) {
  auto m = build_model("gpt2:tiny,layers=1,dim=32,vocab=40,seq=6,ctx=8", torch::kFloat64, 1);
  auto wte = m.layers.front().module.ptr()->named_parameters()["wte"];
  auto head = m.layers.back().module.ptr()->named_parameters()["lm_head.weight"];
  EXPECT_EQ(wte.sizes().vec(), (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(head.sizes().vec(), (std::vector<int64_t>{128, 32}));
  const auto x = m.synthetic_input(16, 3), y = m.synthetic_target(16, 3);
  EXPECT_LT(x.max().item<int64_t>(), 40);
  EXPECT_LT(y.max().item<int64_t>(), 40);
  m.per_sample_loss(m.forward(x), y).sum().backward();
  EXPECT_EQ(wte.grad().slice(0, 40).abs().max().item<double>(), 0.0);
  EXPECT_GT(wte.grad().slice(0, 0, 40).abs().max().item<double>(), 0.0);
  EXPECT_GT(head.grad().slice(0, 40).abs().min().item<double>(), 0.0);
}

TEST(ModelsZoo, EveryPresetRunsAtTestSize) {
  torch::NoGradGuard no_grad;
  for (const auto& preset : model_presets()) {
    auto m = build_model(test_size(preset), torch::kFloat32, 1);
    const auto out = m.forward(m.synthetic_input(2, 3));
    expect_output_shape(m, out, 2);
    EXPECT_TRUE(out.isfinite().all().item<bool>()) << preset;
    const auto loss = m.per_sample_loss(out, m.synthetic_target(2, 3));
    EXPECT_EQ(loss.sizes().vec(), (std::vector<int64_t>{2})) << preset;
  }
}

// Small configurations of every family, run in the tests below.
const std::vector<std::string>& small_models() {
  static const std::vector<std::string> names = {
      "mlp:layers=2,width=16",
      "mlp:layers=3,width=16,skip=1",
      "resnet20:norm=group,image=8",
      "vit:test,image=8,patch=2",
      "vit:test,image=8,patch=2,channels=1,dropout=0.1",
      "bert:tiny,layers=1,seq=8,vocab=50,hidden=32,heads=2",
      "gpt2:tiny,layers=2,dim=32,vocab=40,seq=6,ctx=8",
      "unet:B=2,C=4,image=32,norm=group",
      "uniform:layers=3,act_kb=0.125,param_kb=0.0625,fwd_ms=0,bwd_ms=0"};
  return names;
}

TEST(ModelsZoo, LayersInSequenceEqualTheWholeModel) {
  torch::NoGradGuard no_grad;
  for (const auto& name : small_models()) {
    auto m = build_model(name, torch::kFloat64, 5);
    m.train(false);
    const auto x = m.synthetic_input(3, 11);
    const auto whole = m.forward(x);
    if (!m.has_skips()) {
      auto y = x;
      for (auto& layer : m.layers) y = layer.module.forward(y);
      EXPECT_TRUE(y.equal(whole)) << name;
    }
    // Two stages cut where no skip crosses (U-Net: before the encoder's first skip source; the
    // skip MLP's head reads fc0, so no cut is free of it).
    const auto sources = m.skip_sources();
    size_t cut = m.layers.size() / 2;
    auto crosses = [&](size_t c) {
      for (size_t l = c; l < sources.size(); ++l) {
        if (sources[l] >= 0 && static_cast<size_t>(sources[l]) < c) return true;
      }
      return false;
    };
    for (size_t c = 1; crosses(cut) && c < m.layers.size(); ++c) cut = c;
    if (crosses(cut)) continue;
    const auto staged = m.forward_range(m.forward_range(x, 0, cut), cut, m.layers.size());
    EXPECT_TRUE(staged.equal(whole)) << name;
  }
}

// Sum of per-sample losses over micro-batches / batch size gives the single-batch gradients.
TEST(ModelsZoo, MicroBatchGradientsEqualMiniBatchGradients) {
  for (const auto& name : small_models()) {
    if (name.find("dropout") != std::string::npos) continue;
    auto m = build_model(name, torch::kFloat64, 5);
    const int64_t batch = 4;
    const auto x = m.synthetic_input(batch, 1), t = m.synthetic_target(batch, 1);
    const auto params = m.parameters();
    const auto whole = torch::autograd::grad({m.per_sample_loss(m.forward(x), t).mean()}, params);
    std::vector<torch::Tensor> summed;
    for (int64_t mb = 0; mb < batch; mb += 2) {
      const auto xs = x.slice(0, mb, mb + 2), ts = t.slice(0, mb, mb + 2);
      const auto loss = m.per_sample_loss(m.forward(xs), ts).sum() / batch;
      const auto g = torch::autograd::grad({loss}, params);
      if (summed.empty())
        summed = g;
      else
        for (size_t i = 0; i < g.size(); ++i) summed[i] = summed[i] + g[i];
    }
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::allclose(summed[i], whole[i], 1e-10, 1e-12)) << name << " parameter " << i;
    }
  }
}

TEST(ModelsZoo, BackwardReachesEveryParameter) {
  for (const auto& name : small_models()) {
    auto m = build_model(name, torch::kFloat64, 2);
    const auto loss =
        m.per_sample_loss(m.forward(m.synthetic_input(3, 4)), m.synthetic_target(3, 4));
    loss.mean().backward();
    for (const auto& layer : m.layers) {
      for (const auto& item : layer.impl().named_parameters()) {
        const auto where = name + " " + layer.name + "." + item.key();
        ASSERT_TRUE(item.value().grad().defined()) << where;
        EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0) << where;
      }
    }
  }
}

TEST(ModelsZoo, CloneIsADeepCopy) {
  auto m = build_model("mlp:layers=1,width=8", torch::kFloat32, 3);
  auto c = m.clone();
  EXPECT_TRUE(same_parameters(m, c));
  {
    torch::NoGradGuard no_grad;
    c.parameters().front().add_(1.0);
  }
  EXPECT_FALSE(same_parameters(m, c));
}

TEST(ModelsZoo, ClosedFormCountsMatchBuiltModels) {
  for (const auto& name : small_models()) {
    EXPECT_EQ(parameter_count(name), build_model(name).num_parameters()) << name;
  }
  for (const char* name : {"mlp", "resnet20", "resnet:depth=32", "vit:test", "vit:tiny",
                           "bert:tiny", "gpt2:tiny", "uniform:layers=2,param_kb=3/5"}) {
    EXPECT_EQ(parameter_count(name), build_model(name).num_parameters()) << name;
  }
  const auto m = build_model("bert:tiny");
  EXPECT_THAT(m.describe(), ::testing::HasSubstr("block1.mlp"));
  EXPECT_THAT(m.describe(), ::testing::HasSubstr(std::to_string(m.num_parameters())));
}

void expect_within_one_percent(const std::string& what, double count, double published) {
  EXPECT_NEAR(count / published, 1.0, 0.01) << what << ": " << count << " vs " << published;
}

TEST(ModelsZoo, PaperSizeCountsMatchThePublishedOnes) {
  expect_within_one_percent("BERT-base", parameter_count("bert:base"), 109.48e6);
  expect_within_one_percent("BERT-large", parameter_count("bert:large"), 335e6);
  expect_within_one_percent("ViT-B/16", parameter_count("vit:base"), 86.6e6);
  expect_within_one_percent("ViT-L/16", parameter_count("vit:large"), 304e6);
  expect_within_one_percent("ResNet-20", parameter_count("resnet20"), 0.27e6);
  const std::vector<std::pair<std::string, double>> gpt2 = {
      {"small", 124e6}, {"medium", 355e6}, {"large", 774e6}, {"xl", 1558e6}};
  for (const auto& [preset, published] : gpt2) {
    const auto z = zoo::describe_model("gpt2:" + preset, "test");
    const auto c = zoo::gpt2_config(ModelSpec::parse("gpt2:" + preset, "test"));
    expect_within_one_percent("GPT-2 " + preset, z.unique_parameters(), published);
    EXPECT_EQ(z.tied_params, c.padded_vocab() * c.dim);  // the untied LM head
    EXPECT_EQ(parameter_count("gpt2:" + preset), z.parameters());
  }
}

// ---- one description: the built model is its descriptor, layer for layer --------------------

// Every edge (producer, consumer) of a descriptor (a chain when it lists none).
std::set<std::pair<int, int>> descriptor_edges(const zoo::ZooModel& z) {
  std::set<std::pair<int, int>> out;
  for (const auto& e : z.edges) out.emplace(e.from, e.to);
  if (z.edges.empty()) {
    for (int i = 1; i < z.num_layers(); ++i) out.emplace(i - 1, i);
  }
  return out;
}

void expect_built_as_described(const std::string& name) {
  SCOPED_TRACE(name);
  const zoo::ZooModel z = zoo::describe_model(name, "test");
  const LayeredModel m = build_model(name);
  EXPECT_LT(m.num_parameters() * 4, 100'000'000);  // a test size
  ASSERT_EQ(m.layers.size(), z.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(m.layers[i].name, z.layers[i].name) << "layer " << i;
    EXPECT_EQ(m.layers[i].kind, z.layers[i].kind) << z.layers[i].name;
    EXPECT_EQ(m.layers[i].num_parameters(), z.layers[i].params) << z.layers[i].name;
  }
  const auto edges = m.edges();
  const std::set<std::pair<int, int>> built(edges.begin(), edges.end());
  EXPECT_EQ(built, descriptor_edges(z));
}

TEST(ModelsZoo, EveryPresetIsBuiltAsItsDescriptorSaysLayerForLayer) {
  int presets = 0;
  for (const auto& family : zoo::shared_families()) {
    for (const auto& name : zoo::preset_models(family)) {
      expect_built_as_described(test_size(name));
      ++presets;
    }
  }
  // vit 7, bert 6, gpt2 11, resnet 5 CIFAR + 3 ImageNet, unet, mlp
  EXPECT_EQ(presets, 7 + 6 + 11 + 8 + 1 + 1);
  for (const char* name :
       {"vit:test,layers=3,hidden=64,dropout=0.1", "bert:tiny,layers=1,seq=8,dropout=0.1",
        "gpt2:tiny,layers=3,dim=32,vocab=40,seq=6,ctx=8", "resnet:depth=14,norm=group,image=8",
        "resnet:50,width=4,image=64,classes=3", "unet:B=3,C=4,image=64,norm=group,out=2",
        "mlp:layers=0", "mlp:layers=3,width=16,input=5", "mlp:layers=3,width=16,skip=1"}) {
    expect_built_as_described(name);
  }
}

// One preset table: every name of the core tables (and every name `pipetwin zoo` lists for a
// family both build) builds here, with the descriptor's parameter count; aliases are one config.
TEST(ModelsZoo, BothZoosAcceptTheSamePresetNames) {
  const auto listed = model_presets();
  for (const auto& family : zoo::shared_families()) {
    for (const auto& name : zoo::preset_models(family)) {
      EXPECT_EQ(parameter_count(name), zoo::describe_model(name).parameters()) << name;
      EXPECT_NE(std::find(listed.begin(), listed.end(), name), listed.end()) << name;
    }
  }
  const auto shared = zoo::shared_families();
  for (const auto& name : zoo::zoo_names()) {
    const auto spec = ModelSpec::parse(name, "test");
    const std::string family = zoo::is_resnet_alias(spec.family) ? "resnet" : spec.family;
    if (std::find(shared.begin(), shared.end(), family) == shared.end()) continue;  // t5, ...
    EXPECT_EQ(parameter_count(name), zoo::describe_model(spec).parameters()) << name;
  }
  for (const auto& [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"vit:base", "vit:b16"},
                                                        {"vit:large", "vit:l16"},
                                                        {"gpt2:small", "gpt2:124m"},
                                                        {"gpt2:medium", "gpt2:355m"},
                                                        {"gpt2:large", "gpt2:774m"},
                                                        {"gpt2:xl", "gpt2:1.5b"}}) {
    EXPECT_EQ(parameter_count(a), parameter_count(b)) << a << " = " << b;
    EXPECT_EQ(zoo::describe_model(a).forward_flops(), zoo::describe_model(b).forward_flops());
  }
}

TEST(ModelsZoo, BadNamesAreInputErrors) {
  try {
    build_model("vit:huge");
    FAIL() << "no exception";
  } catch (const InputError& e) {
    EXPECT_THAT(
        e.what(),
        ::testing::HasSubstr(
            "vit: unknown preset \"huge\" (known: test, tiny, small, base, b16, large, l16)"));
  }
  EXPECT_THROW(build_model("alexnet"), InputError);
  EXPECT_THROW(build_model("vit:tiny,colour=3"), InputError);
  EXPECT_THROW(build_model("vit:tiny,dim=100"), InputError);   // not a multiple of 3 heads
  EXPECT_THROW(build_model("vit:tiny,image=30"), InputError);  // not a multiple of patch 4
  EXPECT_THROW(build_model("bert:tiny,seq=600"), InputError);
  EXPECT_THROW(build_model("gpt2:tiny,dropout=1"), InputError);
  EXPECT_THROW(build_model("resnet:depth=21"), InputError);
  EXPECT_THROW(build_model("resnet20,norm=layer"), InputError);
  EXPECT_THROW(build_model("mlp:layers=-1"), InputError);
  EXPECT_THROW(build_model("uniform:layers=0"), InputError);
  EXPECT_THROW(build_model("mlp", torch::kHalf), InputError);
}

}  // namespace
}  // namespace pipetwin::models
