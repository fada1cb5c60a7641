// ResNets (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016) and the MLP.
//
// CIFAR ResNets (Section 4.2): `resnet20`, `resnet32`, ..., `resnet:depth=6n+2`, exactly
// models/resnet.hpp's (option-A shortcuts, 16/32/64 channels, "stem", "block{i}", "head"), with
// its options classes=, channels=, image=, norm=batch|group.
// ImageNet ResNets (Table 1): `resnet:50`, `resnet:101`, `resnet:152`: 7x7/2 stem with 3x3/2
// max-pool ("stem", kind "conv"), bottleneck blocks 1x1-3x3-1x1 with the stride on the 3x3 and a
// 1x1 projection shortcut where the shape changes ("block{i}", kind "residual", as torchvision's
// v1.5), global average pool and Linear(2048 -> classes) ("head"). Options image= (224),
// classes= (1000). 25.6M / 44.5M / 60.2M parameters.
// MLP: models/mlp.hpp's `mlp[:layers=4,width=256,input=64,classes=10]`: "fc{i}" Linear + ReLU
// (kind "linear") and "head" Linear (kind "head").
//
// Saved elements follow LibTorch autograd: BatchNorm keeps its input (the conv output), ReLU
// its output; per-micro-batch BatchNorm statistics are left out (they do not scale with b).
//
// Thread-safety: pure functions.
#include "core/zoo/families.hpp"

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
  return make_layer("head", "head", acc, input_elems, d(classes));
}

// ---- CIFAR ----------------------------------------------------------------------------------

ZooModel describe_cifar_resnet(const ModelSpec& spec) {
  reject_presets(spec);
  int64_t depth = 20;
  if (spec.family == "resnet") {
    spec.allow_only({"depth", "classes", "channels", "image", "norm"});
    depth = int_option(spec, "depth", depth);
  } else {
    spec.allow_only({"classes", "channels", "image", "norm"});
    depth = std::stol(spec.family.substr(6));
  }
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw InputError(fmt::format("{}: {}: depth must be 6n + 2 with n >= 1 ({} given)", spec.origin,
                                 spec.family, depth));
  }
  const int64_t classes = int_option(spec, "classes", 10);
  const int64_t channels = int_option(spec, "channels", 3);
  const int64_t image = int_option(spec, "image", 32);
  const std::string norm = spec.has("norm") ? spec.args.at("norm") : "batch";
  if (norm != "batch" && norm != "group") {
    throw InputError(fmt::format("{}: {}: option norm must be batch or group (\"{}\" given)",
                                 spec.origin, spec.family, norm));
  }
  // GroupNorm (8 groups) keeps a mean and an rstd per group and sample.
  const double group_stats = norm == "group" ? 2.0 * 8 : 0;
  ZooModel m;
  m.description =
      fmt::format("ResNet-{} for CIFAR (He et al. 2016, Section 4.2), {} norm", depth, norm);
  m.input_elems = d(channels * image * image);
  LayerAcc stem;
  const ConvShape s{channels, 16, 3, 0, image, image, 1};
  stem.conv_bn(s, true);
  stem.saved += group_stats;
  m.layers.push_back(make_layer("stem", "conv", stem, m.input_elems, s.out_elems()));
  int64_t in = 16, h = image;
  const int64_t n = (depth - 2) / 6;
  for (int64_t i = 0; i < 3 * n; ++i) {
    const int64_t out = 16 << (i / n), stride = (i >= n && i % n == 0) ? 2 : 1;
    LayerAcc b;
    const ConvShape c1{in, out, 3, 0, h, h, stride};
    const ConvShape c2{out, out, 3, 0, c1.out_h(), c1.out_w(), 1};
    b.conv_bn(c1, true);
    b.conv_bn(c2, true);  // BatchNorm keeps conv2's output; the ReLU after the add its own
    b.saved += 2 * group_stats;
    m.layers.push_back(
        make_layer(fmt::format("block{}", i), "residual", b, d(in * h * h), c2.out_elems()));
    in = out;
    h = c1.out_h();
  }
  m.layers.push_back(classifier_head(in, classes, d(in * h * h)));
  return m;
}

// ---- ImageNet -------------------------------------------------------------------------------

ZooModel describe_imagenet_resnet(const ModelSpec& spec) {
  spec.allow_only({"image", "classes"});
  if (spec.presets.size() > 1) {
    throw InputError(fmt::format("{}: resnet: more than one preset (\"{}\" and \"{}\")",
                                 spec.origin, spec.presets[0], spec.presets[1]));
  }
  const std::string& p = spec.presets.front();
  std::vector<int64_t> blocks;
  if (p == "50") blocks = {3, 4, 6, 3};
  if (p == "101") blocks = {3, 4, 23, 3};
  if (p == "152") blocks = {3, 8, 36, 3};
  if (blocks.empty()) {
    throw InputError(fmt::format(
        "{}: resnet: unknown preset \"{}\" (known: 50, 101, 152; CIFAR ResNets are resnet20, "
        "resnet32, ... or resnet:depth=N)",
        spec.origin, p));
  }
  const int64_t image = int_option(spec, "image", 224);
  const int64_t classes = int_option(spec, "classes", 1000);
  ZooModel m;
  m.description = fmt::format("ResNet-{} for ImageNet (He et al. 2016, Table 1)", p);
  m.input_elems = d(3 * image * image);
  LayerAcc stem;
  const ConvShape s{3, 64, 7, 0, image, image, 2};
  stem.conv_bn(s, true);
  int64_t h = (s.out_h() + 1) / 2;  // 3x3/2 max-pool, padding 1
  stem.saved += d(64 * h * h);      // its indices
  m.layers.push_back(make_layer("stem", "conv", stem, m.input_elems, d(64 * h * h)));
  int64_t in = 64, index = 0;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int64_t mid = 64 << stage, out = 4 * mid;
    for (int64_t i = 0; i < blocks[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      LayerAcc b;
      const ConvShape c1{in, mid, 1, 0, h, h, 1};
      const ConvShape c2{mid, mid, 3, 0, h, h, stride};
      const ConvShape c3{mid, out, 1, 0, c2.out_h(), c2.out_w(), 1};
      b.conv_bn(c1, true);
      b.conv_bn(c2, true);
      b.conv_bn(c3, true);  // BatchNorm keeps conv3's output; the ReLU after the add its own
      if (i == 0) b.conv_bn({in, out, 1, 0, h, h, stride}, false);
      m.layers.push_back(make_layer(fmt::format("block{}", index++), "residual", b, d(in * h * h),
                                    c3.out_elems()));
      in = out;
      h = c2.out_h();
    }
  }
  m.layers.push_back(classifier_head(in, classes, d(in * h * h)));
  return m;
}

}  // namespace

ZooModel describe_resnet(const ModelSpec& spec) {
  if (spec.family == "resnet" && !spec.presets.empty()) return describe_imagenet_resnet(spec);
  return describe_cifar_resnet(spec);
}

ZooModel describe_mlp(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"layers", "width", "input", "classes"});
  const int64_t layers = int_option(spec, "layers", 4, 0);
  const int64_t width = int_option(spec, "width", 256);
  const int64_t input = int_option(spec, "input", 64);
  const int64_t classes = int_option(spec, "classes", 10);
  ZooModel m;
  m.description = fmt::format("MLP: {} x Linear({}) + ReLU, Linear head", layers, width);
  m.input_elems = d(input);
  int64_t in = input;
  for (int64_t i = 0; i < layers; ++i) {
    LayerAcc acc;
    acc.params = in * width + width;
    acc.flops = 2.0 * d(in * width);
    acc.saved = d(width);  // ReLU's output
    m.layers.push_back(make_layer(fmt::format("fc{}", i), "linear", acc, d(in), d(width)));
    in = width;
  }
  LayerAcc head;
  head.params = in * classes + classes;
  head.flops = 2.0 * d(in * classes);
  head.saved = d(classes);
  m.layers.push_back(make_layer("head", "head", head, d(in), d(classes)));
  return m;
}

}  // namespace pipetwin::zoo
