// The operations a zoo layer launches: its forward as a list of operations per sample (GEMMs with
// their shapes, convolutions, attention, element-wise and normalisation ops, embedding gathers,
// the loss), and the kernels each pass of the layer runs at micro-batch size b: the forward (the
// recompute is the forward again), the backward's input half and weight half, and the optimizer
// step. profiles/zoo/op_cost.hpp prices the kernels per device and dtype.
//
// The family descriptors (transformer.cpp, convnets.cpp, unet.cpp, vgg.cpp, t5.cpp) fill
// ZooLayer::ops with what the executor's LibTorch modules (models/) call, operator for operator;
// a layer without ops (AmoebaNet's cells) is priced from its FLOPs and traffic as one GEMM-shaped
// kernel and one element-wise pass (generic_ops below).
//
// Backward rules (autograd's derivative formulas, tools/autograd/derivatives.yaml in PyTorch):
//   GEMM  Y[M,N] = X[M,K] W[N,K]^T   input half  dX[M,K] = dY W         (M x K x N)
//                                    weight half dW[N,K] = dY^T X       (N x K x M), the bias's
//                                                gradient a reduction of dY (M x N read)
//         A product of two activations (attention's Q K^T and P V) has both gradients in the
//         input half. The first layer computes no input gradient (a stage's first layer reads the
//         model input), so its weight GEMMs have no dX.
//   conv  input half  dgrad (the convolution's transpose), and the weight gradient (wgrad) too:
//         the executor defers only Linear weight gradients (models/split_linear.hpp), so a
//         convolution's wgrad runs with the input half, as the profiler measures it.
//   attention  fused (flash-style, Dao 2023): one forward kernel and one backward kernel that
//         recomputes the scores; unfused: Q K^T, scale, causal mask, softmax, dropout, P V, each a
//         kernel forward and backward (models/layers.cpp AttentionImpl::attend), with the copies
//         that make q, k, v and the context contiguous.
//   element-wise  each class (EltClass) reads and writes a fixed number of elements per element
//         forward and backward (kEltTraffic in ops.cpp).
//   embedding  a gather forward; backward a zero-filled table gradient and a scatter-add of the
//         rows (embedding_dense_backward): the table size matters, not only the tokens.
// Autograd nodes: every forward op that takes part in the gradient is one node of the backward
// graph, whose engine costs host time per node (op_cost.hpp, host_node_s).
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipetwin::zoo {

enum class OpKind { gemm, conv, attention, elementwise, embedding };

// Element-wise and normalisation classes; their traffic per element is kEltTraffic's.
enum class EltClass {
  copy,         // a contiguous copy (transpose, reshape of a permuted view, concatenation)
  fill,         // zero fill: writes only
  add,          // x + y (residual); backward passes the gradient on without a kernel
  add_bcast,    // x + p with p broadcast (position embedding, bias): backward reduces into p
  reduce,       // a sum over rows (a bias's gradient, a mean pool): reads only
  relu,         // max(x, 0) and its threshold backward
  gelu,         // erf GELU
  gelu_tanh,    // GELU's tanh approximation (GPT-2): another kernel, much slower on some CPUs
  tanh,         // tanh (BERT's pooler)
  scale,        // multiply by a constant (the 1/sqrt(d) of attention scores)
  mask,         // masked_fill (the causal mask)
  softmax,      // softmax over the last dimension
  log_softmax,  // the loss's log-softmax
  layer_norm,   // LayerNorm / RMSNorm with its weight gradients
  batch_norm,   // BatchNorm in training (statistics, then normalise) with its weight gradients
  dropout,      // the executor's keyed dropout (models/dropout.hpp)
  pool,         // max-pool over windows, keeping the indices
  gather,       // embedding rows gathered by token id
  scatter_add,  // embedding gradient rows added into the table's gradient
  select,       // picks one token (a view); backward zero-fills the input's gradient
  nll,          // the loss's pick of the target's log-probability; backward zero-fills
};
const char* elt_name(EltClass c);
std::vector<EltClass> all_elt_classes();

// One operation of a layer's forward, per sample (see the factory functions below).
struct OpSpec {
  OpKind kind = OpKind::elementwise;
  std::string name;
  // gemm: `groups` products per sample of [rows x k] by [k x n] (rows scale with the micro-batch
  // when groups == 1: a Linear over b x s tokens is one GEMM of M = b s; a batched product of
  // `groups` per sample has groups x b products of M = rows).
  double groups = 1, rows = 0;
  int64_t n = 0, k = 0;
  bool weight = false;  // [k x n] is a parameter: its gradient is the weight half
  bool bias = false;
  // conv: c_in x h x w -> c_out x oh x ow with a kh x kw kernel at `stride`.
  int64_t c_in = 0, c_out = 0, kh = 0, kw = 0, h = 0, w = 0, oh = 0, ow = 0, stride = 1;
  // attention (scaled dot-product): heads, query and key lengths, head dimension.
  int64_t heads = 0, seq = 0, kv_seq = 0, head_dim = 0;
  bool causal = false;
  double dropout = 0;
  // elementwise: `elems` output elements per sample of class `elt`; fp32: runs in float32 under
  // autocast (norms, softmax, the residual stream, the loss).
  EltClass elt = EltClass::copy;
  double elems = 0;
  bool fp32 = false;
  bool per_batch = false;  // elems per micro-batch, not per sample (a mask over s x s)
  // embedding: `elems` tokens per sample gathered as rows of width `n` from a table of `k` rows.
  int param_tensors = 0;  // parameter tensors the op owns (the optimizer's per-tensor work)
  bool grad = true;       // false: no gradient flows through it (it reads only the input)
};

OpSpec linear_op(std::string name, double rows, int64_t in, int64_t out, bool bias = true);
OpSpec bmm_op(std::string name, double groups, int64_t rows, int64_t n, int64_t k);
OpSpec conv_op(std::string name, int64_t c_in, int64_t c_out, int64_t kernel, int64_t h, int64_t w,
               int64_t stride, int64_t pad, bool bias = false);
OpSpec attention_op(std::string name, int64_t heads, int64_t seq, int64_t kv_seq, int64_t head_dim,
                    bool causal, double dropout);
OpSpec elt_op(std::string name, EltClass c, double elems, bool fp32 = false, int params = 0);
OpSpec embedding_op(std::string name, double tokens, int64_t dim, int64_t table_rows);

// ---- kernels at a micro-batch size ------------------------------------------------------------

enum class ConvPass { forward, dgrad, wgrad };

// One kernel (or library call) of a pass: what op_cost.hpp prices.
struct Kernel {
  OpKind kind = OpKind::elementwise;
  std::string name;                       // "qkv", "qkv.dX", "qkv.dW", "softmax.bwd", ...
  double batch = 1, m = 0, n = 0, k = 0;  // gemm: batch x [m x k] [k x n]
  // conv: the op's shape at batch `batch`, and which of its three products this is.
  OpSpec conv;
  ConvPass conv_pass = ConvPass::forward;
  // attention (fused): FLOPs and bytes at 100% efficiency (element count of q, k, v, o, do, ...)
  double flops = 0;
  // elementwise / embedding: output elements, elements read and written, its class.
  double elems = 0, reads = 0, writes = 0;
  EltClass elt = EltClass::copy;
  bool fp32 = false;
  bool backward = false;  // a backward kernel (the class's backward throughput)
};

struct LayerKernels {
  std::vector<Kernel> forward, input_half, weight_half;
  int nodes = 0;          // autograd nodes of the forward (host cost in the backward)
  int param_tensors = 0;  // parameter tensors the optimizer step updates
};

struct ExpandOptions {
  bool fused_attention = false;  // the device's framework runs a fused attention kernel
  bool first_layer = false;      // computes no input gradient
  bool training_dropout = true;  // dropout ops are active (p > 0)
};

// The kernels of `ops` at micro-batch size b (b >= 1).
LayerKernels expand_ops(const std::vector<OpSpec>& ops, int b, const ExpandOptions& options);

// A layer priced from its FLOPs and traffic alone (descriptors without ops): one weight GEMM of
// the layer's FLOPs (square in its parameters) and one element-wise pass over its traffic.
std::vector<OpSpec> generic_ops(double forward_flops, int64_t params, double traffic_elems);

}  // namespace pipetwin::zoo
