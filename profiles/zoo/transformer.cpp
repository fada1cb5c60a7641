// Transformer sub-layers and the encoder / decoder-only families: ViT, BERT, GPT-2.
//
// The configs, parsers and preset tables are the ones models/ builds from (profiles/zoo/configs.hpp),
// so the descriptor of a model matches the LibTorch model layer for layer. Saved elements
// follow models/layers.cpp's textbook attention (LibTorch 1.13 has no fused kernel; with
// dropout the fused kernel is never used): q/k/v, the softmax output, the context, norms'
// statistics and outputs; dropout adds its mask (and, on attention probabilities, the dropped
// copy that the second matmul keeps).
#include <cmath>

#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

double d(int64_t v) {
  return static_cast<double>(v);
}

// Elements a norm keeps besides its input: LayerNorm mean and rstd, RMSNorm rstd, per token.
double norm_stats(const TransformerShape& t) {
  return d(t.seq) * (t.bias ? 2 : 1);
}
int64_t norm_params(const TransformerShape& t) {
  return t.bias ? 2 * t.dim : t.dim;
}

// Saved by the residual/norm tail of a sub-layer and its output dropout.
double tail_saved(const TransformerShape& t) {
  const double sd = d(t.seq * t.dim);
  const double mask = t.dropout > 0 ? sd : 0;
  // pre-norm: LN stats and output at the head, the residual sum is the output.
  // post-norm: the residual sum (kept by the LN), the LN output and its stats.
  return t.pre_norm ? norm_stats(t) + sd + sd + mask : sd + sd + norm_stats(t) + mask;
}

ZooLayer finish(std::string name, std::string kind, int64_t params, double flops, double saved,
                double input, const TransformerShape& t) {
  ZooLayer l;
  l.name = std::move(name);
  l.kind = std::move(kind);
  l.params = params;
  l.forward_flops = flops;
  l.output_elems = d(t.seq * t.dim);
  l.saved_elems = saved;
  l.traffic_elems = input + 2 * saved;
  l.float32_output = true;  // the residual sum
  return l;
}

// The operations of a sub-layer around its body (models/layers.cpp AttentionImpl / MlpImpl):
// pre-norm LN, body, output dropout, residual add; post-norm: the LN after the add.
std::vector<OpSpec> with_tail(const TransformerShape& t, std::vector<OpSpec> body) {
  const double sd = d(t.seq * t.dim);
  const int norm_tensors = t.bias ? 2 : 1;
  std::vector<OpSpec> ops;
  if (t.pre_norm) ops.push_back(elt_op("norm", EltClass::layer_norm, sd, true, norm_tensors));
  ops.insert(ops.end(), body.begin(), body.end());
  ops.push_back(dropout_op("out_dropout", sd, t.dropout));
  ops.push_back(elt_op("residual", EltClass::add, sd, true));
  if (!t.pre_norm) ops.push_back(elt_op("norm", EltClass::layer_norm, sd, true, norm_tensors));
  return ops;
}

}  // namespace

ZooLayer attention_layer(const std::string& name, const TransformerShape& t) {
  const double s = d(t.seq), i = d(t.inner), dim = d(t.dim);
  const int64_t params = 4 * t.dim * t.inner + (t.bias ? 3 * t.inner + t.dim : 0) + norm_params(t);
  // "8 s d i + 4 s^2 i": q, k, v and output projections, then Q K^T and P V.
  const double flops = 8 * s * dim * i + 4 * s * s * i;
  const double probs = d(t.heads) * s * s * (t.dropout > 0 ? 3 : 1);
  const double saved = 3 * s * i + probs + s * i + tail_saved(t);
  ZooLayer l = finish(name, "attention", params, flops, saved, s * dim, t);
  l.ops = with_tail(
      t, {linear_op("qkv", s, t.dim, 3 * t.inner, t.bias),
          attention_op("attend", t.heads, t.seq, t.seq, t.inner / t.heads, t.causal, t.dropout),
          linear_op("proj", s, t.inner, t.dim, t.bias)});
  return l;
}

ZooLayer cross_attention_layer(const std::string& name, const TransformerShape& t) {
  const double s = d(t.seq), kv = d(t.kv_seq), i = d(t.inner), dim = d(t.dim);
  const int64_t params = 4 * t.dim * t.inner + (t.bias ? 3 * t.inner + t.dim : 0) + norm_params(t);
  // q and output projections over the s decoder tokens, k and v over the kv encoder tokens.
  const double flops = 4 * s * dim * i + 4 * kv * dim * i + 4 * s * kv * i;
  const double probs = d(t.heads) * s * kv * (t.dropout > 0 ? 3 : 1);
  const double saved = s * i + 2 * kv * i + probs + s * i + tail_saved(t);
  ZooLayer l = finish(name, "cross-attention", params, flops, saved, s * dim + kv * dim, t);
  l.ops = with_tail(
      t,
      {linear_op("q", s, t.dim, t.inner, t.bias), linear_op("kv", kv, t.dim, 2 * t.inner, t.bias),
       attention_op("attend", t.heads, t.seq, t.kv_seq, t.inner / t.heads, false, t.dropout),
       linear_op("proj", s, t.inner, t.dim, t.bias)});
  return l;
}

ZooLayer mlp_layer(const std::string& name, const TransformerShape& t) {
  const double s = d(t.seq), m = d(t.mlp), dim = d(t.dim);
  const int64_t params = 2 * t.dim * t.mlp + (t.bias ? t.mlp + t.dim : 0) + norm_params(t);
  const double flops = 4 * s * dim * m;
  // GELU keeps its input (fc1's output) and fc2 keeps GELU's output; ReLU keeps only its output.
  double hidden = s * m * (t.mlp_act_saved_twice ? 2 : 1);
  if (!t.mlp_act_saved_twice && t.dropout > 0) hidden += 2 * s * m;  // T5: dropout on the hidden
  ZooLayer l = finish(name, "mlp", params, flops, hidden + tail_saved(t), s * dim, t);
  std::vector<OpSpec> body = {linear_op("fc1", s, t.dim, t.mlp, t.bias),
                              elt_op("act",
                                     !t.mlp_act_saved_twice ? EltClass::relu
                                     : t.tanh_gelu          ? EltClass::gelu_tanh
                                                            : EltClass::gelu,
                                     s * m)};
  if (!t.mlp_act_saved_twice) body.push_back(dropout_op("dropout", s * m, t.dropout));
  body.push_back(linear_op("fc2", s, t.mlp, t.dim, t.bias));
  l.ops = with_tail(t, body);
  return l;
}

// ---- ViT ------------------------------------------------------------------------------------

const std::vector<Preset<VitConfig>>& vit_presets() {
  // {depth, dim, heads, mlp, image, patch, channels, classes, dropout}
  static const std::vector<Preset<VitConfig>> presets = {
      {"test", {2, 32, 2, 128, 32, 4, 3, 10, 0.0}},
      {"tiny", {12, 192, 3, 768, 32, 4, 3, 10, 0.0}},
      {"small", {12, 384, 6, 1536, 32, 4, 3, 10, 0.0}},
      {"base", {12, 768, 12, 3072, 224, 16, 3, 1000, 0.1}},
      {"b16", {12, 768, 12, 3072, 224, 16, 3, 1000, 0.1}},  // = base (ViT-B/16)
      {"large", {24, 1024, 16, 4096, 224, 16, 3, 1000, 0.1}},
      {"l16", {24, 1024, 16, 4096, 224, 16, 3, 1000, 0.1}},  // = large (ViT-L/16)
  };
  return presets;
}

VitConfig vit_config(const ModelSpec& spec) {
  spec.allow_only({"image", "patch", "channels", "classes", "depth", "layers", "dim", "hidden",
                   "heads", "mlp", "dropout"});
  VitConfig c = choose_preset(spec, vit_presets(), "tiny");
  c.depth = int_option2(spec, "depth", "layers", c.depth);
  c.dim = int_option2(spec, "dim", "hidden", c.dim);
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

namespace {

TransformerShape block_shape(int64_t seq, int64_t dim, int64_t heads, int64_t mlp, double p) {
  TransformerShape t;
  t.seq = t.kv_seq = seq;
  t.dim = t.inner = dim;
  t.heads = heads;
  t.mlp = mlp;
  t.dropout = p;
  return t;
}

void add_blocks(ZooModel& m, int64_t layers, const TransformerShape& t) {
  for (int64_t i = 0; i < layers; ++i) {
    m.layers.push_back(attention_layer(fmt::format("block{}.attn", i), t));
    m.layers.push_back(mlp_layer(fmt::format("block{}.mlp", i), t));
  }
}

}  // namespace

ZooModel describe_vit(const VitConfig& c) {
  const int64_t patches = (c.image / c.patch) * (c.image / c.patch), seq = patches + 1;
  ZooModel m;
  m.description = fmt::format(
      "ViT (Dosovitskiy et al. 2021): {} blocks, dim {}, {} heads, image {}, "
      "patch {}",
      c.depth, c.dim, c.heads, c.image, c.patch);
  m.input_elems = d(c.channels * c.image * c.image);
  const double sd = d(seq * c.dim), mask = c.dropout > 0 ? sd : 0;
  ZooLayer embed;
  embed.name = "embed";
  embed.kind = "embedding";
  embed.float32_output = true;
  embed.params = c.dim * c.channels * c.patch * c.patch + 2 * c.dim + seq * c.dim;
  embed.forward_flops = 2.0 * d(patches * c.channels * c.patch * c.patch * c.dim);
  embed.output_elems = sd;
  embed.saved_elems = sd + mask;
  embed.traffic_elems = m.input_elems + 2 * embed.saved_elems;
  // Patches by a strided convolution, the [class] token concatenated, positions added.
  embed.ops = {conv_op("patch", c.channels, c.dim, c.patch, c.image, c.image, c.patch, 0, true),
               elt_op("cat", EltClass::copy, sd, false, 1),
               elt_op("pos", EltClass::add_bcast, sd, true, 1),
               dropout_op("dropout", sd, c.dropout)};
  m.layers.push_back(embed);
  add_blocks(m, c.depth, block_shape(seq, c.dim, c.heads, c.mlp, c.dropout));
  ZooLayer head;  // LayerNorm of the [class] token, Linear(dim -> classes), the loss
  head.name = "head";
  head.kind = "head";
  head.params = 2 * c.dim + c.dim * c.classes + c.classes;
  head.forward_flops = 2.0 * d(c.dim * c.classes);
  head.output_elems = d(c.classes);
  head.saved_elems = 2 + d(c.dim) + d(c.classes);
  head.traffic_elems = d(c.dim) + 2 * head.saved_elems;
  head.ops = {elt_op("cls", EltClass::select, sd),
              elt_op("norm", EltClass::layer_norm, d(c.dim), true, 2),
              linear_op("fc", 1, c.dim, c.classes)};
  add_loss_ops(head.ops, 1, c.classes);
  m.layers.push_back(head);
  return m;
}

// ---- BERT -----------------------------------------------------------------------------------

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

ZooModel describe_bert(const BertConfig& c) {
  ZooModel m;
  m.description = fmt::format("BERT (Devlin et al. 2019): {} layers, hidden {}, {} heads, seq {}",
                              c.layers, c.hidden, c.heads, c.seq);
  m.input_elems = d(c.seq);
  m.input_tokens = true;
  const double sh = d(c.seq * c.hidden), mask = c.dropout > 0 ? sh : 0;
  ZooLayer embed;  // three embeddings summed, LayerNorm, dropout
  embed.name = "embed";
  embed.kind = "embedding";
  embed.float32_output = true;
  embed.params = (c.vocab + c.positions + c.type_vocab) * c.hidden + 2 * c.hidden;
  embed.output_elems = sh;
  embed.saved_elems = sh + sh + 2 * d(c.seq) + mask;
  embed.traffic_elems = m.input_elems + 2 * embed.saved_elems;
  embed.dense_weights = false;
  // Word rows gathered, position and type rows added (their gradients: a slice's and a select's
  // zero-filled tables), LayerNorm, dropout.
  OpSpec position_grad = elt_op("position.slice", EltClass::select, d(c.positions * c.hidden));
  position_grad.per_batch = true;
  OpSpec type_grad = elt_op("type.select", EltClass::select, d(c.type_vocab * c.hidden));
  type_grad.per_batch = true;
  embed.ops = {embedding_op("word", d(c.seq), c.hidden, c.vocab),
               elt_op("position", EltClass::add_bcast, sh, true, 1),
               position_grad,
               elt_op("type", EltClass::add_bcast, sh, true, 1),
               type_grad,
               elt_op("norm", EltClass::layer_norm, sh, true, 2),
               dropout_op("dropout", sh, c.dropout)};
  m.layers.push_back(embed);
  TransformerShape t = block_shape(c.seq, c.hidden, c.heads, c.ffn, c.dropout);
  t.pre_norm = false;
  add_blocks(m, c.layers, t);
  ZooLayer head;  // pooler tanh(Linear) on [CLS], dropout, classifier, the loss
  head.name = "head";
  head.kind = "head";
  head.params = c.hidden * c.hidden + c.hidden + c.hidden * c.classes + c.classes;
  head.forward_flops = 2.0 * d(c.hidden * c.hidden + c.hidden * c.classes);
  head.output_elems = d(c.classes);
  head.saved_elems = d(c.hidden) * (c.dropout > 0 ? 2 : 1) + d(c.classes);
  head.traffic_elems = d(c.hidden) + 2 * head.saved_elems;
  head.ops = {elt_op("cls", EltClass::select, sh), linear_op("pooler", 1, c.hidden, c.hidden),
              elt_op("tanh", EltClass::tanh, d(c.hidden)),
              dropout_op("dropout", d(c.hidden), c.dropout),
              linear_op("classifier", 1, c.hidden, c.classes)};
  add_loss_ops(head.ops, 1, c.classes);
  m.layers.push_back(head);
  return m;
}

// ---- GPT-2 ----------------------------------------------------------------------------------

const std::vector<Preset<Gpt2Config>>& gpt2_presets() {
  // {layers, dim, heads, vocab, ctx, seq, dropout}; the sizes by name and by OpenAI's count
  static const std::vector<Preset<Gpt2Config>> presets = {
      {"tiny", {2, 128, 2, 1024, 64, 64, 0.0}},
      {"small", {12, 768, 12, 50257, 1024, 1024, 0.1}},
      {"124m", {12, 768, 12, 50257, 1024, 1024, 0.1}},  // = small
      {"medium", {24, 1024, 16, 50257, 1024, 1024, 0.1}},
      {"355m", {24, 1024, 16, 50257, 1024, 1024, 0.1}},  // = medium
      {"large", {36, 1280, 20, 50257, 1024, 1024, 0.1}},
      {"774m", {36, 1280, 20, 50257, 1024, 1024, 0.1}},  // = large
      {"xl", {48, 1600, 25, 50257, 1024, 1024, 0.1}},
      {"1.5b", {48, 1600, 25, 50257, 1024, 1024, 0.1}},  // = xl
      // Megatron-LM's GPT-2 configurations for model parallelism (Shoeybi et al. 2019, Table 2):
      // heads divisible by the tensor-parallel sizes 2, 4 and 8 (gpt2:1.5b's 25 are not).
      {"2.5b", {54, 1920, 20, 50257, 1024, 1024, 0.1}},
      {"8.3b", {72, 3072, 32, 50257, 1024, 1024, 0.1}},
  };
  return presets;
}

Gpt2Config gpt2_config(const ModelSpec& spec) {
  spec.allow_only({"layers", "dim", "heads", "vocab", "ctx", "seq", "dropout", "vocab_multiple"});
  Gpt2Config c = choose_preset(spec, gpt2_presets(), "tiny");
  c.layers = int_option(spec, "layers", c.layers);
  c.dim = int_option(spec, "dim", c.dim);
  c.heads = int_option(spec, "heads", c.heads);
  c.vocab = int_option(spec, "vocab", c.vocab);
  c.vocab_multiple = int_option(spec, "vocab_multiple", c.vocab_multiple);
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

ZooModel describe_gpt2(const Gpt2Config& c) {
  ZooModel m;
  // The embedding and the head have the padded vocabulary's rows (configs.hpp Gpt2Config).
  const int64_t vocab = c.padded_vocab();
  m.description = fmt::format(
      "GPT-2 (Radford et al. 2019): {} layers, dim {}, {} heads, seq {}, vocab {} in {} rows; LM "
      "head untied",
      c.layers, c.dim, c.heads, c.seq, c.vocab, vocab);
  m.input_elems = d(c.seq);
  m.input_tokens = true;
  m.tied_params = vocab * c.dim;  // the published model ties the LM head to wte
  const double sd = d(c.seq * c.dim);
  ZooLayer embed;
  embed.name = "embed";
  embed.kind = "embedding";
  embed.float32_output = true;
  embed.params = (vocab + c.ctx) * c.dim;
  embed.output_elems = sd;
  embed.saved_elems = sd * (c.dropout > 0 ? 2 : 1);
  embed.traffic_elems = m.input_elems + 2 * embed.saved_elems;
  embed.dense_weights = false;
  OpSpec position_grad = elt_op("wpe.slice", EltClass::select, d(c.ctx * c.dim));
  position_grad.per_batch = true;
  embed.ops = {embedding_op("wte", d(c.seq), c.dim, vocab),
               elt_op("wpe", EltClass::add_bcast, sd, true, 1), position_grad,
               dropout_op("dropout", sd, c.dropout)};
  m.layers.push_back(embed);
  TransformerShape t = block_shape(c.seq, c.dim, c.heads, 4 * c.dim, c.dropout);
  t.causal = true;
  t.tanh_gelu = true;
  add_blocks(m, c.layers, t);
  ZooLayer head;  // final LayerNorm, LM head without bias, per-token cross-entropy
  head.name = "head";
  head.kind = "head";
  head.params = 2 * c.dim + c.dim * vocab;
  head.forward_flops = 2.0 * d(c.seq * c.dim * vocab);
  head.output_elems = d(c.seq * vocab);
  head.saved_elems = 2 * d(c.seq) + sd + d(c.seq * vocab) + d(c.seq);
  head.traffic_elems = sd + 2 * head.saved_elems;
  head.ops = {elt_op("ln_f", EltClass::layer_norm, sd, true, 2),
              linear_op("lm_head", d(c.seq), c.dim, vocab, false)};
  add_loss_ops(head.ops, d(c.seq), vocab);
  m.layers.push_back(head);
  return m;
}

}  // namespace pipetwin::zoo
