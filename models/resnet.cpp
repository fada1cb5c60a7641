#include "models/resnet.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

namespace {

constexpr int64_t kStemWidth = 16;

class StemImpl : public torch::nn::Module {
 public:
  StemImpl(ParamFactory& f, const ResNetConfig& c) {
    conv_ =
        register_module("conv", std::make_shared<Conv2dImpl>(f, c.channels, kStemWidth, 3, 1, 1));
    norm_ = register_module(
        "norm", std::make_shared<Norm2dImpl>(f, kStemWidth, c.group_norm, kResNetGroups));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return at::relu(norm_->forward(conv_->forward(x)));
  }

 private:
  std::shared_ptr<Conv2dImpl> conv_;
  std::shared_ptr<Norm2dImpl> norm_;
};

class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(ParamFactory& f, const ResNetConfig& c, int64_t in, int64_t out, int64_t stride)
      : in_(in), out_(out), stride_(stride) {
    conv1_ = register_module("conv1", std::make_shared<Conv2dImpl>(f, in, out, 3, stride, 1));
    norm1_ =
        register_module("norm1", std::make_shared<Norm2dImpl>(f, out, c.group_norm, kResNetGroups));
    conv2_ = register_module("conv2", std::make_shared<Conv2dImpl>(f, out, out, 3, 1, 1));
    norm2_ =
        register_module("norm2", std::make_shared<Norm2dImpl>(f, out, c.group_norm, kResNetGroups));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto y = at::relu(norm1_->forward(conv1_->forward(x)));
    y = norm2_->forward(conv2_->forward(y));
    return at::relu(y + shortcut(x));
  }

 private:
  // Option A: identity, or subsample by the stride and zero-pad the new channels evenly.
  torch::Tensor shortcut(const torch::Tensor& x) const {
    if (stride_ == 1 && in_ == out_) return x;
    auto s = x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    const int64_t pad = out_ - in_;
    return at::constant_pad_nd(s, {0, 0, 0, 0, pad / 2, pad - pad / 2}, 0);
  }

  int64_t in_, out_, stride_;
  std::shared_ptr<Conv2dImpl> conv1_, conv2_;
  std::shared_ptr<Norm2dImpl> norm1_, norm2_;
};

class HeadImpl : public torch::nn::Module {
 public:
  HeadImpl(ParamFactory& f, int64_t in, int64_t classes) {
    fc_ = register_module("fc", default_linear(f, in, classes));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc_->forward(x.mean({2, 3})); }

 private:
  std::shared_ptr<LinearImpl> fc_;
};

// Input and output channels and stride of every basic block.
struct BlockShape {
  int64_t in, out, stride;
};
std::vector<BlockShape> block_shapes(const ResNetConfig& c) {
  const int64_t n = (c.depth - 2) / 6;
  std::vector<BlockShape> shapes;
  int64_t in = kStemWidth;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const int64_t out = kStemWidth << stage;
    for (int64_t i = 0; i < n; ++i) {
      shapes.push_back({in, out, stage > 0 && i == 0 ? 2 : 1});
      in = out;
    }
  }
  return shapes;
}

}  // namespace

ResNetConfig resnet_config(const ModelSpec& spec) {
  ResNetConfig c;
  if (!spec.presets.empty()) {
    throw InputError(fmt::format("{}: {} takes key=value options only, got \"{}\"", spec.origin,
                                 spec.family, spec.presets.front()));
  }
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
  const std::string norm = spec.has("norm") ? spec.args.at("norm") : "batch";
  if (norm != "batch" && norm != "group") {
    throw InputError(fmt::format("{}: {}: option norm must be batch or group (\"{}\" given)",
                                 spec.origin, spec.family, norm));
  }
  c.group_norm = norm == "group";
  return c;
}

int64_t parameter_count(const ResNetConfig& c) {
  int64_t n = c.channels * kStemWidth * 9 + 2 * kStemWidth;
  for (const auto& b : block_shapes(c)) n += b.out * b.in * 9 + b.out * b.out * 9 + 4 * b.out;
  const int64_t last = kStemWidth * 4;
  return n + last * c.classes + c.classes;
}

LayeredModel build_resnet(const ResNetConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.channels, c.image, c.image};
  m.sample.classes = c.classes;
  m.layers.push_back({"stem", "conv", torch::nn::AnyModule(std::make_shared<StemImpl>(f, c))});
  const auto shapes = block_shapes(c);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    m.layers.push_back(
        {fmt::format("block{}", i), "residual",
         torch::nn::AnyModule(std::make_shared<BasicBlockImpl>(f, c, s.in, s.out, s.stride))});
  }
  m.layers.push_back(
      {"head", "head",
       torch::nn::AnyModule(std::make_shared<HeadImpl>(f, shapes.back().out, c.classes))});
  return m;
}

}  // namespace pipetwin::models
