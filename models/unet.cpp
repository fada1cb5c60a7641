#include "models/unet.hpp"

#include <numeric>

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::UNetConfig;

namespace {

int64_t groups_for(int64_t channels) {
  return std::gcd(int64_t{8}, channels);
}

// 3x3 convolution, norm, ReLU; the first block of a lower level max-pools its input first.
class UNetBlockImpl : public torch::nn::Module {
 public:
  UNetBlockImpl(ParamFactory& f, int64_t in, int64_t out, bool group_norm, bool pool)
      : pool_(pool) {
    conv_ = register_module("conv", std::make_shared<Conv2dImpl>(f, in, out, 3, 1, 1));
    norm_ =
        register_module("norm", std::make_shared<Norm2dImpl>(f, out, group_norm, groups_for(out)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return block(pool_ ? at::max_pool2d(x, 2) : x); }

 protected:
  torch::Tensor block(const torch::Tensor& x) {
    return at::relu(norm_->forward(conv_->forward(x)));
  }

 private:
  bool pool_;
  std::shared_ptr<Conv2dImpl> conv_;
  std::shared_ptr<Norm2dImpl> norm_;
};

// A decoder level's first block: up-sample x 2x (nearest), concatenate the skip, then the block.
class UNetUpBlockImpl : public UNetBlockImpl {
 public:
  UNetUpBlockImpl(ParamFactory& f, int64_t in, int64_t out, bool group_norm)
      : UNetBlockImpl(f, in, out, group_norm, false) {}
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip) {
    const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const torch::Tensor up =
        x.unsqueeze(3).unsqueeze(5).expand({b, c, h, 2, w, 2}).reshape({b, c, 2 * h, 2 * w});
    return block(at::cat({up, skip}, 1));
  }
};

class SegmentImpl : public torch::nn::Module {
 public:
  SegmentImpl(ParamFactory& f, int64_t in, int64_t out) {
    conv_ = register_module("conv", std::make_shared<Conv2dImpl>(f, in, out, 1, 1, 0));
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv_->forward(x); }

 private:
  std::shared_ptr<Conv2dImpl> conv_;
};

}  // namespace

LayeredModel build_unet(const UNetConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kRegression;
  m.sample.input_shape = {c.in_channels, c.image, c.image};
  m.sample.target_shape = {c.out_channels, c.image, c.image};
  const auto blocks = zoo::unet_blocks(c);
  m.layers = layers_of(zoo::describe_unet(c), [&](const zoo::ZooLayer& l, size_t i) {
    if (l.kind == "head") {
      return torch::nn::AnyModule(
          std::make_shared<SegmentImpl>(f, zoo::unet_segment_channels(c), c.out_channels));
    }
    const zoo::UNetBlock& b = blocks.at(i);
    if (b.skip >= 0) {  // layers_of sets skip_from from the description's skip edge
      return torch::nn::AnyModule(std::make_shared<UNetUpBlockImpl>(f, b.in, b.out, c.group_norm));
    }
    return torch::nn::AnyModule(
        std::make_shared<UNetBlockImpl>(f, b.in, b.out, c.group_norm, b.pool));
  });
  return m;
}

}  // namespace pipetwin::models
