// VGG (Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
// Recognition", ICLR 2015, Table 1) and AlexNet (Krizhevsky, Sutskever and Hinton, NIPS 2012; the
// single-tower variant of Krizhevsky, "One weird trick", arXiv 1404.5997) as torchvision defines
// them (torchvision.models.vgg, cfgs "A", "B", "D", "E" without BatchNorm; torchvision.models.
// alexnet), at 224 x 224: the models PipeDream (SOSP'19, Table 1) trains.
//
//   `vgg:11 | 13 | 16 (default) | 19` (also `vgg16`, ...), options image= (224), classes= (1000):
//     "conv{s}_{i}", "relu{s}_{i}"  3x3/1 convolution (padding 1, bias), ReLU   kinds "conv",
//     "relu" "pool{s}"                     2x2/2 max-pool                              kind "pool"
//     "avgpool"                     AdaptiveAvgPool2d((7, 7))                   kind "pool"
//     "fc6", "relu6", "drop6"       Linear(25088 -> 4096), ReLU, Dropout        kinds "linear",
//     "fc7", "relu7", "drop7"       Linear(4096 -> 4096), ReLU, Dropout         "relu", "dropout"
//     "fc8"                         Linear(4096 -> classes), and the loss       kind "head"
//   VGG-16: 39 layers, 138,357,544 parameters.
//   `alexnet`, options image= (224), classes= (1000):
//     "conv1" 11x11/4 (padding 2) 3 -> 64, "relu1", "pool1" 3x3/2, "conv2" 5x5 (padding 2)
//     64 -> 192, "relu2", "pool2", "conv3" 3x3 192 -> 384, "relu3", "conv4" 384 -> 256, "relu4",
//     "conv5" 256 -> 256, "relu5", "pool3", "avgpool" (6 x 6), "drop6", "fc6" 9216 -> 4096,
//     "relu6", "drop7", "fc7" 4096 -> 4096, "relu7", "fc8" 4096 -> classes.
//   21 layers, 61,100,840 parameters.
// A layer is a torchvision module (torch.flatten, a function, is not one): the unit PipeDream's
// profiler times and its optimizer places.
//
// Saved elements follow LibTorch autograd, layer output included and input excluded
// (profiles/zoo/zoo.hpp): a convolution or Linear counts its output, which the in-place ReLU after it
// overwrites and keeps (the ReLU adds none), a max-pool its output and its indices (counted as one
// element each), the adaptive pool and a Dropout their output (the Dropout's one-byte mask left
// out), the head its logits and the loss's log-softmax.
//
// Thread-safety: pure functions.
#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

namespace {

double d(int64_t v) {
  return static_cast<double>(v);
}

// A k x k convolution with bias over c_in x h x h, stride s, padding p (torchvision's Conv2d).
struct Conv2d {
  int64_t c_in = 0, c_out = 0, k = 3, stride = 1, pad = 1;
  int64_t out(int64_t h) const { return (h + 2 * pad - k) / stride + 1; }
};

// Appends the modules of a torchvision CNN in order, tracking the feature map (or vector) size.
struct Builder {
  ZooModel m;
  int64_t channels = 3, side = 0;  // side 1 once flattened
  double elems() const { return d(channels * side * side); }

  void push(const std::string& name, const std::string& kind, const LayerAcc& acc, double in) {
    m.layers.push_back(make_layer(name, kind, acc, in, elems()));
  }
  void conv(const std::string& name, const Conv2d& c) {
    const double in = elems();
    const int64_t o = c.out(side);
    LayerAcc acc;
    acc.params = c.c_out * c.c_in * c.k * c.k + c.c_out;
    acc.flops = 2.0 * d(c.c_out * c.c_in * c.k * c.k) * d(o * o);
    acc.saved = d(c.c_out * o * o);
    acc.ops = {conv_op(name, c.c_in, c.c_out, c.k, side, side, c.stride, c.pad, true)};
    channels = c.c_out;
    side = o;
    push(name, "conv", acc, in);
  }
  // In place: reads and writes its input, which the layer before counts as saved.
  void relu(const std::string& name) {
    LayerAcc acc;
    acc.ops = {elt_op(name, EltClass::relu, elems())};
    push(name, "relu", acc, elems());
    m.layers.back().traffic_elems = 2 * elems();
  }
  // Max-pool k x k, stride s, no padding: output and indices.
  void pool(const std::string& name, int64_t k, int64_t s) {
    const double in = elems();
    side = (side - k) / s + 1;
    LayerAcc acc;
    acc.saved = 2 * elems();
    acc.ops = {elt_op(name, EltClass::pool, in)};
    push(name, "pool", acc, in);
  }
  // AdaptiveAvgPool2d((out, out)), then torch.flatten.
  void avgpool(int64_t out) {
    const double in = elems();
    side = out;
    LayerAcc acc;
    acc.saved = elems();
    acc.ops = {elt_op("avgpool", EltClass::reduce, in)};
    push("avgpool", "pool", acc, in);
    channels *= side * side;
    side = 1;
  }
  void dropout(const std::string& name) {
    LayerAcc acc;
    acc.saved = elems();
    acc.ops = {dropout_op(name, elems(), 0.5)};  // torchvision's classifier: p = 0.5
    push(name, "dropout", acc, elems());
  }
  // Linear(features -> out); the head also keeps the loss's log-softmax.
  void linear(const std::string& name, int64_t out, const std::string& kind = "linear") {
    const double in = elems();
    LayerAcc acc;
    acc.params = channels * out + out;
    acc.flops = 2.0 * d(channels * out);
    acc.saved = d(out) * (kind == "head" ? 2 : 1);
    acc.ops = {linear_op(name, 1, channels, out)};
    if (kind == "head") add_loss_ops(acc.ops, 1, out);
    channels = out;
    push(name, kind, acc, in);
  }
};

struct VggConfig {
  int64_t depth = 16;
  std::vector<int64_t> blocks;  // convolutions per resolution, 64 -> 512 channels
};

const std::vector<Preset<VggConfig>>& vgg_presets() {
  // Simonyan and Zisserman, Table 1: configurations A (11), B (13), D (16), E (19).
  static const std::vector<Preset<VggConfig>> presets = {
      {"11", {11, {1, 1, 2, 2, 2}}},
      {"13", {13, {2, 2, 2, 2, 2}}},
      {"16", {16, {2, 2, 3, 3, 3}}},
      {"19", {19, {2, 2, 4, 4, 4}}},
  };
  return presets;
}

VggConfig vgg_config(const ModelSpec& spec) {
  if (spec.family == "vgg") return choose_preset(spec, vgg_presets(), "16");
  reject_presets(spec);  // "vgg16": the family names the preset
  for (const auto& p : vgg_presets()) {
    if (spec.family == "vgg" + p.name) return p.config;
  }
  throw InputError(fmt::format("{}: unknown VGG \"{}\" (known: vgg11, vgg13, vgg16, vgg19)",
                               spec.origin, spec.family));
}

}  // namespace

bool is_vgg_alias(const std::string& family) {
  for (const auto& p : vgg_presets()) {
    if (family == "vgg" + p.name) return true;
  }
  return false;
}

ZooModel describe_vgg(const ModelSpec& spec) {
  spec.allow_only({"image", "classes"});
  const VggConfig c = vgg_config(spec);
  // Five 2x2 max-pools; the adaptive pool brings any map to 7 x 7.
  const int64_t image = int_option(spec, "image", 224, 32);
  const int64_t classes = int_option(spec, "classes", 1000);
  Builder b;
  b.side = image;
  b.m.description = fmt::format(
      "VGG-{} (Simonyan and Zisserman 2015) as torchvision builds it, input 3 x {} x {}", c.depth,
      image, image);
  b.m.input_elems = b.elems();
  int64_t width = 64;
  for (size_t s = 0; s < c.blocks.size(); ++s) {
    for (int64_t i = 0; i < c.blocks[s]; ++i) {
      b.conv(fmt::format("conv{}_{}", s + 1, i + 1), {b.channels, width, 3, 1, 1});
      b.relu(fmt::format("relu{}_{}", s + 1, i + 1));
    }
    b.pool(fmt::format("pool{}", s + 1), 2, 2);
    width = std::min<int64_t>(2 * width, 512);
  }
  b.avgpool(7);
  for (const std::string k : {"6", "7"}) {
    b.linear("fc" + k, 4096);
    b.relu("relu" + k);
    b.dropout("drop" + k);
  }
  b.linear("fc8", classes, "head");
  return b.m;
}

ZooModel describe_alexnet(const ModelSpec& spec) {
  reject_presets(spec);
  spec.allow_only({"image", "classes"});
  const int64_t image = int_option(spec, "image", 224), classes = int_option(spec, "classes", 1000);
  if (image < 63) {  // conv1 and three 3x3/2 max-pools leave at least one pixel
    throw InputError(fmt::format("{}: alexnet: option image must be at least 63 ({} given)",
                                 spec.origin, image));
  }
  Builder b;
  b.side = image;
  b.m.description = fmt::format(
      "AlexNet (Krizhevsky et al. 2012, one-tower) as torchvision builds it, input 3 x {} x {}",
      image, image);
  b.m.input_elems = b.elems();
  b.conv("conv1", {3, 64, 11, 4, 2});
  b.relu("relu1");
  b.pool("pool1", 3, 2);
  b.conv("conv2", {64, 192, 5, 1, 2});
  b.relu("relu2");
  b.pool("pool2", 3, 2);
  b.conv("conv3", {192, 384, 3, 1, 1});
  b.relu("relu3");
  b.conv("conv4", {384, 256, 3, 1, 1});
  b.relu("relu4");
  b.conv("conv5", {256, 256, 3, 1, 1});
  b.relu("relu5");
  b.pool("pool3", 3, 2);
  b.avgpool(6);
  for (const std::string k : {"6", "7"}) {
    b.dropout("drop" + k);
    b.linear("fc" + k, 4096);
    b.relu("relu" + k);
  }
  b.linear("fc8", classes, "head");
  return b.m;
}

}  // namespace pipetwin::zoo
