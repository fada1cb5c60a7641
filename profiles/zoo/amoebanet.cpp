// AmoebaNet-D(L, F) (Real et al., "Regularized Evolution for Image Classifier Architecture
// Search", AAAI 2019) as GPipe and torchgpipe train it: `amoebanet:L=18,F=256`.
//
// What the papers here state (torchgpipe Section 4.2.1): AmoebaNet-D (18, 256), "a sequential
// version of AmoebaNet-D in PyTorch", "as close as possible to the model in the official
// repository of TensorFlow", inputs 3 x 224 x 224. They give no parameter count for it, and no
// cell genotype. This descriptor follows the structure of torchgpipe's sequential AmoebaNet-D
// as we read it (its benchmarks/models/amoebanet); checked against the parameter counts of
// GPipe's Table 1 (Huang et al. 2019, torchgpipe's [11]): (18, 208) 82M, (18, 416) 318M,
// (18, 544) 542M, (36, 544) 1.05B, which it gives within 1% (81.5M, 319.0M, 542.7M, 1055.8M;
// tests/zoo_test.cpp). AmoebaNet-D(18, 256) has 122.5M parameters here.
//   "stem1"                    3x3/2 convolution 3 -> F/4, BatchNorm              kind "conv"
//   "stem2", "stem3"           reduction cells at F/2 and F                       kind "cell"
//   "cell1_normal{1..L/3}"     normal cells at F (output 4F channels)            kind "cell"
//   "cell2_reduction"          reduction cell at 2F                               kind "cell"
//   "cell3_normal{1..L/3}"     normal cells at 2F                                 kind "cell"
//   "cell4_reduction"          reduction cell at 4F                               kind "cell"
//   "cell5_normal{1..L/3}"     normal cells at 4F                                 kind "cell"
//   "classify"                 global average pool, Linear(16F -> classes)        kind "head"
// A cell reads the outputs of the two cells before it (edges k-1 -> k and k-2 -> k), brings
// both to its channel count c with ReLU-1x1 conv-BN (a factorized reduction when the older one
// is at twice the resolution), and adds five pairs of ops; a normal cell concatenates states
// {0, 3, 4, 6} (4c channels), a reduction cell states {4, 5, 6} (3c), halving the resolution.
// Ops: conv_1x1 = ReLU-conv1x1-BN; conv_3x3 and conv_1x7_7x1 are bottlenecks (1x1 to c/4, the
// 3x3 or 1x7 then 7x1 convolutions at c/4, 1x1 back to c, ReLU-conv-BN each); pools have no
// parameters; "none" is the identity (a factorized reduction where it strides). The op list of
// the two genotypes below is the one place to correct if a reader finds it differs.
// Options: L= (a multiple of 3), F= (a multiple of 8), image= (224), classes= (1000).
//
// Thread-safety: pure functions.
#include <array>

#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

enum class Op { kNone, kAvg3, kMax3, kMax2, kConv1, kConv3, kConv17 };

struct Gene {
  int input;  // state index: 0, 1 the cell inputs, 2.. the new states
  Op op;
};

// Five new states, each the sum of two ops.
constexpr std::array<Gene, 10> kNormal = {{{1, Op::kConv1},
                                           {1, Op::kMax3},
                                           {1, Op::kNone},
                                           {0, Op::kConv17},
                                           {0, Op::kConv1},
                                           {0, Op::kConv17},
                                           {2, Op::kMax3},
                                           {2, Op::kNone},
                                           {1, Op::kAvg3},
                                           {5, Op::kConv1}}};
constexpr std::array<int, 4> kNormalConcat = {0, 3, 4, 6};
constexpr std::array<Gene, 10> kReduction = {{{0, Op::kMax2},
                                              {0, Op::kMax3},
                                              {2, Op::kNone},
                                              {1, Op::kConv3},
                                              {2, Op::kConv17},
                                              {2, Op::kMax3},
                                              {3, Op::kNone},
                                              {1, Op::kMax2},
                                              {2, Op::kAvg3},
                                              {3, Op::kConv1}}};
constexpr std::array<int, 3> kReductionConcat = {4, 5, 6};

double d(int64_t v) {
  return static_cast<double>(v);
}

// ReLU (keeps its output, the conv's input), convolution, BatchNorm (keeps the conv output).
// Returns the output side (square feature maps; a 1x7 / 7x1 pair strides once overall).
int64_t relu_conv_bn(LayerAcc& acc, int64_t c_in, int64_t c_out, int64_t kh, int64_t kw,
                     int64_t side, int64_t stride) {
  const ConvShape c{c_in, c_out, kh, kw, side, side, stride};
  acc.params += c.params() + 2 * c_out;
  acc.flops += c.flops();
  acc.saved += d(c_in * side * side) + c.out_elems();
  return c.out_h();
}

void factorized_reduce(LayerAcc& acc, int64_t c_in, int64_t c_out, int64_t side) {
  // ReLU, two 1x1/2 convolutions to c_out/2 each (the second offset by one pixel), concat, BN.
  const ConvShape half{c_in, c_out / 2, 1, 0, side, side, 2};
  acc.params += 2 * half.params() + 2 * c_out;
  acc.flops += 2 * half.flops();
  acc.saved += d(c_in * side * side) + 2 * half.out_elems();
}

void apply(LayerAcc& acc, Op op, int64_t c, int64_t side, int64_t stride) {
  const int64_t q = c / 4, out = (side + stride - 1) / stride;
  switch (op) {
    case Op::kNone:
      if (stride > 1) factorized_reduce(acc, c, c, side);
      break;
    case Op::kAvg3:
      break;  // no parameters; backward needs only the shape
    case Op::kMax3:
    case Op::kMax2:
      acc.saved += d(c * out * out);  // indices
      break;
    case Op::kConv1:
      relu_conv_bn(acc, c, c, 1, 0, side, stride);
      break;
    case Op::kConv3:
      relu_conv_bn(acc, c, q, 1, 0, side, 1);
      relu_conv_bn(acc, q, q, 3, 0, side, stride);
      relu_conv_bn(acc, q, c, 1, 0, out, 1);
      break;
    case Op::kConv17:
      relu_conv_bn(acc, c, q, 1, 0, side, 1);
      relu_conv_bn(acc, q, q, 1, 7, side, 1);
      relu_conv_bn(acc, q, q, 7, 1, side, stride);
      relu_conv_bn(acc, q, c, 1, 0, out, 1);
      break;
  }
}

struct CellInput {
  int64_t channels, side;
};

// One cell: inputs s0 (older) and s1, cell channel count c. Returns its output.
CellInput cell(ZooModel& m, const std::string& name, CellInput s0, CellInput s1, int64_t c,
               bool reduction) {
  LayerAcc acc;
  if (s0.side != s1.side) {
    factorized_reduce(acc, s0.channels, c, s0.side);
  } else {
    relu_conv_bn(acc, s0.channels, c, 1, 0, s0.side, 1);
  }
  relu_conv_bn(acc, s1.channels, c, 1, 0, s1.side, 1);
  const auto& genes = reduction ? kReduction : kNormal;
  const int64_t side = reduction ? (s1.side + 1) / 2 : s1.side;
  for (const Gene& g : genes) {
    // A reduction cell strides the ops on its inputs; new states are already reduced.
    const bool strided = reduction && g.input < 2;
    apply(acc, g.op, c, strided ? s1.side : side, strided ? 2 : 1);
  }
  const int64_t concat = reduction ? static_cast<int64_t>(kReductionConcat.size())
                                   : static_cast<int64_t>(kNormalConcat.size());
  const double out = d(concat * c * side * side);
  acc.saved += out;  // the concatenation is the output
  const int k = m.num_layers();
  m.edges.push_back({k - 1, k, m.layers.back().output_elems, false});
  double input = m.layers.back().output_elems;
  if (k >= 2) {
    m.edges.push_back({k - 2, k, m.layers[static_cast<size_t>(k - 2)].output_elems, false});
    input += m.layers[static_cast<size_t>(k - 2)].output_elems;
  }
  m.layers.push_back(make_layer(name, "cell", acc, input, out));
  return {concat * c, side};
}

}  // namespace

ZooModel describe_amoebanet(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"L", "F", "image", "classes"});
  const int64_t L = int_option(spec, "L", 18), F = int_option(spec, "F", 256);
  const int64_t image = int_option(spec, "image", 224), classes = int_option(spec, "classes", 1000);
  require_multiple(spec, "L", L, "3", 3);
  require_multiple(spec, "F", F, "8", 8);
  ZooModel m;
  m.description =
      fmt::format("AmoebaNet-D(L={}, F={}) as torchgpipe / GPipe train it, input 3 x {} x {}", L, F,
                  image, image);
  m.input_elems = d(3 * image * image);
  LayerAcc stem;
  const ConvShape s{3, F / 4, 3, 0, image, image, 2};
  stem.params = s.params() + 2 * (F / 4);
  stem.flops = s.flops();
  stem.saved = 2 * s.out_elems();  // BatchNorm's input, and the output
  stem.ops = {conv_op("conv", 3, F / 4, 3, image, image, 2, 1),
              elt_op("bn", EltClass::batch_norm, s.out_elems(), false, 2)};
  m.layers.push_back(make_layer("stem1", "conv", stem, m.input_elems, s.out_elems()));
  CellInput prev_prev{F / 4, s.out_h()}, prev = prev_prev;
  int64_t c = F / 4;
  auto next = [&](const std::string& name, bool reduction) {
    if (reduction) c *= 2;
    const CellInput out = cell(m, name, prev_prev, prev, c, reduction);
    prev_prev = prev;
    prev = out;
  };
  next("stem2", true);
  next("stem3", true);
  for (int64_t i = 0; i < L / 3; ++i) next(fmt::format("cell1_normal{}", i + 1), false);
  next("cell2_reduction", true);
  for (int64_t i = 0; i < L / 3; ++i) next(fmt::format("cell3_normal{}", i + 1), false);
  next("cell4_reduction", true);
  for (int64_t i = 0; i < L / 3; ++i) next(fmt::format("cell5_normal{}", i + 1), false);
  LayerAcc head;
  head.params = prev.channels * classes + classes;
  head.flops = 2.0 * d(prev.channels * classes);
  head.saved = d(prev.channels) + d(classes);
  head.ops = {elt_op("pool", EltClass::reduce, m.layers.back().output_elems),
              linear_op("fc", 1, prev.channels, classes)};
  add_loss_ops(head.ops, 1, classes);
  const int k = m.num_layers();
  m.edges.push_back({k - 1, k, m.layers.back().output_elems, false});
  m.layers.push_back(
      make_layer("classify", "head", head, m.layers.back().output_elems, d(classes)));
  return m;
}

}  // namespace pipetwin::zoo
