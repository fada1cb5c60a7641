#include "models/bert.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

namespace {

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-12;

TransformerStyle bert_style(const BertConfig& c) {
  TransformerStyle s;
  s.dim = c.hidden;
  s.heads = c.heads;
  s.mlp_dim = c.ffn;
  s.pre_norm = false;
  s.eps = kLayerNormEps;
  s.dropout = c.dropout;
  s.init_std = s.proj_std = kInitStd;
  return s;
}

class BertEmbedImpl : public torch::nn::Module {
 public:
  BertEmbedImpl(ParamFactory& f, const BertConfig& c) {
    word_ = register_parameter("word_embeddings", f.normal({c.vocab, c.hidden}, kInitStd));
    position_ =
        register_parameter("position_embeddings", f.normal({c.positions, c.hidden}, kInitStd));
    type_ =
        register_parameter("token_type_embeddings", f.normal({c.type_vocab, c.hidden}, kInitStd));
    norm_ = register_module("norm", std::make_shared<LayerNormImpl>(f, c.hidden, kLayerNormEps));
    dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(c.dropout, f.next_site()));
  }

  torch::Tensor forward(const torch::Tensor& ids) {
    TORCH_CHECK(ids.size(1) <= position_.size(0), "bert: sequence of ", ids.size(1),
                " tokens exceeds the ", position_.size(0), " position embeddings");
    // Every token is of type 0 (a single segment).
    auto x = at::embedding(word_, ids) + position_.slice(0, 0, ids.size(1)) + type_[0];
    return dropout_->forward(norm_->forward(x));
  }

 private:
  torch::Tensor word_, position_, type_;
  std::shared_ptr<LayerNormImpl> norm_;
  std::shared_ptr<DropoutImpl> dropout_;
};

class BertHeadImpl : public torch::nn::Module {
 public:
  BertHeadImpl(ParamFactory& f, const BertConfig& c) {
    pooler_ = register_module("pooler", normal_linear(f, c.hidden, c.hidden, kInitStd));
    dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(c.dropout, f.next_site()));
    classifier_ = register_module("classifier", normal_linear(f, c.hidden, c.classes, kInitStd));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const auto pooled = at::tanh(pooler_->forward(x.select(1, 0)));
    return classifier_->forward(dropout_->forward(pooled));
  }

 private:
  std::shared_ptr<LinearImpl> pooler_, classifier_;
  std::shared_ptr<DropoutImpl> dropout_;
};

const std::vector<Preset<BertConfig>>& bert_presets() {
  // {layers, hidden, heads, ffn, vocab, positions, type_vocab, seq, classes, dropout}
  static const std::vector<Preset<BertConfig>> presets = {
      {"tiny", {2, 128, 2, 512, 30522, 512, 2, 128, 2, 0.0}},
      {"mini", {4, 256, 4, 1024, 30522, 512, 2, 128, 2, 0.0}},
      {"small", {4, 512, 8, 2048, 30522, 512, 2, 128, 2, 0.0}},
      {"medium", {8, 512, 8, 2048, 30522, 512, 2, 128, 2, 0.0}},
      {"base", {12, 768, 12, 3072, 30522, 512, 2, 512, 2, 0.1}},
      {"large", {24, 1024, 16, 4096, 30522, 512, 2, 512, 2, 0.1}},
  };
  return presets;
}

}  // namespace

BertConfig bert_config(const ModelSpec& spec) {
  spec.allow_only(
      {"layers", "hidden", "heads", "ffn", "seq", "vocab", "positions", "classes", "dropout"});
  BertConfig c = choose_preset(spec, bert_presets(), "tiny");
  c.layers = int_option(spec, "layers", c.layers);
  c.hidden = int_option(spec, "hidden", c.hidden);
  c.heads = int_option(spec, "heads", c.heads);
  c.ffn = int_option(spec, "ffn", 4 * c.hidden);  // all presets use FFN 4H
  c.vocab = int_option(spec, "vocab", c.vocab);
  c.positions = int_option(spec, "positions", c.positions);
  c.seq = int_option(spec, "seq", std::min(c.seq, c.positions));
  c.classes = int_option(spec, "classes", c.classes);
  c.dropout = dropout_option(spec, c.dropout);
  require_multiple(spec, "hidden", c.hidden, "heads", c.heads);
  if (c.seq > c.positions) {
    throw InputError(
        fmt::format("{}: bert: seq {} exceeds positions {}", spec.origin, c.seq, c.positions));
  }
  return c;
}

int64_t parameter_count(const BertConfig& c) {
  const auto s = bert_style(c);
  const int64_t embed = (c.vocab + c.positions + c.type_vocab) * c.hidden + 2 * c.hidden;
  const int64_t head = c.hidden * c.hidden + c.hidden + c.hidden * c.classes + c.classes;
  return embed + c.layers * (attention_parameters(s) + mlp_parameters(s)) + head;
}

LayeredModel build_bert(const BertConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const auto style = bert_style(c);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.seq};
  m.sample.token_input = true;
  m.sample.vocab = c.vocab;
  m.sample.classes = c.classes;
  m.layers.push_back(
      {"embed", "embedding", torch::nn::AnyModule(std::make_shared<BertEmbedImpl>(f, c))});
  for (int64_t i = 0; i < c.layers; ++i) {
    m.layers.push_back({fmt::format("block{}.attn", i), "attention",
                        torch::nn::AnyModule(std::make_shared<AttentionImpl>(f, style))});
    m.layers.push_back({fmt::format("block{}.mlp", i), "mlp",
                        torch::nn::AnyModule(std::make_shared<MlpImpl>(f, style))});
  }
  m.layers.push_back({"head", "head", torch::nn::AnyModule(std::make_shared<BertHeadImpl>(f, c))});
  return m;
}

}  // namespace pipetwin::models
