// Building blocks of the models in models/: parameter creation, linear / norm / conv modules,
// keyed dropout's module (dropout.hpp), and the two Transformer sub-layers (attention, MLP) that
// ViT, BERT and GPT-2 share. Every linear layer of models/ is a LinearImpl, whose forward is
// models::linear: a split backward can defer its weight half (split_linear.hpp).
//
// Parameters. A ParamFactory creates every parameter of a model from one local at::Generator, in
// build order, so a model is a pure function of (name, dtype, seed) and the global generator is
// never touched (zoo.hpp). Modules get their parameters from the factory (or as ready tensors) when
// they are constructed, so nothing is initialised twice.
//
// Dropout: keyed dropout (dropout.hpp), one site per dropout module, numbered in build order.
//
// Transformer sub-layers (PipeTransformer Algorithm 1 line 7 treats them as separate layers):
//   pre-norm  (ViT, GPT-2):  x + Dropout(Attn(LN(x)))     x + Dropout(MLP(LN(x)))
//   post-norm (BERT):        LN(x + Dropout(Attn(x)))     LN(x + Dropout(MLP(x)))
// Attention has a fused q/k/v projection (same parameter count as separate ones) and an output
// projection; GPT-2 masks it causally. Where LibTorch has a fused attention kernel (2.x,
// torch_compat.hpp) it runs there, its internal dropout on the attention probabilities drawn as
// keyed dropout's GPU masks are (dropout.hpp's with_site_generator, the probabilities' site); on
// LibTorch 1.13, and on a CPU while attention dropout is active, it is the textbook
// softmax(Q K^T / sqrt(d)) V with keyed dropout on the probabilities. The MLP is Linear(d, mlp) -
// GELU - Linear(mlp, d), GELU exact (ViT, BERT) or tanh-approximated (GPT-2).
//
// Thread-safety: modules follow LayeredModel's rule (layered_model.hpp); a ParamFactory belongs
// to one thread; dropout follows dropout.hpp's rule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "models/dropout.hpp"
#include "models/layered_model.hpp"
#include "models/split_linear.hpp"

namespace pipetwin::models {

// Creates parameters in build order from one generator seeded with `seed`.
class ParamFactory {
 public:
  ParamFactory(torch::Dtype dtype, uint64_t seed);
  torch::Tensor normal(at::IntArrayRef shape, double std);
  torch::Tensor uniform(at::IntArrayRef shape, double bound);  // U(-bound, bound)
  torch::Tensor zeros(at::IntArrayRef shape) const;
  torch::Tensor ones(at::IntArrayRef shape) const;
  uint64_t next_site() { return next_site_++; }  // dropout site ids, in build order
  const torch::TensorOptions& options() const { return options_; }

 private:
  torch::TensorOptions options_;
  at::Generator generator_;
  uint64_t next_site_ = 0;
};

// ---- linear, norms, convolution ------------------------------------------------------------

class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(torch::Tensor weight, torch::Tensor bias);  // weight [out, in]; bias [out] or {}
  // Through models::linear, so a split backward can defer its weight half (split_linear.hpp).
  torch::Tensor forward(const torch::Tensor& x) { return models::linear(x, weight_, bias_); }

 private:
  torch::Tensor weight_, bias_;
};
// N(0, std) weights and zero biases (BERT, GPT-2, ViT).
std::shared_ptr<LinearImpl> normal_linear(ParamFactory& f, int64_t in, int64_t out, double std,
                                          bool bias = true);
// PyTorch's nn.Linear default: weights and biases U(-1/sqrt(in), 1/sqrt(in)).
std::shared_ptr<LinearImpl> default_linear(ParamFactory& f, int64_t in, int64_t out);

class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(ParamFactory& f, int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_, bias_;
  int64_t dim_;
  double eps_;
};

// BatchNorm2d (running statistics as buffers) or GroupNorm; affine weight 1, bias 0.
class Norm2dImpl : public torch::nn::Module {
 public:
  Norm2dImpl(ParamFactory& f, int64_t channels, bool group_norm, int64_t groups);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_, bias_, running_mean_, running_var_;
  bool group_norm_;
  int64_t groups_;
};

// Bias-free 2-D convolution with He (fan-in, ReLU gain) normal weights.
class Conv2dImpl : public torch::nn::Module {
 public:
  Conv2dImpl(ParamFactory& f, int64_t in, int64_t out, int64_t kernel, int64_t stride,
             int64_t padding);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_;
  int64_t stride_, padding_;
};

// ---- Transformer sub-layers ----------------------------------------------------------------

struct TransformerStyle {
  int64_t dim = 0, heads = 0, mlp_dim = 0;
  bool pre_norm = true;    // false: BERT's post-norm
  bool causal = false;     // GPT-2
  bool tanh_gelu = false;  // GPT-2's approximate GELU
  double eps = 1e-5;       // LayerNorm epsilon
  double dropout = 0;      // on attention probabilities and on each sub-layer's output
  double init_std = 0.02;  // N(0, init_std) weights, zero biases
  double proj_std = 0.02;  // output projections (GPT-2: 0.02 / sqrt(2 * layers))
};

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(ParamFactory& f, const TransformerStyle& style);
  torch::Tensor forward(const torch::Tensor& x);  // [b, seq, dim] -> [b, seq, dim]

 private:
  torch::Tensor attend(const torch::Tensor& qkv);

  TransformerStyle style_;
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<LinearImpl> qkv_, proj_;
  std::shared_ptr<DropoutImpl> prob_dropout_, out_dropout_;
};

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(ParamFactory& f, const TransformerStyle& style);
  torch::Tensor forward(const torch::Tensor& x);  // [b, seq, dim] -> [b, seq, dim]

 private:
  TransformerStyle style_;
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<LinearImpl> fc1_, fc2_;
  std::shared_ptr<DropoutImpl> out_dropout_;
};

// The layers of a Transformer description (ViT, BERT, GPT-2; layers_of in layered_model.hpp):
// "embedding" and "head" are the family's modules, made by `embed` and `head`; "attention" and
// "mlp" are AttentionImpl and MlpImpl of `style`, their parameters drawn from `f`.
std::vector<Layer> transformer_layers(const zoo::ZooModel& description, ParamFactory& f,
                                      const TransformerStyle& style,
                                      const std::function<torch::nn::AnyModule()>& embed,
                                      const std::function<torch::nn::AnyModule()>& head);

}  // namespace pipetwin::models
