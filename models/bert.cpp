#include "models/bert.hpp"

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::BertConfig;

namespace {

constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-12;

}  // namespace

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

namespace {

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

}  // namespace

LayeredModel build_bert(const BertConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const auto style = bert_style(c);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.seq};
  m.sample.token_input = true;
  m.sample.vocab = c.vocab;
  m.sample.classes = c.classes;
  m.layers = transformer_layers(
      zoo::describe_bert(c), f, style,
      [&] { return torch::nn::AnyModule(std::make_shared<BertEmbedImpl>(f, c)); },
      [&] { return torch::nn::AnyModule(std::make_shared<BertHeadImpl>(f, c)); });
  return m;
}

}  // namespace pipetwin::models
