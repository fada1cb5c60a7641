#include "models/resnet.hpp"

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::ResNetBlock;
using zoo::ResNetConfig;

namespace {

using zoo::kResNetGroups;

std::shared_ptr<Norm2dImpl> norm2d(ParamFactory& f, const ResNetConfig& c, int64_t channels) {
  return std::make_shared<Norm2dImpl>(f, channels, c.group_norm, kResNetGroups);
}

// CIFAR: conv3x3 + norm + ReLU. ImageNet: conv7x7/2 + norm + ReLU + max-pool 3x3/2.
class StemImpl : public torch::nn::Module {
 public:
  StemImpl(ParamFactory& f, const ResNetConfig& c) : pool_(c.bottleneck) {
    const int64_t width = zoo::resnet_stem_width(c), k = c.bottleneck ? 7 : 3;
    conv_ = register_module(
        "conv", std::make_shared<Conv2dImpl>(f, c.channels, width, k, pool_ ? 2 : 1, k / 2));
    norm_ = register_module("norm", norm2d(f, c, width));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = at::relu(norm_->forward(conv_->forward(x)));
    return pool_ ? at::max_pool2d(y, 3, 2, 1) : y;
  }

 private:
  bool pool_;
  std::shared_ptr<Conv2dImpl> conv_;
  std::shared_ptr<Norm2dImpl> norm_;
};

// conv3x3-norm-ReLU-conv3x3-norm + shortcut, ReLU (CIFAR).
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(ParamFactory& f, const ResNetConfig& c, const ResNetBlock& b)
      : in_(b.in), out_(b.out), stride_(b.stride) {
    conv1_ = register_module("conv1", std::make_shared<Conv2dImpl>(f, b.in, b.out, 3, b.stride, 1));
    norm1_ = register_module("norm1", norm2d(f, c, b.out));
    conv2_ = register_module("conv2", std::make_shared<Conv2dImpl>(f, b.out, b.out, 3, 1, 1));
    norm2_ = register_module("norm2", norm2d(f, c, b.out));
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

// conv1x1-norm-ReLU-conv3x3(stride)-norm-ReLU-conv1x1-norm + shortcut (identity, or a strided
// 1x1 projection + norm), ReLU (ImageNet, torchvision's v1.5).
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(ParamFactory& f, const ResNetConfig& c, const ResNetBlock& b) {
    conv1_ = register_module("conv1", std::make_shared<Conv2dImpl>(f, b.in, b.mid, 1, 1, 0));
    norm1_ = register_module("norm1", norm2d(f, c, b.mid));
    conv2_ =
        register_module("conv2", std::make_shared<Conv2dImpl>(f, b.mid, b.mid, 3, b.stride, 1));
    norm2_ = register_module("norm2", norm2d(f, c, b.mid));
    conv3_ = register_module("conv3", std::make_shared<Conv2dImpl>(f, b.mid, b.out, 1, 1, 0));
    norm3_ = register_module("norm3", norm2d(f, c, b.out));
    if (b.project) {
      proj_ = register_module("proj", std::make_shared<Conv2dImpl>(f, b.in, b.out, 1, b.stride, 0));
      proj_norm_ = register_module("proj_norm", norm2d(f, c, b.out));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto y = at::relu(norm1_->forward(conv1_->forward(x)));
    y = at::relu(norm2_->forward(conv2_->forward(y)));
    y = norm3_->forward(conv3_->forward(y));
    return at::relu(y + (proj_ ? proj_norm_->forward(proj_->forward(x)) : x));
  }

 private:
  std::shared_ptr<Conv2dImpl> conv1_, conv2_, conv3_, proj_;
  std::shared_ptr<Norm2dImpl> norm1_, norm2_, norm3_, proj_norm_;
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

}  // namespace

LayeredModel build_resnet(const ResNetConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.channels, c.image, c.image};
  m.sample.classes = c.classes;
  const auto blocks = zoo::resnet_blocks(c);
  m.layers = layers_of(zoo::describe_resnet(c), [&](const zoo::ZooLayer& l, size_t i) {
    if (l.kind == "conv") return torch::nn::AnyModule(std::make_shared<StemImpl>(f, c));
    if (l.kind == "head") {
      return torch::nn::AnyModule(std::make_shared<HeadImpl>(f, blocks.back().out, c.classes));
    }
    const ResNetBlock& b = blocks.at(i - 1);  // "block{i-1}", after the stem
    if (c.bottleneck) return torch::nn::AnyModule(std::make_shared<BottleneckImpl>(f, c, b));
    return torch::nn::AnyModule(std::make_shared<BasicBlockImpl>(f, c, b));
  });
  return m;
}

}  // namespace pipetwin::models
