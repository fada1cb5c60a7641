#include "models/vit.hpp"

#include <cmath>

#include <fmt/format.h>

#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

namespace {

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-6;

int64_t num_patches(const VitConfig& c) {
  return (c.image / c.patch) * (c.image / c.patch);
}

TransformerStyle vit_style(const VitConfig& c) {
  TransformerStyle s;
  s.dim = c.dim;
  s.heads = c.heads;
  s.mlp_dim = c.mlp;
  s.pre_norm = true;
  s.eps = kLayerNormEps;
  s.dropout = c.dropout;
  s.init_std = s.proj_std = kInitStd;
  return s;
}

class VitEmbedImpl : public torch::nn::Module {
 public:
  VitEmbedImpl(ParamFactory& f, const VitConfig& c) : patch_(c.patch) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(c.channels * c.patch * c.patch));
    weight_ =
        register_parameter("patch_weight", f.uniform({c.dim, c.channels, c.patch, c.patch}, bound));
    bias_ = register_parameter("patch_bias", f.uniform({c.dim}, bound));
    cls_ = register_parameter("cls_token", f.zeros({1, 1, c.dim}));
    pos_ = register_parameter("pos_embed", f.normal({1, num_patches(c) + 1, c.dim}, kInitStd));
    dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(c.dropout, f.next_site()));
  }

  torch::Tensor forward(const torch::Tensor& images) {
    auto x = at::conv2d(images, weight_, bias_, patch_).flatten(2).transpose(1, 2);  // [b, n, d]
    x = at::cat({cls_.expand({x.size(0), 1, x.size(2)}), x}, 1) + pos_;
    return dropout_->forward(x);
  }

 private:
  int64_t patch_;
  torch::Tensor weight_, bias_, cls_, pos_;
  std::shared_ptr<DropoutImpl> dropout_;
};

class VitHeadImpl : public torch::nn::Module {
 public:
  VitHeadImpl(ParamFactory& f, const VitConfig& c) {
    norm_ = register_module("norm", std::make_shared<LayerNormImpl>(f, c.dim, kLayerNormEps));
    fc_ = register_module("fc", normal_linear(f, c.dim, c.classes, kInitStd));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc_->forward(norm_->forward(x.select(1, 0)));
  }

 private:
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<LinearImpl> fc_;
};

const std::vector<Preset<VitConfig>>& vit_presets() {
  // {depth, dim, heads, mlp, image, patch, channels, classes, dropout}
  static const std::vector<Preset<VitConfig>> presets = {
      {"test", {2, 32, 2, 128, 32, 4, 3, 10, 0.0}},
      {"tiny", {12, 192, 3, 768, 32, 4, 3, 10, 0.0}},
      {"small", {12, 384, 6, 1536, 32, 4, 3, 10, 0.0}},
      {"base", {12, 768, 12, 3072, 224, 16, 3, 1000, 0.1}},
      {"large", {24, 1024, 16, 4096, 224, 16, 3, 1000, 0.1}},
  };
  return presets;
}

}  // namespace

VitConfig vit_config(const ModelSpec& spec) {
  spec.allow_only(
      {"image", "patch", "channels", "classes", "depth", "dim", "heads", "mlp", "dropout"});
  VitConfig c = choose_preset(spec, vit_presets(), "tiny");
  c.depth = int_option(spec, "depth", c.depth);
  c.dim = int_option(spec, "dim", c.dim);
  c.heads = int_option(spec, "heads", c.heads);
  c.mlp = int_option(spec, "mlp", 4 * c.dim);  // all presets use MLP 4 * dim
  c.image = int_option(spec, "image", c.image);
  c.patch = int_option(spec, "patch", c.patch);
  c.channels = int_option(spec, "channels", c.channels);
  c.classes = int_option(spec, "classes", c.classes);
  c.dropout = dropout_option(spec, c.dropout);
  require_multiple(spec, "dim", c.dim, "heads", c.heads);
  require_multiple(spec, "image", c.image, "patch", c.patch);
  return c;
}

int64_t parameter_count(const VitConfig& c) {
  const auto s = vit_style(c);
  const int64_t embed =
      c.dim * c.channels * c.patch * c.patch + c.dim + c.dim + (num_patches(c) + 1) * c.dim;
  const int64_t head = 2 * c.dim + c.dim * c.classes + c.classes;
  return embed + c.depth * (attention_parameters(s) + mlp_parameters(s)) + head;
}

LayeredModel build_vit(const VitConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const auto style = vit_style(c);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.channels, c.image, c.image};
  m.sample.classes = c.classes;
  m.layers.push_back(
      {"embed", "embedding", torch::nn::AnyModule(std::make_shared<VitEmbedImpl>(f, c))});
  for (int64_t i = 0; i < c.depth; ++i) {
    m.layers.push_back({fmt::format("block{}.attn", i), "attention",
                        torch::nn::AnyModule(std::make_shared<AttentionImpl>(f, style))});
    m.layers.push_back({fmt::format("block{}.mlp", i), "mlp",
                        torch::nn::AnyModule(std::make_shared<MlpImpl>(f, style))});
  }
  m.layers.push_back({"head", "head", torch::nn::AnyModule(std::make_shared<VitHeadImpl>(f, c))});
  return m;
}

}  // namespace pipetwin::models
