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
// micro-batching; the parameter count is the same). The config, its parser and the block list
// (unet_blocks) are profiles/zoo/configs.hpp's, which models/unet.hpp builds from.
//
// Thread-safety: pure functions.
#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

double d(int64_t v) {
  return static_cast<double>(v);
}

// c_i = C * 2^i; c_{-1} = C / 2.
int64_t level_channels(const UNetConfig& c, int i) {
  return i < 0 ? c.channels / 2 : c.channels << i;
}

}  // namespace

UNetConfig unet_config(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"B", "C", "image", "channels", "out", "norm"});
  UNetConfig c;
  c.group_norm = group_norm_option(spec);
  c.blocks = int_option(spec, "B", c.blocks, 2);
  c.channels = int_option(spec, "C", c.channels, 2);
  c.image = int_option(spec, "image", c.image);
  c.in_channels = int_option(spec, "channels", c.in_channels);
  c.out_channels = int_option(spec, "out", c.out_channels);
  require_multiple(spec, "C", c.channels, "2", 2);
  require_multiple(spec, "image", c.image, "2^5", int64_t{1} << kUNetLevels);
  return c;
}

int64_t unet_segment_channels(const UNetConfig& c) {
  return level_channels(c, -1);
}

std::vector<UNetBlock> unet_blocks(const UNetConfig& c) {
  const int64_t B = c.blocks;
  auto ch = [&c](int i) { return level_channels(c, i); };
  std::vector<UNetBlock> blocks;
  std::vector<int> skip_from(kUNetLevels);  // per level: the encoder's last block
  for (int i = 0; i < kUNetLevels; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      const int64_t in = j > 0 ? ch(i) : (i == 0 ? c.in_channels : ch(i - 1));
      blocks.push_back({fmt::format("enc{}.conv{}", i, j), i, in, ch(i), j == 0 && i > 0, -1});
    }
    skip_from[static_cast<size_t>(i)] = static_cast<int>(blocks.size()) - 1;
  }
  for (int64_t j = 0; j < B; ++j) {
    const int64_t in = j == 0 ? ch(kUNetLevels - 1) : ch(kUNetLevels);
    const int64_t out = j + 1 == B ? ch(kUNetLevels - 1) : ch(kUNetLevels);
    blocks.push_back({fmt::format("bottleneck.conv{}", j), kUNetLevels, in, out, j == 0, -1});
  }
  for (int i = kUNetLevels - 1; i >= 0; --i) {
    for (int64_t j = 0; j < B; ++j) {
      const int skip = j == 0 ? skip_from[static_cast<size_t>(i)] : -1;
      blocks.push_back({fmt::format("dec{}.conv{}", i, j), i, j == 0 ? ch(i + 1) : ch(i - 1),
                        ch(i - 1), false, skip});
    }
  }
  return blocks;
}

ZooModel describe_unet(const UNetConfig& c) {
  ZooModel m;
  m.description = fmt::format("U-Net(B={}, C={}) as torchgpipe benchmarks it, input {} x {} x {}",
                              c.blocks, c.channels, c.in_channels, c.image, c.image);
  m.input_elems = d(c.in_channels * c.image * c.image);
  auto side = [&c](int level) { return c.image >> level; };
  auto area = [&](int level) { return d(side(level) * side(level)); };
  for (const auto& b : unet_blocks(c)) {
    LayerAcc acc;
    const ConvShape conv{b.in, b.out, 3, 0, side(b.level), side(b.level), 1};
    acc.conv_bn(conv, true);
    double input = d(b.in) * area(b.level);
    if (b.pool) {  // max-pools its input and keeps the pooling indices
      acc.saved += d(b.in) * area(b.level);
      input = d(b.in) * area(b.level - 1);
      acc.ops.insert(acc.ops.begin(), elt_op("maxpool", EltClass::pool, input));
    } else if (b.skip >= 0) {  // up-samples its input, concatenates the skip, keeps the concat
      acc.saved += d(b.in) * area(b.level);
      input = d(b.in / 2) * area(b.level + 1) + d(b.in / 2) * area(b.level);
      acc.ops.insert(acc.ops.begin(),
                     {elt_op("upsample", EltClass::copy, d(b.in / 2) * area(b.level)),
                      elt_op("concat", EltClass::copy, d(b.in) * area(b.level))});
    }
    if (m.num_layers() > 0) {
      const int from = m.num_layers() - 1;
      m.edges.push_back({from, from + 1, m.layers.back().output_elems, false});
    }
    m.layers.push_back(make_layer(b.name, "conv", acc, input, conv.out_elems()));
    if (b.skip >= 0) {
      const double elems = m.layers[static_cast<size_t>(b.skip)].output_elems;
      m.edges.push_back({b.skip, m.num_layers() - 1, elems, false});
    }
  }
  LayerAcc seg;  // 1x1 convolution, then a per-pixel loss
  seg.params = unet_segment_channels(c) * c.out_channels;
  seg.flops = 2.0 * d(seg.params) * area(0);
  seg.saved = 2 * d(c.out_channels) * area(0);
  const double out = d(c.out_channels) * area(0);  // then the squared error against the target
  seg.ops = {
      conv_op("segment", unet_segment_channels(c), c.out_channels, 1, c.image, c.image, 1, 0),
      elt_op("loss.diff", EltClass::add, out), elt_op("loss.mean", EltClass::reduce, out)};
  m.edges.push_back({m.num_layers() - 1, m.num_layers(), m.layers.back().output_elems, false});
  m.layers.push_back(make_layer("segment", "head", seg, d(unet_segment_channels(c)) * area(0),
                                d(c.out_channels) * area(0)));
  return m;
}

}  // namespace pipetwin::zoo
