// Internal to profiles/zoo/: the describe functions of the analytic-only families (T5, AmoebaNet,
// VGG, AlexNet)
// and the builders of layers that several families use (Transformer sub-layers, convolutions).
// The families models/ builds too are described by profiles/zoo/configs.hpp; the option helpers are
// profiles/zoo/options.hpp's, shared with models/.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/model_spec.hpp"
#include "profiles/zoo/configs.hpp"
#include "profiles/zoo/options.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

ZooModel describe_t5(const ModelSpec& spec);
ZooModel describe_amoebanet(const ModelSpec& spec);
ZooModel describe_vgg(const ModelSpec& spec);  // family "vgg" or an alias "vgg16", ...
ZooModel describe_alexnet(const ModelSpec& spec);
bool is_vgg_alias(const std::string& family);  // "vgg11", "vgg13", "vgg16", "vgg19"

// ---- Transformer sub-layers ------------------------------------------------------------------

// One attention or MLP sub-layer at sequence length `seq` (queries) and `kv_seq` (keys/values;
// == seq for self-attention). `inner` = heads x head dimension (== dim except for T5-3B/11B).
struct TransformerShape {
  int64_t seq = 0, kv_seq = 0, dim = 0, inner = 0, heads = 0, mlp = 0;
  bool pre_norm = true;             // false: BERT's post-norm (LayerNorm after the residual add)
  bool bias = true;                 // false: T5 (no biases, RMSNorm with a weight only)
  bool mlp_act_saved_twice = true;  // GELU keeps input and output (T5's ReLU keeps its output)
  double dropout = 0;
  bool causal = false;     // a decoder's self-attention (GPT-2, T5's decoder)
  bool tanh_gelu = false;  // GELU's tanh approximation (GPT-2)
};

// Forward FLOPs per sample: self-attention 8 s d i + 4 s^2 i (i = inner; q, k, v and output
// projections, then Q K^T and P V), the MLP 4 s d m; for a BERT block (i = d = h, m = 4h) they
// add up to the closed form 24 s h^2 + 4 s^2 h.
ZooLayer attention_layer(const std::string& name, const TransformerShape& t);
ZooLayer cross_attention_layer(const std::string& name, const TransformerShape& t);
ZooLayer mlp_layer(const std::string& name, const TransformerShape& t);

// ---- convolutions --------------------------------------------------------------------------

// A k x k convolution (bias-free) over an input of c_in x h x w with `stride` and "same"
// padding; output c_out x ceil(h/stride) x ceil(w/stride).
struct ConvShape {
  int64_t c_in = 0, c_out = 0, k = 3, kw = 0, h = 0, w = 0, stride = 1;  // kw 0: square kernel
  int64_t out_h() const { return (h + stride - 1) / stride; }
  int64_t out_w() const { return (w + stride - 1) / stride; }
  int64_t params() const { return c_out * c_in * k * (kw ? kw : k); }
  double flops() const {
    return 2.0 * static_cast<double>(params()) * static_cast<double>(out_h() * out_w());
  }
  double out_elems() const { return static_cast<double>(c_out * out_h() * out_w()); }
};

// Accumulates the ops of one layer: params, FLOPs, saved elements and the operations
// (profiles/zoo/ops.hpp) it launches.
struct LayerAcc {
  int64_t params = 0;
  double flops = 0, saved = 0;
  std::vector<OpSpec> ops;
  // conv + BatchNorm (+ ReLU): BatchNorm keeps the conv output, ReLU its own output.
  void conv_bn(const ConvShape& c, bool relu, const std::string& name = "conv");
};

// The operations of a layer that ends in a classifier's loss over `classes` per row:
// log-softmax and the target's pick, `rows` rows per sample.
void add_loss_ops(std::vector<OpSpec>& ops, double rows, int64_t classes);
// A dropout over `elems` per sample with probability p (no kernel when p is 0).
OpSpec dropout_op(const std::string& name, double elems, double p);

ZooLayer make_layer(std::string name, std::string kind, const LayerAcc& acc, double input_elems,
                    double output_elems);

}  // namespace pipetwin::zoo
