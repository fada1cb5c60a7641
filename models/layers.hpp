// Building blocks of the models in models/: parameter creation, linear / norm / conv modules,
// keyed dropout, and the two Transformer sub-layers (attention, MLP) that ViT, BERT and GPT-2
// share. Every linear layer of models/ is a LinearImpl, whose forward is models::linear: a split
// backward can defer its weight half (split_linear.hpp).
//
// Parameters. A ParamFactory creates every parameter of a model from one local at::Generator, in
// build order, so a model is a pure function of (name, dtype, seed) and the global generator is
// never touched (zoo.hpp). Modules get their parameters from the factory (or as ready tensors) when
// they are constructed, so nothing is initialised twice.
//
// Dropout. LibTorch's dropout draws from the global generator, which all threads share, so a
// pipeline's masks would depend on thread timing and a recomputed forward (checkpointing) would
// not see the forward's mask. pipetwin's dropout instead derives its mask from a counter-based
// hash of (key, site, element index), computed with tensor ops on the tensor's own device:
//   - site: a number fixed at build time, one per dropout in the model (ParamFactory::next_site);
//   - key: set by the caller for the current thread with a DropoutKey scope. An executor opens
//     `DropoutKey k(hash(iteration, micro_batch))` around a micro-batch's forward and opens the
//     same key again around its recompute, and gets the same masks; since masks depend on the
//     site, not on which stage runs the layer, any partition sees the masks a single process
//     running the same micro-batches under the same keys sees.
// Outside any DropoutKey scope the key is drawn from a per-thread counter (fresh masks on every
// call, deterministic per thread, not reproducible across partitions). With p = 0, or in eval
// mode, dropout is the identity and a layer's forward is a pure function of input and weights.
// Each site is used once per forward; reusing a module twice in one forward would repeat a mask.
//
// Transformer sub-layers (PipeTransformer Algorithm 1 line 7 treats them as separate layers):
//   pre-norm  (ViT, GPT-2):  x + Dropout(Attn(LN(x)))     x + Dropout(MLP(LN(x)))
//   post-norm (BERT):        LN(x + Dropout(Attn(x)))     LN(x + Dropout(MLP(x)))
// Attention has a fused q/k/v projection (same parameter count as separate ones) and an output
// projection; GPT-2 masks it causally. The MLP is Linear(d, mlp) - GELU - Linear(mlp, d), GELU
// exact (ViT, BERT) or tanh-approximated (GPT-2).
//
// Thread-safety: modules follow LayeredModel's rule (layered_model.hpp); a ParamFactory belongs
// to one thread; DropoutKey scopes are per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

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

// 64-bit mixing function (SplitMix64's finaliser); used for keys and seeds.
uint64_t mix64(uint64_t x);

// ---- dropout -------------------------------------------------------------------------------

// Sets the calling thread's dropout key until destroyed (scopes nest).
class DropoutKey {
 public:
  explicit DropoutKey(uint64_t key);
  ~DropoutKey();
  DropoutKey(const DropoutKey&) = delete;
  DropoutKey& operator=(const DropoutKey&) = delete;

 private:
  bool saved_scoped_;
  uint64_t saved_key_;
};

// The key of one micro-batch of one data-parallel replica in a run seeded with `seed`: what the
// executor's stages and the reference trainer open around its forward and its recompute.
uint64_t micro_batch_dropout_key(uint64_t seed, int replica, int micro_batch);

// Zeroes each element with probability p (mask from (key, site, index)) and scales the rest by
// 1 / (1 - p); the identity when !training or p == 0.
torch::Tensor keyed_dropout(const torch::Tensor& x, double p, uint64_t site, bool training);

class DropoutImpl : public torch::nn::Module {
 public:
  DropoutImpl(double p, uint64_t site) : p_(p), site_(site) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return keyed_dropout(x, p_, site_, is_training());
  }
  double p() const { return p_; }

 private:
  double p_;
  uint64_t site_;
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
