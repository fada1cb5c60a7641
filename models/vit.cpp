#include "models/vit.hpp"

#include <cmath>

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::VitConfig;

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

}  // namespace

LayeredModel build_vit(const VitConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.channels, c.image, c.image};
  m.sample.classes = c.classes;
  m.layers = transformer_layers(
      zoo::describe_vit(c), f, vit_style(c),
      [&] { return torch::nn::AnyModule(std::make_shared<VitEmbedImpl>(f, c)); },
      [&] { return torch::nn::AnyModule(std::make_shared<VitHeadImpl>(f, c)); });
  return m;
}

}  // namespace pipetwin::models
