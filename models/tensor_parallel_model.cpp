#include "models/tensor_parallel_model.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/nn/module.h>

#include "core/error.hpp"
#include "models/bert.hpp"
#include "models/dropout.hpp"
#include "models/gpt2.hpp"
#include "models/layers.hpp"
#include "models/split_linear.hpp"
#include "models/torch_compat.hpp"
#include "profiles/model_spec.hpp"
#include "profiles/zoo/configs.hpp"

namespace pipetwin::models {

namespace {

std::string family_of(const LayeredModel& m) {
  return ModelSpec::parse(m.name, "model").family;
}

// How a shard moves tensors in and out of its tensor-parallel regions (tensor_parallel.hpp).
struct Region {
  std::shared_ptr<TpComm> comm;
  bool sp = false;  // sequence parallelism
  int rank() const { return comm->rank(); }
  int size() const { return comm->size(); }
  // Before a column-parallel linear: f, or the all-gather of the sequence.
  at::Tensor enter(const at::Tensor& x) const {
    return sp ? gather_from_sequence(x, *comm) : copy_to_tp(x, *comm);
  }
  // After a row-parallel linear: g, or the reduce-scatter to the sequence.
  at::Tensor exit(const at::Tensor& y) const {
    return sp ? reduce_scatter_to_sequence(y, *comm) : reduce_from_tp(y, *comm);
  }
  // A replicated parameter used on sequence shards: its gradient parts summed over the group.
  at::Tensor rep(const at::Tensor& p) const { return sp ? copy_to_tp(p, *comm) : p; }
  // Dropout between the regions: the whole tensor's mask, sliced on a sequence shard.
  at::Tensor dropout(const at::Tensor& x, double p, uint64_t site, bool training) const {
    if (!sp) return keyed_dropout(x, p, site, training);
    std::vector<int64_t> full = x.sizes().vec();
    full[1] *= size();
    return sliced_dropout(x, p, site, training, full, 1, rank() * x.size(1));
  }
};

at::Tensor param(const torch::nn::Module& m, const std::string& name) {
  return m.named_parameters()[name].detach().clone();
}

uint64_t site(const torch::nn::Module& m, const std::string& child) {
  auto d = std::dynamic_pointer_cast<DropoutImpl>(m.named_children()[child]);
  if (!d) throw std::logic_error("tensor_parallel_model: " + child + " is not a dropout");
  return d->site();
}

// Rows [r n/t, (r+1) n/t) of each of the `parts` equal blocks of dimension 0 (q, k and v of a
// fused projection), concatenated.
at::Tensor shard_blocks(const at::Tensor& full, int parts, int rank, int size,
                        const std::string& field) {
  std::vector<at::Tensor> out;
  for (const auto& block : full.chunk(parts, 0))
    out.push_back(shard_of(block, 0, rank, size, field));
  return at::cat(out, 0);
}

class TpNormImpl : public torch::nn::Module {
 public:
  TpNormImpl(const torch::nn::Module& full, const std::string& prefix, double eps) : eps_(eps) {
    weight_ = register_parameter("weight", param(full, prefix + ".weight"));
    bias_ = register_parameter("bias", param(full, prefix + ".bias"));
  }
  at::Tensor forward(const at::Tensor& x, const Region& r) {
    return at::layer_norm(x, {weight_.size(0)}, r.rep(weight_), r.rep(bias_), eps_);
  }

 private:
  at::Tensor weight_, bias_;
  double eps_;
};

// A row-parallel linear: the input features' columns of the weight, the bias after the reduction.
class RowLinearImpl : public torch::nn::Module {
 public:
  RowLinearImpl(const torch::nn::Module& full, const std::string& prefix, const Region& r,
                const std::string& field) {
    weight_ = register_parameter(
        "weight", shard_of(param(full, prefix + ".weight"), 1, r.rank(), r.size(), field));
    bias_ = register_parameter("bias", param(full, prefix + ".bias"));
  }
  at::Tensor forward(const at::Tensor& x, const Region& r) {
    return r.exit(models::linear(x, weight_, {})) + r.rep(bias_);
  }

 private:
  at::Tensor weight_, bias_;
};

// A column-parallel linear: the output features' rows of weight and bias.
std::shared_ptr<LinearImpl> column_linear(const torch::nn::Module& full, const std::string& prefix,
                                          int blocks, const Region& r, const std::string& field) {
  auto w = shard_blocks(param(full, prefix + ".weight"), blocks, r.rank(), r.size(), field);
  auto b = shard_blocks(param(full, prefix + ".bias"), blocks, r.rank(), r.size(), field);
  return std::make_shared<LinearImpl>(std::move(w), std::move(b));
}

class TpAttentionImpl : public torch::nn::Module {
 public:
  TpAttentionImpl(const torch::nn::Module& full, const TransformerStyle& style, Region r)
      : style_(style), r_(std::move(r)) {
    norm_ = register_module("norm", std::make_shared<TpNormImpl>(full, "norm", style.eps));
    qkv_ = register_module("qkv", column_linear(full, "qkv", 3, r_, "heads"));
    proj_ = register_module("proj", std::make_shared<RowLinearImpl>(full, "proj", r_, "heads"));
    prob_site_ = site(full, "prob_dropout");
    out_site_ = site(full, "out_dropout");
  }
  at::Tensor forward(const at::Tensor& x) {
    const auto h = style_.pre_norm ? norm_->forward(x, r_) : x;
    const auto a = proj_->forward(attend(qkv_->forward(r_.enter(h))), r_);
    const auto y = r_.dropout(a, style_.dropout, out_site_, is_training());
    return style_.pre_norm ? x + y : norm_->forward(x + y, r_);
  }

 private:
  // layers.cpp's AttentionImpl::attend over this rank's heads.
  at::Tensor attend(const at::Tensor& qkv) {
    const int64_t b = qkv.size(0), s = qkv.size(1), heads = style_.heads / r_.size();
    const int64_t head_dim = style_.dim / style_.heads;
    const auto parts = qkv.view({b, s, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
    const auto q = parts[0], k = parts[1], v = parts[2];
    const bool prob_dropout = is_training() && style_.dropout > 0;
    at::Tensor out;
    if (kHasFusedAttention && !prob_dropout) {
      out = fused_attention(q, k, v, 0.0, style_.causal);
    } else {
      auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));
      if (style_.causal) {
        const auto future = at::ones({s, s}, qkv.options().dtype(at::kBool)).triu(1);
        scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
      }
      // The mask of all heads, this rank's sliced (the fused kernel's dropout could not be).
      const auto probs =
          sliced_dropout(at::softmax(scores, -1), style_.dropout, prob_site_, is_training(),
                         {b, style_.heads, s, s}, 1, r_.rank() * heads);
      out = at::matmul(probs, v);
    }
    return out.transpose(1, 2).reshape({b, s, heads * head_dim});
  }

  TransformerStyle style_;
  Region r_;
  std::shared_ptr<TpNormImpl> norm_;
  std::shared_ptr<LinearImpl> qkv_;
  std::shared_ptr<RowLinearImpl> proj_;
  uint64_t prob_site_ = 0, out_site_ = 0;
};

class TpMlpImpl : public torch::nn::Module {
 public:
  TpMlpImpl(const torch::nn::Module& full, const TransformerStyle& style, Region r)
      : style_(style), r_(std::move(r)) {
    norm_ = register_module("norm", std::make_shared<TpNormImpl>(full, "norm", style.eps));
    fc1_ = register_module("fc1", column_linear(full, "fc1", 1, r_, "mlp width"));
    fc2_ = register_module("fc2", std::make_shared<RowLinearImpl>(full, "fc2", r_, "mlp width"));
    out_site_ = site(full, "out_dropout");
  }
  at::Tensor forward(const at::Tensor& x) {
    const auto h = style_.pre_norm ? norm_->forward(x, r_) : x;
    const auto hidden = at::gelu(fc1_->forward(r_.enter(h)), style_.tanh_gelu ? "tanh" : "none");
    const auto y = r_.dropout(fc2_->forward(hidden, r_), style_.dropout, out_site_, is_training());
    return style_.pre_norm ? x + y : norm_->forward(x + y, r_);
  }

 private:
  TransformerStyle style_;
  Region r_;
  std::shared_ptr<TpNormImpl> norm_;
  std::shared_ptr<LinearImpl> fc1_;
  std::shared_ptr<RowLinearImpl> fc2_;
  uint64_t out_site_ = 0;
};

// The embedding of either family: a vocabulary-parallel token table plus replicated position (and
// token-type) tables; BERT adds a LayerNorm.
class TpEmbedImpl : public torch::nn::Module {
 public:
  TpEmbedImpl(const torch::nn::Module& full, bool bert, const TransformerStyle& style, Region r)
      : bert_(bert), dropout_(style.dropout), r_(std::move(r)) {
    const std::string word = bert ? "word_embeddings" : "wte";
    word_ = register_parameter(word,
                               shard_of(param(full, word), 0, r_.rank(), r_.size(), "vocab rows"));
    position_ = register_parameter(bert ? "position_embeddings" : "wpe",
                                   param(full, bert ? "position_embeddings" : "wpe"));
    if (bert) {
      type_ = register_parameter("token_type_embeddings", param(full, "token_type_embeddings"));
      norm_ = register_module("norm", std::make_shared<TpNormImpl>(full, "norm", style.eps));
    }
    site_ = site(full, "dropout");
  }
  at::Tensor forward(const at::Tensor& ids) {
    const int64_t s = ids.size(1);
    TORCH_CHECK(s <= position_.size(0), "embed: sequence of ", s, " tokens exceeds the ",
                position_.size(0), " positions");
    const auto partial = vocab_parallel_embedding(word_, ids, r_.rank() * word_.size(0));
    auto x =
        r_.sp ? reduce_scatter_to_sequence(partial, *r_.comm) : reduce_from_tp(partial, *r_.comm);
    const int64_t first = r_.sp ? r_.rank() * x.size(1) : 0;
    x = x + r_.rep(position_).slice(0, first, first + x.size(1));
    if (bert_) x = norm_->forward(x + r_.rep(type_)[0], r_);
    return r_.dropout(x, dropout_, site_, is_training());
  }

 private:
  bool bert_;
  double dropout_;
  Region r_;
  at::Tensor word_, position_, type_;
  std::shared_ptr<TpNormImpl> norm_;
  uint64_t site_ = 0;
};

// GPT-2's head: ln_f, then the LM head split over the (padded) vocabulary's rows.
class TpLmHeadImpl : public torch::nn::Module {
 public:
  TpLmHeadImpl(const torch::nn::Module& full, double eps, Region r) : r_(std::move(r)) {
    norm_ = register_module("ln_f", std::make_shared<TpNormImpl>(full, "ln_f", eps));
    weight_ = register_parameter(
        "lm_head", shard_of(param(full, "lm_head.weight"), 0, r_.rank(), r_.size(), "vocab rows"));
  }
  at::Tensor forward(const at::Tensor& x) {
    return models::linear(r_.enter(norm_->forward(x, r_)), weight_, {});
  }

 private:
  Region r_;
  std::shared_ptr<TpNormImpl> norm_;
  at::Tensor weight_;
};

// BERT's head, replicated (the full model's module itself); with sequence parallelism it first
// gathers the whole sequence.
class TpReplicatedHeadImpl : public torch::nn::Module {
 public:
  TpReplicatedHeadImpl(torch::nn::AnyModule head, Region r)
      : head_(std::move(head)), r_(std::move(r)) {
    register_module("head", head_.ptr());
  }
  at::Tensor forward(const at::Tensor& x) {
    return head_.forward(r_.sp ? gather_replicated(x, *r_.comm) : x);
  }

 private:
  torch::nn::AnyModule head_;
  Region r_;
};

TransformerStyle style_of(const LayeredModel& m) {
  const auto spec = ModelSpec::parse(m.name, "model");
  return spec.family == "gpt2" ? gpt2_style(zoo::gpt2_config(spec))
                               : bert_style(zoo::bert_config(spec));
}

void check_divisible(const std::string& model, const std::string& field, int64_t n, int t) {
  if (n % t != 0) {
    throw InputError(fmt::format("tensor_parallel: size {} does not divide the {} of {} ({})", t,
                                 field, model, n));
  }
}

}  // namespace

void check_tensor_parallel(const LayeredModel& full, int t, bool sequence_parallel) {
  const std::string family = family_of(full);
  if (family != "gpt2" && family != "bert") {
    throw InputError(fmt::format(
        "tensor_parallel: tensor parallelism needs a transformer family (gpt2, bert); {} has none",
        family));
  }
  const auto spec = ModelSpec::parse(full.name, "model");
  const TransformerStyle style = style_of(full);
  check_divisible(full.name, "heads", style.heads, t);
  check_divisible(full.name, "mlp width", style.mlp_dim, t);
  check_divisible(
      full.name, "vocab rows",
      family == "gpt2" ? zoo::gpt2_config(spec).padded_vocab() : zoo::bert_config(spec).vocab, t);
  if (sequence_parallel) check_divisible(full.name, "sequence", full.sample.input_shape.at(0), t);
}

std::vector<torch::nn::AnyModule> tensor_parallel_layers(const LayeredModel& full,
                                                         const std::vector<int>& layers,
                                                         const std::shared_ptr<TpComm>& comm,
                                                         bool sequence_parallel) {
  check_tensor_parallel(full, comm->size(), sequence_parallel);
  const Region r{comm, sequence_parallel};
  const TransformerStyle style = style_of(full);
  const bool bert = family_of(full) == "bert";
  std::vector<torch::nn::AnyModule> out;
  for (int l : layers) {
    const Layer& layer = full.layers.at(static_cast<size_t>(l));
    const torch::nn::Module& m = layer.impl();
    if (layer.kind == "embedding") {
      out.emplace_back(std::make_shared<TpEmbedImpl>(m, bert, style, r));
    } else if (layer.kind == "attention") {
      out.emplace_back(std::make_shared<TpAttentionImpl>(m, style, r));
    } else if (layer.kind == "mlp") {
      out.emplace_back(std::make_shared<TpMlpImpl>(m, style, r));
    } else if (layer.kind == "head" && !bert) {
      out.emplace_back(std::make_shared<TpLmHeadImpl>(m, style.eps, r));
    } else if (layer.kind == "head") {
      out.emplace_back(std::make_shared<TpReplicatedHeadImpl>(layer.module, r));
    } else {
      throw std::logic_error("tensor_parallel_layers: no shard of layer kind " + layer.kind);
    }
    out.back().ptr()->train(layer.impl().is_training());
  }
  return out;
}

at::Tensor tensor_parallel_loss(const LayeredModel& full, const at::Tensor& output,
                                const at::Tensor& target, TpComm& comm) {
  if (full.task != Task::kLanguageModel) return full.per_sample_loss(output, target);
  const auto nll = vocab_parallel_cross_entropy(output.reshape({-1, output.size(-1)}),
                                                target.reshape({-1}), comm);
  return nll.view(target.sizes()).mean(1);
}

at::Tensor tensor_parallel_predictions(const LayeredModel& full, const at::Tensor& output,
                                       TpComm& comm) {
  if (full.task != Task::kLanguageModel) return output.argmax(-1);
  return vocab_parallel_argmax(output.reshape({-1, output.size(-1)}), comm)
      .view(output.sizes().slice(0, output.dim() - 1));
}

std::vector<int64_t> tensor_parallel_output_shape(const LayeredModel& full, int layer,
                                                  at::IntArrayRef sizes, int t,
                                                  bool sequence_parallel) {
  std::vector<int64_t> out = sizes.vec();
  const std::string& kind = full.layers.at(static_cast<size_t>(layer)).kind;
  if (kind == "head") {
    if (full.task == Task::kLanguageModel) out.back() /= t;
  } else if (sequence_parallel) {
    out.at(1) /= t;
  }
  return out;
}

}  // namespace pipetwin::models
