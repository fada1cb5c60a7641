#include "models/layers.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>

#include "models/torch_compat.hpp"

namespace pipetwin::models {

// ---- ParamFactory ---------------------------------------------------------------------------

ParamFactory::ParamFactory(torch::Dtype dtype, uint64_t seed)
    : options_(torch::TensorOptions().dtype(dtype)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

torch::Tensor ParamFactory::normal(at::IntArrayRef shape, double std) {
  return at::empty(shape, options_).normal_(0.0, std, generator_);
}

torch::Tensor ParamFactory::uniform(at::IntArrayRef shape, double bound) {
  return at::empty(shape, options_).uniform_(-bound, bound, generator_);
}

torch::Tensor ParamFactory::zeros(at::IntArrayRef shape) const {
  return at::zeros(shape, options_);
}
torch::Tensor ParamFactory::ones(at::IntArrayRef shape) const {
  return at::ones(shape, options_);
}

// ---- linear, norms, convolution -------------------------------------------------------------

LinearImpl::LinearImpl(torch::Tensor weight, torch::Tensor bias) {
  weight_ = register_parameter("weight", std::move(weight));
  if (bias.defined()) bias_ = register_parameter("bias", std::move(bias));
}

std::shared_ptr<LinearImpl> normal_linear(ParamFactory& f, int64_t in, int64_t out, double std,
                                          bool bias) {
  auto w = f.normal({out, in}, std);
  return std::make_shared<LinearImpl>(std::move(w), bias ? f.zeros({out}) : torch::Tensor());
}

std::shared_ptr<LinearImpl> default_linear(ParamFactory& f, int64_t in, int64_t out) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  auto w = f.uniform({out, in}, bound);
  auto b = f.uniform({out}, bound);
  return std::make_shared<LinearImpl>(std::move(w), std::move(b));
}

LayerNormImpl::LayerNormImpl(ParamFactory& f, int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight_ = register_parameter("weight", f.ones({dim}));
  bias_ = register_parameter("bias", f.zeros({dim}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) {
  return at::layer_norm(x, {dim_}, weight_, bias_, eps_);
}

Norm2dImpl::Norm2dImpl(ParamFactory& f, int64_t channels, bool group_norm, int64_t groups)
    : group_norm_(group_norm), groups_(groups) {
  weight_ = register_parameter("weight", f.ones({channels}));
  bias_ = register_parameter("bias", f.zeros({channels}));
  if (!group_norm_) {
    running_mean_ = register_buffer("running_mean", f.zeros({channels}));
    running_var_ = register_buffer("running_var", f.ones({channels}));
  }
}

torch::Tensor Norm2dImpl::forward(const torch::Tensor& x) {
  constexpr double kEps = 1e-5;
  constexpr double kMomentum = 0.1;
  if (group_norm_) return at::group_norm(x, groups_, weight_, bias_, kEps, true);
  return at::batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), kMomentum,
                        kEps, true);
}

Conv2dImpl::Conv2dImpl(ParamFactory& f, int64_t in, int64_t out, int64_t kernel, int64_t stride,
                       int64_t padding)
    : stride_(stride), padding_(padding) {
  const double std = std::sqrt(2.0 / static_cast<double>(in * kernel * kernel));
  weight_ = register_parameter("weight", f.normal({out, in, kernel, kernel}, std));
}

torch::Tensor Conv2dImpl::forward(const torch::Tensor& x) {
  return at::conv2d(x, weight_, {}, stride_, padding_);
}

// ---- Transformer sub-layers -----------------------------------------------------------------

AttentionImpl::AttentionImpl(ParamFactory& f, const TransformerStyle& style) : style_(style) {
  norm_ = register_module("norm", std::make_shared<LayerNormImpl>(f, style.dim, style.eps));
  qkv_ = register_module("qkv", normal_linear(f, style.dim, 3 * style.dim, style.init_std));
  proj_ = register_module("proj", normal_linear(f, style.dim, style.dim, style.proj_std));
  prob_dropout_ =
      register_module("prob_dropout", std::make_shared<DropoutImpl>(style.dropout, f.next_site()));
  out_dropout_ =
      register_module("out_dropout", std::make_shared<DropoutImpl>(style.dropout, f.next_site()));
}

torch::Tensor AttentionImpl::attend(const torch::Tensor& qkv) {
  const int64_t b = qkv.size(0), s = qkv.size(1), heads = style_.heads;
  const int64_t head_dim = style_.dim / heads;
  const auto parts = qkv.view({b, s, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  const auto q = parts[0], k = parts[1], v = parts[2];  // [b, heads, s, head_dim]
  const bool prob_dropout = is_training() && style_.dropout > 0;
  torch::Tensor out;
  if (kHasFusedAttention && !prob_dropout) {
    out = fused_attention(q, k, v, 0.0, style_.causal);
  } else if (kHasFusedAttention && !qkv.device().is_cpu()) {
    // The kernel's own dropout, from the device generator seeded for the probabilities' site.
    out = with_site_generator(qkv.device(), prob_dropout_->site(), [&] {
      return fused_attention(q, k, v, style_.dropout, style_.causal);
    });
  } else {
    auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
    if (style_.causal) {
      const auto future = at::ones({s, s}, qkv.options().dtype(at::kBool)).triu(1);
      scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    }
    out = at::matmul(prob_dropout_->forward(at::softmax(scores, -1)), v);
  }
  return out.transpose(1, 2).reshape({b, s, style_.dim});
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const auto h = style_.pre_norm ? norm_->forward(x) : x;
  const auto a = out_dropout_->forward(proj_->forward(attend(qkv_->forward(h))));
  return style_.pre_norm ? x + a : norm_->forward(x + a);
}

MlpImpl::MlpImpl(ParamFactory& f, const TransformerStyle& style) : style_(style) {
  norm_ = register_module("norm", std::make_shared<LayerNormImpl>(f, style.dim, style.eps));
  fc1_ = register_module("fc1", normal_linear(f, style.dim, style.mlp_dim, style.init_std));
  fc2_ = register_module("fc2", normal_linear(f, style.mlp_dim, style.dim, style.proj_std));
  out_dropout_ =
      register_module("out_dropout", std::make_shared<DropoutImpl>(style.dropout, f.next_site()));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  const auto h = style_.pre_norm ? norm_->forward(x) : x;
  const auto hidden = at::gelu(fc1_->forward(h), style_.tanh_gelu ? "tanh" : "none");
  const auto y = out_dropout_->forward(fc2_->forward(hidden));
  return style_.pre_norm ? x + y : norm_->forward(x + y);
}

std::vector<Layer> transformer_layers(const zoo::ZooModel& description, ParamFactory& f,
                                      const TransformerStyle& style,
                                      const std::function<torch::nn::AnyModule()>& embed,
                                      const std::function<torch::nn::AnyModule()>& head) {
  return layers_of(description, [&](const zoo::ZooLayer& l, size_t) {
    if (l.kind == "embedding") return embed();
    if (l.kind == "attention")
      return torch::nn::AnyModule(std::make_shared<AttentionImpl>(f, style));
    if (l.kind == "mlp") return torch::nn::AnyModule(std::make_shared<MlpImpl>(f, style));
    if (l.kind == "head") return head();
    throw std::logic_error("transformer_layers: no module for layer kind " + l.kind);
  });
}

}  // namespace pipetwin::models
