// ResNets (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016) and the MLP.
//
// The configs, parsers and block layouts (resnet_blocks) are profiles/zoo/configs.hpp's, the ones
// models/resnet.hpp and models/mlp.hpp build from, so both zoos have the same layers.
// CIFAR ResNets (Section 4.2): `resnet20`, `resnet32`, ..., `resnet:depth=6n+2` (option-A
// shortcuts, 16/32/64 channels, "stem", "block{i}", "head"), with the options classes=,
// channels=, image=, norm=batch|group.
// ImageNet ResNets (Table 1): `resnet:50`, `resnet:101`, `resnet:152`: 7x7/2 stem with 3x3/2
// max-pool ("stem", kind "conv"), bottleneck blocks 1x1-3x3-1x1 with the stride on the 3x3 and a
// 1x1 projection shortcut where the shape changes ("block{i}", kind "residual", as torchvision's
// v1.5), global average pool and Linear(2048 -> classes) ("head"). Options image= (224),
// classes= (1000), width= (64: the stem's channels and stage 1's bottleneck width; the other
// widths scale with it, so width=8 is a test size). 25.6M / 44.5M / 60.2M parameters.
// MLP: `mlp[:layers=4,width=256,input=64,classes=10,skip=0]`: "fc{i}" Linear + ReLU
// (kind "linear") and "head" Linear (kind "head"); with skip=1 (layers >= 2) the head takes a
// skip connection from fc0 and applies its Linear to the sum of its two inputs (the model
// python/pipetwin_trace.py's SkipMLP is).
//
// Saved elements follow LibTorch autograd: BatchNorm keeps its input (the conv output), ReLU
// its output; per-micro-batch BatchNorm statistics are left out (they do not scale with b).
//
// Thread-safety: pure functions.
#include <algorithm>

#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

double d(int64_t v) {
  return static_cast<double>(v);
}

ZooLayer classifier_head(int64_t features, int64_t classes, double input_elems) {
  LayerAcc acc;  // global average pool, Linear(features -> classes), the loss
  acc.params = features * classes + classes;
  acc.flops = 2.0 * d(features * classes);
  acc.saved = d(features) + d(classes);
  acc.ops = {elt_op("pool", EltClass::reduce, input_elems), linear_op("fc", 1, features, classes)};
  add_loss_ops(acc.ops, 1, classes);
  return make_layer("head", "head", acc, input_elems, d(classes));
}

// The tail of a residual block: the shortcut (a copy when it pads or projects), the add.
void residual_tail(LayerAcc& b, double out_elems, bool padded_shortcut) {
  if (padded_shortcut) b.ops.push_back(elt_op("shortcut", EltClass::copy, out_elems));
  b.ops.push_back(elt_op("residual", EltClass::add, out_elems));
}

ResNetConfig imagenet_config(const ModelSpec& spec) {
  spec.allow_only({"image", "classes", "width"});
  ResNetConfig c = choose_preset(spec, resnet_presets(), "");
  c.image = int_option(spec, "image", c.image);
  c.classes = int_option(spec, "classes", c.classes);
  c.width = int_option(spec, "width", c.width);
  return c;
}

ResNetConfig cifar_config(const ModelSpec& spec) {
  reject_presets(spec);
  ResNetConfig c;
  if (spec.family == "resnet") {
    spec.allow_only({"depth", "classes", "channels", "image", "norm"});
    c.depth = int_option(spec, "depth", c.depth);
  } else {
    spec.allow_only({"classes", "channels", "image", "norm"});
    c.depth = std::stol(spec.family.substr(6));  // the zoo only routes "resnet<digits>" here
  }
  if (c.depth < 8 || (c.depth - 2) % 6 != 0) {
    throw InputError(fmt::format("{}: {}: depth must be 6n + 2 with n >= 1 ({} given)", spec.origin,
                                 spec.family, c.depth));
  }
  c.classes = int_option(spec, "classes", c.classes);
  c.channels = int_option(spec, "channels", c.channels);
  c.image = int_option(spec, "image", c.image);
  c.group_norm = group_norm_option(spec);
  return c;
}

// ---- CIFAR ----------------------------------------------------------------------------------

ZooModel describe_cifar_resnet(const ResNetConfig& c) {
  // GroupNorm (8 groups) keeps a mean and an rstd per group and sample.
  const double group_stats = c.group_norm ? 2.0 * kResNetGroups : 0;
  ZooModel m;
  m.description = fmt::format("ResNet-{} for CIFAR (He et al. 2016, Section 4.2), {} norm", c.depth,
                              c.group_norm ? "group" : "batch");
  m.input_elems = d(c.channels * c.image * c.image);
  LayerAcc stem;
  const ConvShape s{c.channels, resnet_stem_width(c), 3, 0, c.image, c.image, 1};
  stem.conv_bn(s, true);
  stem.saved += group_stats;
  m.layers.push_back(make_layer("stem", "conv", stem, m.input_elems, s.out_elems()));
  int64_t in = s.c_out, h = c.image;
  for (const auto& blk : resnet_blocks(c)) {
    LayerAcc b;
    const ConvShape c1{blk.in, blk.out, 3, 0, h, h, blk.stride};
    const ConvShape c2{blk.out, blk.out, 3, 0, c1.out_h(), c1.out_w(), 1};
    b.conv_bn(c1, true, "conv1");
    b.conv_bn(c2, true, "conv2");  // BatchNorm keeps conv2's output; the ReLU after the add its own
    b.saved += 2 * group_stats;
    residual_tail(b, c2.out_elems(), blk.stride != 1 || blk.in != blk.out);
    m.layers.push_back(make_layer(blk.name, "residual", b, d(blk.in * h * h), c2.out_elems()));
    in = blk.out;
    h = c1.out_h();
  }
  m.layers.push_back(classifier_head(in, c.classes, d(in * h * h)));
  return m;
}

// ---- ImageNet -------------------------------------------------------------------------------

ZooModel describe_imagenet_resnet(const ResNetConfig& c) {
  ZooModel m;
  m.description = fmt::format("ResNet-{} for ImageNet (He et al. 2016, Table 1){}", c.depth,
                              c.width == 64 ? "" : fmt::format(", base width {}", c.width));
  m.input_elems = d(c.channels * c.image * c.image);
  const int64_t w = resnet_stem_width(c);
  LayerAcc stem;
  const ConvShape s{c.channels, w, 7, 0, c.image, c.image, 2};
  stem.conv_bn(s, true);
  stem.ops.push_back(elt_op("maxpool", EltClass::pool, s.out_elems()));
  int64_t h = (s.out_h() + 1) / 2;  // 3x3/2 max-pool, padding 1
  stem.saved += d(w * h * h);       // its indices
  m.layers.push_back(make_layer("stem", "conv", stem, m.input_elems, d(w * h * h)));
  int64_t in = w;
  for (const auto& blk : resnet_blocks(c)) {
    LayerAcc b;
    const ConvShape c1{blk.in, blk.mid, 1, 0, h, h, 1};
    const ConvShape c2{blk.mid, blk.mid, 3, 0, h, h, blk.stride};
    const ConvShape c3{blk.mid, blk.out, 1, 0, c2.out_h(), c2.out_w(), 1};
    b.conv_bn(c1, true, "conv1");
    b.conv_bn(c2, true, "conv2");
    b.conv_bn(c3, true, "conv3");  // BatchNorm keeps conv3's output; the ReLU after the add its own
    if (blk.project) b.conv_bn({blk.in, blk.out, 1, 0, h, h, blk.stride}, false, "proj");
    residual_tail(b, c3.out_elems(), false);
    m.layers.push_back(make_layer(blk.name, "residual", b, d(blk.in * h * h), c3.out_elems()));
    in = blk.out;
    h = c2.out_h();
  }
  m.layers.push_back(classifier_head(in, c.classes, d(in * h * h)));
  return m;
}

}  // namespace

const std::vector<Preset<ResNetConfig>>& resnet_presets() {
  // He et al. 2016, Table 1: bottleneck blocks per stage.
  static const std::vector<Preset<ResNetConfig>> presets = {
      {"50", {50, 1000, 3, 224, false, true, {3, 4, 6, 3}, 64}},
      {"101", {101, 1000, 3, 224, false, true, {3, 4, 23, 3}, 64}},
      {"152", {152, 1000, 3, 224, false, true, {3, 8, 36, 3}, 64}},
  };
  return presets;
}

ResNetConfig resnet_config(const ModelSpec& spec) {
  if (spec.family == "resnet" && !spec.presets.empty()) return imagenet_config(spec);
  return cifar_config(spec);
}

int64_t resnet_stem_width(const ResNetConfig& c) {
  return c.bottleneck ? c.width : 16;
}

std::vector<ResNetBlock> resnet_blocks(const ResNetConfig& c) {
  std::vector<ResNetBlock> blocks;
  int64_t in = resnet_stem_width(c);
  if (!c.bottleneck) {  // 3 stages of n basic blocks, 16/32/64 channels
    const int64_t n = (c.depth - 2) / 6;
    for (int64_t i = 0; i < 3 * n; ++i) {
      const int64_t out = resnet_stem_width(c) << (i / n);
      const int64_t stride = (i >= n && i % n == 0) ? 2 : 1;
      blocks.push_back({fmt::format("block{}", i), in, out, out, stride, false});
      in = out;
    }
    return blocks;
  }
  for (size_t stage = 0; stage < c.stages.size(); ++stage) {
    const int64_t mid = c.width << stage, out = 4 * mid;
    for (int64_t i = 0; i < c.stages[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      blocks.push_back(
          {fmt::format("block{}", blocks.size()), in, mid, out, stride, i == 0 && in != out});
      in = out;
    }
  }
  return blocks;
}

ZooModel describe_resnet(const ResNetConfig& c) {
  return c.bottleneck ? describe_imagenet_resnet(c) : describe_cifar_resnet(c);
}

MlpConfig mlp_config(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"layers", "width", "input", "classes", "skip"});
  MlpConfig c;
  c.layers = int_option(spec, "layers", c.layers, 0);
  c.width = int_option(spec, "width", c.width);
  c.input = int_option(spec, "input", c.input);
  c.classes = int_option(spec, "classes", c.classes);
  const int64_t skip = int_option(spec, "skip", 0, 0);
  if (skip > 1) {
    throw InputError(fmt::format("{}: mlp: skip must be 0 or 1 ({} given)", spec.origin, skip));
  }
  c.skip = skip == 1;
  if (c.skip && c.layers < 2) {
    throw InputError(
        fmt::format("{}: mlp: skip=1 needs at least 2 layers, so that fc0 is not the "
                    "head's predecessor ({} given)",
                    spec.origin, c.layers));
  }
  return c;
}

ZooModel describe_mlp(const MlpConfig& c) {
  ZooModel m;
  m.description = fmt::format("MLP: {} x Linear({}) + ReLU, Linear head", c.layers, c.width);
  m.input_elems = d(c.input);
  int64_t in = c.input;
  for (int64_t i = 0; i < c.layers; ++i) {
    LayerAcc acc;
    acc.params = in * c.width + c.width;
    acc.flops = 2.0 * d(in * c.width);
    acc.saved = d(c.width);  // ReLU's output
    acc.ops = {linear_op("linear", 1, in, c.width), elt_op("relu", EltClass::relu, d(c.width))};
    m.layers.push_back(make_layer(fmt::format("fc{}", i), "linear", acc, d(in), d(c.width)));
    in = c.width;
  }
  LayerAcc head;
  head.params = in * c.classes + c.classes;
  head.flops = 2.0 * d(in * c.classes);
  head.saved = d(c.classes);
  if (c.skip) head.saved += d(c.width);  // the sum, the Linear's input
  if (c.skip) head.ops.push_back(elt_op("skip", EltClass::add, d(c.width)));
  head.ops.push_back(linear_op("linear", 1, in, c.classes));
  add_loss_ops(head.ops, 1, c.classes);
  m.layers.push_back(make_layer("head", "head", head, d(in), d(c.classes)));
  if (c.skip) {
    for (int l = 0; l + 1 < m.num_layers(); ++l)
      m.edges.push_back({l, l + 1, m.layers[static_cast<size_t>(l)].output_elems, false});
    m.edges.push_back({0, m.num_layers() - 1, d(c.width), false});
    std::sort(m.edges.begin(), m.edges.end(), [](const ZooEdge& a, const ZooEdge& b) {
      return a.from != b.from ? a.from < b.from : a.to < b.to;
    });
  }
  return m;
}

}  // namespace pipetwin::zoo
