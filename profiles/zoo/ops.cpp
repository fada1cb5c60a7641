#include "profiles/zoo/ops.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace pipetwin::zoo {

namespace {

// Per element of an op's `elems`: elements read and written, and kernels launched, forward and
// backward. Forward: one pass reads the input and writes the output; a norm or softmax reads its
// input twice (statistics, then the normalised output). Backward: the derivative formulas read
// the output gradient and what the forward saved, and write the input gradient; a norm's backward
// also reduces its weight gradients. A residual add's backward is the accumulation of the two
// gradients where the stream forked; a broadcast add's (a position embedding) the reduction
// into the broadcast parameter.
struct EltTraffic {
  const char* name;
  double fwd_reads, fwd_writes;
  int fwd_kernels;
  double bwd_reads, bwd_writes;
  int bwd_kernels;
};

// In EltClass order. Dropout is PyTorch's (a Bernoulli mask of one byte per element, then the
// product); the executor's keyed dropout (models/dropout.hpp) moves about 250 bytes per element
// instead, which this table does not charge: it prices what frameworks run.
constexpr std::array<EltTraffic, 21> kEltTraffic{{
    {"copy", 1, 1, 1, 1, 1, 1},        {"fill", 0, 1, 1, 0, 0, 0},
    {"add", 2, 1, 1, 2, 1, 1},         {"add_bcast", 1, 1, 1, 1, 0, 1},
    {"reduce", 1, 0, 1, 0, 1, 1},      {"relu", 1, 1, 1, 2, 1, 1},
    {"gelu", 1, 1, 1, 2, 1, 1},        {"gelu_tanh", 1, 1, 1, 2, 1, 1},
    {"tanh", 1, 1, 1, 2, 1, 1},        {"scale", 1, 1, 1, 1, 1, 1},
    {"mask", 1, 1, 1, 1, 1, 1},        {"softmax", 2, 1, 1, 3, 1, 1},
    {"log_softmax", 2, 1, 1, 3, 1, 1}, {"layer_norm", 2, 1, 1, 4, 1, 2},
    {"batch_norm", 2, 1, 1, 4, 1, 1},  {"dropout", 1.25, 1.25, 2, 1.25, 1, 1},
    {"pool", 1, 0.5, 1, 0.5, 1, 2},    {"gather", 1, 1, 1, 0, 0, 0},
    {"scatter_add", 0, 0, 0, 2, 1, 1}, {"select", 0, 0, 0, 0, 1, 2},
    {"nll", 0, 0, 1, 0, 1, 2},
}};

const EltTraffic& traffic(EltClass c) {
  const auto i = static_cast<size_t>(c);
  if (i >= kEltTraffic.size()) throw InputError("ops: unknown element-wise class");
  return kEltTraffic[i];
}

double d(int64_t v) {
  return static_cast<double>(v);
}

Kernel gemm_kernel(std::string name, double batch, double m, double n, double k, bool backward) {
  Kernel g;
  g.kind = OpKind::gemm;
  g.name = std::move(name);
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.backward = backward;
  return g;
}

Kernel elt_kernel(std::string name, EltClass c, double elems, double reads, double writes,
                  bool fp32, bool backward) {
  Kernel e;
  e.kind = OpKind::elementwise;
  e.name = std::move(name);
  e.elt = c;
  e.elems = elems;
  e.reads = reads * elems;
  e.writes = writes * elems;
  e.fp32 = fp32;
  e.backward = backward;
  return e;
}

// The forward kernels of an element-wise op and its backward ones (several kernels of a class
// share its traffic evenly: the first carries it, the rest are launches).
void expand_elt(const OpSpec& op, double elems, LayerKernels& out, bool grad) {
  const EltTraffic& t = traffic(op.elt);
  for (int i = 0; i < t.fwd_kernels; ++i) {
    out.forward.push_back(
        elt_kernel(op.name, op.elt, i == 0 ? elems : 0, t.fwd_reads, t.fwd_writes, op.fp32, false));
  }
  if (!grad) return;
  for (int i = 0; i < t.bwd_kernels; ++i) {
    out.input_half.push_back(elt_kernel(op.name + ".bwd", op.elt, i == 0 ? elems : 0, t.bwd_reads,
                                        t.bwd_writes, op.fp32, true));
  }
}

void expand_gemm(const OpSpec& op, int b, bool first, LayerKernels& out) {
  if (op.weight) {  // a Linear over rows x b tokens: Y = X W^T (+ bias)
    const double m = op.rows * b, n = d(op.n), k = d(op.k);
    out.forward.push_back(gemm_kernel(op.name, 1, m, n, k, false));
    if (!first) out.input_half.push_back(gemm_kernel(op.name + ".dX", 1, m, k, n, true));
    out.weight_half.push_back(gemm_kernel(op.name + ".dW", 1, n, k, m, true));
    if (op.bias) {
      out.weight_half.push_back(
          elt_kernel(op.name + ".db", EltClass::reduce, m * n, 1, 0, false, true));
    }
    return;
  }
  // groups x b products of two activations: C = A B; dA = dC B^T, dB = A^T dC.
  const double batch = op.groups * b, m = op.rows, n = d(op.n), k = d(op.k);
  out.forward.push_back(gemm_kernel(op.name, batch, m, n, k, false));
  out.input_half.push_back(gemm_kernel(op.name + ".dA", batch, m, k, n, true));
  out.input_half.push_back(gemm_kernel(op.name + ".dB", batch, k, n, m, true));
}

void expand_conv(const OpSpec& op, int b, bool first, LayerKernels& out) {
  Kernel c;
  c.kind = OpKind::conv;
  c.name = op.name;
  c.conv = op;
  c.batch = b;
  out.forward.push_back(c);
  c.backward = true;
  if (!first) {
    c.name = op.name + ".dgrad";
    c.conv_pass = ConvPass::dgrad;
    out.input_half.push_back(c);
  }
  c.name = op.name + ".wgrad";
  c.conv_pass = ConvPass::wgrad;
  out.input_half.push_back(c);  // with the input half: the executor defers Linears only
  if (op.bias) {
    const double elems = d(op.c_out * op.oh * op.ow) * b;
    out.input_half.push_back(
        elt_kernel(op.name + ".db", EltClass::reduce, elems, 1, 0, false, true));
  }
}

// Flash-style: one kernel each way. Forward 2 products of s x kv x hd per head (halved under a
// causal mask, whose blocks above the diagonal are skipped); backward 5 products (the scores
// recomputed, dV, dP, dQ, dK: 2.5x the forward), Dao 2023, Section 3.
void expand_fused_attention(const OpSpec& op, int b, LayerKernels& out) {
  const double heads = d(op.heads) * b, s = d(op.seq), kv = d(op.kv_seq), hd = d(op.head_dim);
  const double flops = 4 * heads * s * kv * hd * (op.causal ? 0.5 : 1.0);
  Kernel f;
  f.kind = OpKind::attention;
  f.name = op.name;
  f.flops = flops;
  f.elems = heads * (s + kv) * hd;
  f.reads = heads * (s + 2 * kv) * hd;  // q, k, v
  f.writes = heads * s * hd;            // o (and a statistic per row)
  out.forward.push_back(f);
  f.name = op.name + ".bwd";
  f.flops = 2.5 * flops;
  f.reads = heads * (3 * s + 2 * kv) * hd;  // q, k, v, o, do
  f.writes = heads * (s + 2 * kv) * hd;     // dq, dk, dv
  f.backward = true;
  out.input_half.push_back(f);
}

// Textbook attention as models/layers.cpp runs it without a fused kernel: q, k and v are strided
// views of the fused qkv output, so at::matmul copies each to a contiguous [b h, s, hd]; the
// context is copied back to [b, s, h hd]. Backward: each of q, k, v's gradients zero-fills a
// tensor of the qkv output's size and copies into its slice (select's backward), and autograd
// adds the three.
void expand_unfused_attention(const OpSpec& op, int b, const ExpandOptions& o, LayerKernels& out) {
  const double heads = d(op.heads), s = d(op.seq), kv = d(op.kv_seq), hd = d(op.head_dim);
  const double q = heads * s * hd * b, kvs = heads * kv * hd * b, probs = heads * s * kv * b;
  auto elt = [&](const std::string& n, EltClass c, double e, bool fp32 = false) {
    OpSpec spec = elt_op(op.name + "." + n, c, 0, fp32);
    expand_elt(spec, e, out, true);
  };
  elt("q", EltClass::copy, q);
  elt("k", EltClass::copy, kvs);
  OpSpec qk = bmm_op(op.name + ".qk", d(op.heads), op.seq, op.kv_seq, op.head_dim);
  expand_gemm(qk, b, false, out);
  elt("scale", EltClass::scale, probs);
  if (op.causal) {
    out.forward.push_back(
        elt_kernel(op.name + ".triu", EltClass::fill, s * kv, 0, 1, false, false));
    elt("mask", EltClass::mask, probs);
  }
  elt("softmax", EltClass::softmax, probs, true);
  if (op.dropout > 0 && o.training_dropout) elt("dropout", EltClass::dropout, probs);
  elt("v", EltClass::copy, kvs);
  OpSpec pv = bmm_op(op.name + ".pv", d(op.heads), op.seq, op.head_dim, op.kv_seq);
  expand_gemm(pv, b, false, out);
  elt("context", EltClass::copy, q);
  const double qkv = q + 2 * kvs;
  for (const char* part : {"q", "k", "v"}) {
    out.input_half.push_back(
        elt_kernel(op.name + "." + part + ".select", EltClass::fill, qkv, 0, 1, false, true));
  }
  out.input_half.push_back(
      elt_kernel(op.name + ".qkv.sum", EltClass::add, 2 * qkv, 2, 1, false, true));
  out.nodes += op.causal ? 9 : 8;
}

void expand_embedding(const OpSpec& op, int b, LayerKernels& out) {
  const double rows = op.elems * b, width = d(op.n), table = d(op.k) * width;
  out.forward.push_back(elt_kernel(op.name, EltClass::gather, rows * width, 1, 1, false, false));
  // embedding_dense_backward: a zero table gradient, then the rows added in.
  out.input_half.push_back(elt_kernel(op.name + ".zero", EltClass::fill, table, 0, 1, false, true));
  out.input_half.push_back(
      elt_kernel(op.name + ".scatter", EltClass::scatter_add, rows * width, 2, 1, false, true));
}

}  // namespace

const char* elt_name(EltClass c) {
  return traffic(c).name;
}

std::vector<EltClass> all_elt_classes() {
  std::vector<EltClass> out;
  for (size_t i = 0; i < kEltTraffic.size(); ++i) out.push_back(static_cast<EltClass>(i));
  return out;
}

OpSpec linear_op(std::string name, double rows, int64_t in, int64_t out, bool bias) {
  OpSpec o;
  o.kind = OpKind::gemm;
  o.name = std::move(name);
  o.rows = rows;
  o.n = out;
  o.k = in;
  o.weight = true;
  o.bias = bias;
  o.param_tensors = bias ? 2 : 1;
  return o;
}

OpSpec bmm_op(std::string name, double groups, int64_t rows, int64_t n, int64_t k) {
  OpSpec o;
  o.kind = OpKind::gemm;
  o.name = std::move(name);
  o.groups = groups;
  o.rows = d(rows);
  o.n = n;
  o.k = k;
  return o;
}

OpSpec conv_op(std::string name, int64_t c_in, int64_t c_out, int64_t kernel, int64_t h, int64_t w,
               int64_t stride, int64_t pad, bool bias) {
  OpSpec o;
  o.kind = OpKind::conv;
  o.name = std::move(name);
  o.c_in = c_in;
  o.c_out = c_out;
  o.kh = o.kw = kernel;
  o.h = h;
  o.w = w;
  o.stride = stride;
  o.oh = (h + 2 * pad - kernel) / stride + 1;
  o.ow = (w + 2 * pad - kernel) / stride + 1;
  o.bias = bias;
  o.param_tensors = bias ? 2 : 1;
  return o;
}

OpSpec attention_op(std::string name, int64_t heads, int64_t seq, int64_t kv_seq, int64_t head_dim,
                    bool causal, double dropout) {
  OpSpec o;
  o.kind = OpKind::attention;
  o.name = std::move(name);
  o.heads = heads;
  o.seq = seq;
  o.kv_seq = kv_seq;
  o.head_dim = head_dim;
  o.causal = causal;
  o.dropout = dropout;
  return o;
}

OpSpec elt_op(std::string name, EltClass c, double elems, bool fp32, int params) {
  OpSpec o;
  o.kind = OpKind::elementwise;
  o.name = std::move(name);
  o.elt = c;
  o.elems = elems;
  o.fp32 = fp32;
  o.param_tensors = params;
  return o;
}

OpSpec embedding_op(std::string name, double tokens, int64_t dim, int64_t table_rows) {
  OpSpec o;
  o.kind = OpKind::embedding;
  o.name = std::move(name);
  o.elems = tokens;
  o.n = dim;
  o.k = table_rows;
  o.param_tensors = 1;
  return o;
}

LayerKernels expand_ops(const std::vector<OpSpec>& ops, int b, const ExpandOptions& o) {
  require_positive("ops: micro-batch size", b);
  LayerKernels out;
  for (const auto& op : ops) {
    out.param_tensors += op.param_tensors;
    const bool grad = op.grad;
    if (grad) ++out.nodes;
    switch (op.kind) {
      case OpKind::gemm:
        expand_gemm(op, b, o.first_layer || !grad, out);
        break;
      case OpKind::conv:
        expand_conv(op, b, o.first_layer || !grad, out);
        break;
      case OpKind::attention:
        if (o.fused_attention) {
          expand_fused_attention(op, b, out);
        } else {
          expand_unfused_attention(op, b, o, out);
        }
        break;
      case OpKind::elementwise:
        if (op.elt == EltClass::dropout && (op.dropout <= 0 || !o.training_dropout)) {
          if (grad) --out.nodes;  // a no-op: the module returns its input
          break;
        }
        expand_elt(op, op.per_batch ? op.elems : op.elems * b, out, grad);
        break;
      case OpKind::embedding:
        expand_embedding(op, b, out);
        break;
    }
  }
  return out;
}

std::vector<OpSpec> generic_ops(double forward_flops, int64_t params, double traffic_elems) {
  std::vector<OpSpec> ops;
  if (forward_flops > 0) {
    // A weight GEMM with the layer's parameters as an n x n matrix and as many rows as make its
    // FLOPs: 2 rows n^2 = FLOPs.
    const auto n = static_cast<int64_t>(std::max(1.0, std::round(std::sqrt(d(params)))));
    ops.push_back(linear_op("gemm", forward_flops / (2.0 * d(n) * d(n)), n, n, false));
    ops.back().param_tensors = params > 0 ? 1 : 0;
  }
  if (traffic_elems > 0) ops.push_back(elt_op("elementwise", EltClass::copy, traffic_elems / 2));
  return ops;
}

}  // namespace pipetwin::zoo
