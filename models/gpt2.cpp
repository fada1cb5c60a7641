#include "models/gpt2.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

namespace {

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-5;

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

class Gpt2EmbedImpl : public torch::nn::Module {
 public:
  Gpt2EmbedImpl(ParamFactory& f, const Gpt2Config& c) {
    wte_ = register_parameter("wte", f.normal({c.vocab, c.dim}, kInitStd));
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
    lm_head_ = register_module("lm_head", normal_linear(f, c.dim, c.vocab, kInitStd, false));
  }
  torch::Tensor forward(const torch::Tensor& x) { return lm_head_->forward(norm_->forward(x)); }

 private:
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<LinearImpl> lm_head_;
};

const std::vector<Preset<Gpt2Config>>& gpt2_presets() {
  // {layers, dim, heads, vocab, ctx, seq, dropout}
  static const std::vector<Preset<Gpt2Config>> presets = {
      {"tiny", {2, 128, 2, 1024, 64, 64, 0.0}},
      {"small", {12, 768, 12, 50257, 1024, 1024, 0.1}},
      {"medium", {24, 1024, 16, 50257, 1024, 1024, 0.1}},
      {"large", {36, 1280, 20, 50257, 1024, 1024, 0.1}},
      {"xl", {48, 1600, 25, 50257, 1024, 1024, 0.1}},
  };
  return presets;
}

}  // namespace

Gpt2Config gpt2_config(const ModelSpec& spec) {
  spec.allow_only({"layers", "dim", "heads", "vocab", "ctx", "seq", "dropout"});
  Gpt2Config c = choose_preset(spec, gpt2_presets(), "tiny");
  c.layers = int_option(spec, "layers", c.layers);
  c.dim = int_option(spec, "dim", c.dim);
  c.heads = int_option(spec, "heads", c.heads);
  c.vocab = int_option(spec, "vocab", c.vocab);
  c.ctx = int_option(spec, "ctx", c.ctx);
  c.seq = int_option(spec, "seq", std::min(c.seq, c.ctx));
  c.dropout = dropout_option(spec, c.dropout);
  require_multiple(spec, "dim", c.dim, "heads", c.heads);
  if (c.seq > c.ctx) {
    throw InputError(
        fmt::format("{}: gpt2: seq {} exceeds the context ctx {}", spec.origin, c.seq, c.ctx));
  }
  return c;
}

int64_t parameter_count(const Gpt2Config& c) {
  return tied_parameter_count(c) + c.vocab * c.dim;
}

int64_t tied_parameter_count(const Gpt2Config& c) {
  const auto s = gpt2_style(c);
  const int64_t embed = (c.vocab + c.ctx) * c.dim;
  const int64_t final_norm = 2 * c.dim;
  return embed + c.layers * (attention_parameters(s) + mlp_parameters(s)) + final_norm;
}

LayeredModel build_gpt2(const Gpt2Config& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const auto style = gpt2_style(c);
  LayeredModel m;
  m.task = Task::kLanguageModel;
  m.sample.input_shape = {c.seq};
  m.sample.token_input = true;
  m.sample.vocab = c.vocab;
  m.sample.target_shape = {c.seq};
  m.layers.push_back(
      {"embed", "embedding", torch::nn::AnyModule(std::make_shared<Gpt2EmbedImpl>(f, c))});
  for (int64_t i = 0; i < c.layers; ++i) {
    m.layers.push_back({fmt::format("block{}.attn", i), "attention",
                        torch::nn::AnyModule(std::make_shared<AttentionImpl>(f, style))});
    m.layers.push_back({fmt::format("block{}.mlp", i), "mlp",
                        torch::nn::AnyModule(std::make_shared<MlpImpl>(f, style))});
  }
  m.layers.push_back({"head", "head", torch::nn::AnyModule(std::make_shared<Gpt2HeadImpl>(f, c))});
  return m;
}

}  // namespace pipetwin::models
