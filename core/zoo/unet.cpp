// U-Net(B, C) as torchgpipe benchmarks it (Kim et al. 2020, Section 4.2.2): `unet:B=5,C=64`.
//
// The paper states: "five down-sampling layers and five up-sampling layers, and two
// hyper-parameters B and C determining the size of the model. Here B stands for the number of
// convolution blocks in between down-sampling layers, and C stands for the number of output
// channels of the first convolution. Channels are doubled after each down-sampling layers (or
// halved after each up-sampling layers, respectively)"; input 3 x 192 x 192, output 1 x 192 x 192;
// "rather symmetric than the original model [Ronneberger et al.]".
//
// It does not spell out the channels of every convolution. We chose the layout below because it
// reproduces all five parameter counts of its Table 3 (362.2M for (6, 72) ... 15.82B for
// (48, 160)) to the digits printed (tests/zoo_test.cpp); the obvious alternatives (a decoder that
// mirrors the encoder, five decoder levels of C*2^i channels) miss them by 18% or more. With
// c_i = C * 2^i, every convolution block is a bias-free 3x3 convolution, BatchNorm and ReLU:
//   encoder level i = 0..4:  3 (i = 0) or c_{i-1} -> c_i, then B-1 blocks c_i -> c_i; the
//                            output is stashed for the skip; 2x2 max-pool
//   bottleneck:              c_4 -> c_5, B-2 blocks c_5 -> c_5, c_5 -> c_4; 2x up-sampling
//   decoder level i = 4..0:  concat(up-sampled, skip_i) = 2 c_i = c_{i+1} channels -> c_{i-1},
//                            then B-1 blocks c_{i-1} -> c_{i-1}; 2x up-sampling (not after i=0)
//   segment:                 1x1 convolution C/2 -> output channels, no bias
// Layers are the convolution blocks ("enc{i}.conv{j}", "bottleneck.conv{j}", "dec{i}.conv{j}",
// kind "conv") and "segment" (kind "head"); the max-pool belongs to the block after it, the
// up-sampling and concatenation to the decoder block that consumes them. Skip edges run from
// enc{i}.conv{B-1} to dec{i}.conv0 (torchgpipe's portals carry them, Section 3.3.1). Options:
// B= (>= 2), C= (even), image= (192, a multiple of 32), channels= (3), out= (1),
// norm=batch|group (the executor's model, models/unet.hpp, offers GroupNorm for exact
// micro-batching; the parameter count is the same).
//
// Thread-safety: pure functions.
#include "core/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

constexpr int kLevels = 5;

double d(int64_t v) {
  return static_cast<double>(v);
}

struct Builder {
  ZooModel& m;
  int64_t size;  // image side at level 0

  int64_t side(int level) const { return size >> level; }

  // One conv-BN-ReLU block at `level`; `extra_saved` / `input` cover a max-pool or a concat.
  void block(const std::string& name, int level, int64_t c_in, int64_t c_out, double extra_saved,
             double input) {
    LayerAcc acc;
    const ConvShape c{c_in, c_out, 3, 0, side(level), side(level), 1};
    acc.conv_bn(c, true);
    acc.saved += extra_saved;
    if (m.num_layers() > 0) {
      const int from = m.num_layers() - 1;
      m.edges.push_back({from, from + 1, m.layers.back().output_elems, false});
    }
    m.layers.push_back(make_layer(name, "conv", acc, input, c.out_elems()));
  }
};

}  // namespace

ZooModel describe_unet(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"B", "C", "image", "channels", "out", "norm"});
  const std::string norm = spec.has("norm") ? spec.args.at("norm") : "batch";
  if (norm != "batch" && norm != "group") {
    throw InputError(fmt::format("{}: unet: option norm must be batch or group (\"{}\" given)",
                                 spec.origin, norm));
  }
  const int64_t B = int_option(spec, "B", 5, 2), C = int_option(spec, "C", 64, 2);
  const int64_t image = int_option(spec, "image", 192);
  const int64_t in_ch = int_option(spec, "channels", 3), out_ch = int_option(spec, "out", 1);
  require_multiple(spec, "C", C, "2", 2);
  require_multiple(spec, "image", image, "2^5", 32);
  ZooModel m;
  m.description = fmt::format("U-Net(B={}, C={}) as torchgpipe benchmarks it, input {} x {} x {}",
                              B, C, in_ch, image, image);
  m.input_elems = d(in_ch * image * image);
  Builder b{m, image};
  auto c = [C](int i) { return i < 0 ? C / 2 : C << i; };
  auto area = [&](int level) { return d(b.side(level) * b.side(level)); };
  std::vector<int> skip_from(kLevels);
  for (int i = 0; i < kLevels; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      const int64_t c_in = j > 0 ? c(i) : (i == 0 ? in_ch : c(i - 1));
      // The first block of a lower level max-pools its input and keeps the pooling indices.
      const double pooled = (j == 0 && i > 0) ? d(c_in) * area(i) : 0;
      const double input =
          j == 0 ? (i == 0 ? m.input_elems : d(c_in) * area(i - 1)) : d(c_in) * area(i);
      b.block(fmt::format("enc{}.conv{}", i, j), i, c_in, c(i), pooled, input);
    }
    skip_from[static_cast<size_t>(i)] = m.num_layers() - 1;
  }
  for (int64_t j = 0; j < B; ++j) {
    const int64_t c_in = j == 0 ? c(kLevels - 1) : c(kLevels);
    const int64_t c_out = j + 1 == B ? c(kLevels - 1) : c(kLevels);
    const double pooled = j == 0 ? d(c_in) * area(kLevels) : 0;
    const double input = j == 0 ? d(c_in) * area(kLevels - 1) : d(c_in) * area(kLevels);
    b.block(fmt::format("bottleneck.conv{}", j), kLevels, c_in, c_out, pooled, input);
  }
  for (int i = kLevels - 1; i >= 0; --i) {
    for (int64_t j = 0; j < B; ++j) {
      const int64_t c_in = j == 0 ? c(i + 1) : c(i - 1);
      // The first block up-samples its input, concatenates the skip and keeps the concatenation.
      const double concat = j == 0 ? d(c_in) * area(i) : 0;
      const double input = j == 0 ? d(c(i)) * area(i + 1) + d(c(i)) * area(i) : d(c_in) * area(i);
      b.block(fmt::format("dec{}.conv{}", i, j), i, c_in, c(i - 1), concat, input);
      if (j == 0) {
        const int from = skip_from[static_cast<size_t>(i)];
        m.edges.push_back(
            {from, m.num_layers() - 1, m.layers[static_cast<size_t>(from)].output_elems, false});
      }
    }
  }
  LayerAcc seg;  // 1x1 convolution, then a per-pixel loss
  seg.params = c(-1) * out_ch;
  seg.flops = 2.0 * d(seg.params) * area(0);
  seg.saved = 2 * d(out_ch) * area(0);
  m.edges.push_back({m.num_layers() - 1, m.num_layers(), m.layers.back().output_elems, false});
  m.layers.push_back(make_layer("segment", "head", seg, d(c(-1)) * area(0), d(out_ch) * area(0)));
  return m;
}

}  // namespace pipetwin::zoo
