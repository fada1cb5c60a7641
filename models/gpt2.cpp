#include "models/gpt2.hpp"

#include <cmath>

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::Gpt2Config;

namespace {

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-5;

}  // namespace

TransformerStyle gpt2_style(const Gpt2Config& c) {
  TransformerStyle s;
  s.dim = c.dim;
  s.heads = c.heads;
  s.mlp_dim = 4 * c.dim;
  s.pre_norm = true;
  s.causal = true;
  s.tanh_gelu = true;
  s.eps = kLayerNormEps;
  s.dropout = c.dropout;
  s.init_std = kInitStd;
  s.proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(c.layers));
  return s;
}

namespace {

class Gpt2EmbedImpl : public torch::nn::Module {
 public:
  Gpt2EmbedImpl(ParamFactory& f, const Gpt2Config& c) {
    wte_ = register_parameter("wte", f.normal({c.padded_vocab(), c.dim}, kInitStd));
    wpe_ = register_parameter("wpe", f.normal({c.ctx, c.dim}, kInitStd));
    dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(c.dropout, f.next_site()));
  }

  torch::Tensor forward(const torch::Tensor& ids) {
    TORCH_CHECK(ids.size(1) <= wpe_.size(0), "gpt2: sequence of ", ids.size(1),
                " tokens exceeds the context of ", wpe_.size(0));
    return dropout_->forward(at::embedding(wte_, ids) + wpe_.slice(0, 0, ids.size(1)));
  }

 private:
  torch::Tensor wte_, wpe_;
  std::shared_ptr<DropoutImpl> dropout_;
};

class Gpt2HeadImpl : public torch::nn::Module {
 public:
  Gpt2HeadImpl(ParamFactory& f, const Gpt2Config& c) {
    norm_ = register_module("ln_f", std::make_shared<LayerNormImpl>(f, c.dim, kLayerNormEps));
    lm_head_ =
        register_module("lm_head", normal_linear(f, c.dim, c.padded_vocab(), kInitStd, false));
  }
  torch::Tensor forward(const torch::Tensor& x) { return lm_head_->forward(norm_->forward(x)); }

 private:
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<LinearImpl> lm_head_;
};

}  // namespace

LayeredModel build_gpt2(const Gpt2Config& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const auto style = gpt2_style(c);
  LayeredModel m;
  m.task = Task::kLanguageModel;
  m.sample.input_shape = {c.seq};
  m.sample.token_input = true;
  m.sample.vocab = c.vocab;  // token ids and targets: the padded rows are never drawn
  m.sample.target_shape = {c.seq};
  m.layers = transformer_layers(
      zoo::describe_gpt2(c), f, style,
      [&] { return torch::nn::AnyModule(std::make_shared<Gpt2EmbedImpl>(f, c)); },
      [&] { return torch::nn::AnyModule(std::make_shared<Gpt2HeadImpl>(f, c)); });
  return m;
}

}  // namespace pipetwin::models
