// T5 (Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
// Transformer", JMLR 2020), the encoder-decoder FTPipe partitions (T5-3B, T5-11B; FTPipe
// Sections 3.3 and 6): `t5:small|base|large|3b|11b[,enc_seq=512,dec_seq=4,...]`.
//
//   preset  layers  d_model  d_ff    heads  d_kv    published
//   small   6 + 6   512      2048    8      64      60M
//   base    12 + 12 768      3072    12     64      220M
//   large   24 + 24 1024     4096    16     64      770M (737.7M counted; the paper rounds up)
//   3b      24 + 24 1024     16384   32     128     2.85B
//   11b     24 + 24 1024     65536   128    128     11B
// Vocabulary 32128, 32 relative-position buckets (a bias per head in the first layer of each
// stack), T5 v1.0 style: no biases, RMSNorm (weight only), ReLU feed-forward, dropout 0.1, the
// encoder and decoder embeddings and the LM head tied to one matrix. Options: enc_seq=,
// dec_seq= (defaults 512 and 4, FTPipe's RTE / BoolQ runs, Section 3.3), enc_layers=,
// dec_layers=, d_model=, d_ff=, heads=, d_kv=, vocab=, dropout=.
//
// Layers:
//   "embed"             encoder token embedding, dropout                          "embedding"
//   "enc{i}.attn"       x + Dropout(SelfAttn(RMSNorm(x)))                          "attention"
//   "enc{i}.mlp"        x + Dropout(W_o Dropout(ReLU(W_i RMSNorm(x))))             "mlp"
//   "enc.norm"          final RMSNorm of the encoder, dropout                      "norm"
//   "dec.embed"         decoder token embedding (a tied copy), dropout             "embedding"
//   "dec{i}.attn"       causal self-attention over the dec_seq decoder tokens      "attention"
//   "dec{i}.cross"      cross-attention, keys/values from enc.norm           "cross-attention"
//   "dec{i}.mlp"        as in the encoder                                          "mlp"
//   "head"              final RMSNorm, LM head (a tied copy), cross-entropy        "head"
// Edges: the encoder is a chain; enc.norm's output (enc_seq x d_model) feeds EVERY decoder
// cross-attention; the decoder is a chain from dec.embed to head. The model's input (encoder
// and decoder token ids) enters "embed"; the decoder's ids travel from there to dec.embed as a
// token edge (pipetwin profiles have one model input, fed to the first layer; this is the
// smallest faithful way to route the second one).
//
// Thread-safety: pure functions.
#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

constexpr int64_t kBuckets = 32;

struct T5Config {
  int64_t enc_layers, dec_layers, d_model, d_ff, heads, d_kv, vocab, enc_seq, dec_seq;
  double dropout;
};

const std::vector<Preset<T5Config>>& t5_presets() {
  static const std::vector<Preset<T5Config>> presets = {
      {"small", {6, 6, 512, 2048, 8, 64, 32128, 512, 4, 0.1}},
      {"base", {12, 12, 768, 3072, 12, 64, 32128, 512, 4, 0.1}},
      {"large", {24, 24, 1024, 4096, 16, 64, 32128, 512, 4, 0.1}},
      {"3b", {24, 24, 1024, 16384, 32, 128, 32128, 512, 4, 0.1}},
      {"11b", {24, 24, 1024, 65536, 128, 128, 32128, 512, 4, 0.1}},
  };
  return presets;
}

T5Config t5_config(const ModelSpec& spec) {
  spec.allow_only({"enc_seq", "dec_seq", "enc_layers", "dec_layers", "d_model", "d_ff", "heads",
                   "d_kv", "vocab", "dropout"});
  T5Config c = choose_preset(spec, t5_presets(), "small");
  c.enc_layers = int_option(spec, "enc_layers", c.enc_layers);
  c.dec_layers = int_option(spec, "dec_layers", c.dec_layers);
  c.d_model = int_option(spec, "d_model", c.d_model);
  c.d_ff = int_option(spec, "d_ff", c.d_ff);
  c.heads = int_option(spec, "heads", c.heads);
  c.d_kv = int_option(spec, "d_kv", c.d_kv);
  c.vocab = int_option(spec, "vocab", c.vocab);
  c.enc_seq = int_option(spec, "enc_seq", c.enc_seq);
  c.dec_seq = int_option(spec, "dec_seq", c.dec_seq);
  c.dropout = dropout_option(spec, c.dropout);
  return c;
}

TransformerShape t5_shape(const T5Config& c, int64_t seq, int64_t kv_seq) {
  TransformerShape t;
  t.seq = seq;
  t.kv_seq = kv_seq;
  t.dim = c.d_model;
  t.inner = c.heads * c.d_kv;
  t.heads = c.heads;
  t.mlp = c.d_ff;
  t.pre_norm = true;
  t.bias = false;
  t.mlp_act_saved_twice = false;
  t.dropout = c.dropout;
  return t;
}

ZooLayer embedding(const std::string& name, const T5Config& c, int64_t seq) {
  const double sd = static_cast<double>(seq * c.d_model);
  ZooLayer l;
  l.name = name;
  l.kind = "embedding";
  l.float32_output = true;
  l.params = c.vocab * c.d_model;
  l.output_elems = sd;
  l.saved_elems = sd * (c.dropout > 0 ? 2 : 1);
  l.traffic_elems = static_cast<double>(seq) + 2 * l.saved_elems;
  l.dense_weights = false;
  l.ops = {embedding_op("embed", static_cast<double>(seq), c.d_model, c.vocab),
           dropout_op("dropout", sd, c.dropout)};
  return l;
}

// Adds a chain edge from the last layer to the one about to be pushed.
void chain(ZooModel& m) {
  const int from = m.num_layers() - 1;
  m.edges.push_back({from, from + 1, m.layers.back().output_elems, false});
}

void add_encoder(ZooModel& m, const T5Config& c) {
  const TransformerShape t = t5_shape(c, c.enc_seq, c.enc_seq);
  m.layers.push_back(embedding("embed", c, c.enc_seq));
  for (int64_t i = 0; i < c.enc_layers; ++i) {
    chain(m);
    m.layers.push_back(attention_layer(fmt::format("enc{}.attn", i), t));
    if (i == 0) m.layers.back().params += kBuckets * c.heads;
    chain(m);
    m.layers.push_back(mlp_layer(fmt::format("enc{}.mlp", i), t));
  }
  chain(m);
  const double sd = static_cast<double>(c.enc_seq * c.d_model);
  ZooLayer norm;
  norm.name = "enc.norm";
  norm.kind = "norm";
  norm.float32_output = true;
  norm.params = c.d_model;
  norm.output_elems = sd;
  norm.saved_elems = static_cast<double>(c.enc_seq) + sd * (c.dropout > 0 ? 2 : 1);
  norm.traffic_elems = sd + 2 * norm.saved_elems;
  norm.ops = {elt_op("norm", EltClass::layer_norm, sd, true, 1),
              dropout_op("dropout", sd, c.dropout)};
  m.layers.push_back(norm);
}

void add_decoder(ZooModel& m, const T5Config& c) {
  const int enc_out = m.num_layers() - 1;
  const double enc_elems = m.layers.back().output_elems;
  m.edges.push_back({0, m.num_layers(), static_cast<double>(c.dec_seq), true});
  m.layers.push_back(embedding("dec.embed", c, c.dec_seq));
  TransformerShape self = t5_shape(c, c.dec_seq, c.dec_seq);
  self.causal = true;
  const TransformerShape cross = t5_shape(c, c.dec_seq, c.enc_seq);
  for (int64_t i = 0; i < c.dec_layers; ++i) {
    chain(m);
    m.layers.push_back(attention_layer(fmt::format("dec{}.attn", i), self));
    if (i == 0) m.layers.back().params += kBuckets * c.heads;
    chain(m);
    m.edges.push_back({enc_out, m.num_layers(), enc_elems, false});
    m.layers.push_back(cross_attention_layer(fmt::format("dec{}.cross", i), cross));
    chain(m);
    m.layers.push_back(mlp_layer(fmt::format("dec{}.mlp", i), self));
  }
  chain(m);
  const double t = static_cast<double>(c.dec_seq), td = t * static_cast<double>(c.d_model);
  const double tv = t * static_cast<double>(c.vocab);
  ZooLayer head;
  head.name = "head";
  head.kind = "head";
  head.params = c.d_model + c.d_model * c.vocab;
  head.forward_flops = 2.0 * td * static_cast<double>(c.vocab);
  head.output_elems = tv;
  head.saved_elems = t + td * (c.dropout > 0 ? 2 : 1) + tv + t;
  head.traffic_elems = td + 2 * head.saved_elems;
  head.ops = {elt_op("norm", EltClass::layer_norm, td, true, 1),
              dropout_op("dropout", td, c.dropout),
              linear_op("lm_head", t, c.d_model, c.vocab, false)};
  add_loss_ops(head.ops, t, c.vocab);
  m.layers.push_back(head);
}

}  // namespace

ZooModel describe_t5(const ModelSpec& spec) {
  const T5Config c = t5_config(spec);
  ZooModel m;
  m.description = fmt::format(
      "T5 (Raffel et al. 2020): {} + {} layers, d_model {}, d_ff {}, {} heads x {}, encoder seq "
      "{}, decoder seq {}",
      c.enc_layers, c.dec_layers, c.d_model, c.d_ff, c.heads, c.d_kv, c.enc_seq, c.dec_seq);
  m.input_elems = static_cast<double>(c.enc_seq + c.dec_seq);
  m.input_tokens = true;
  // dec.embed and the LM head are copies of the shared embedding in the published model.
  m.tied_params = 2 * c.vocab * c.d_model;
  add_encoder(m, c);
  add_decoder(m, c);
  return m;
}

}  // namespace pipetwin::zoo
