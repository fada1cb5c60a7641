#include "models/unet.hpp"

#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

namespace {

constexpr int kLevels = 5;  // "five down-sampling layers and five up-sampling layers"

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

// c_i = C * 2^i; c_{-1} = C / 2.
int64_t level_channels(const UNetConfig& c, int i) {
  return i < 0 ? c.channels / 2 : c.channels << i;
}

enum class BlockKind { kPlain, kPool, kUp };

// Calls block(name, c_in, c_out, kind, level) for every convolution block in model order; the
// level of the bottleneck is kLevels.
template <class Block>
void for_each_block(const UNetConfig& c, Block block) {
  const int64_t B = c.blocks;
  auto ch = [&c](int i) { return level_channels(c, i); };
  for (int i = 0; i < kLevels; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      const int64_t in = j > 0 ? ch(i) : (i == 0 ? c.in_channels : ch(i - 1));
      block(fmt::format("enc{}.conv{}", i, j), in, ch(i),
            (j == 0 && i > 0) ? BlockKind::kPool : BlockKind::kPlain, i);
    }
  }
  for (int64_t j = 0; j < B; ++j) {
    block(fmt::format("bottleneck.conv{}", j), j == 0 ? ch(kLevels - 1) : ch(kLevels),
          j + 1 == B ? ch(kLevels - 1) : ch(kLevels), j == 0 ? BlockKind::kPool : BlockKind::kPlain,
          kLevels);
  }
  for (int i = kLevels - 1; i >= 0; --i) {
    for (int64_t j = 0; j < B; ++j) {
      block(fmt::format("dec{}.conv{}", i, j), j == 0 ? ch(i + 1) : ch(i - 1), ch(i - 1),
            j == 0 ? BlockKind::kUp : BlockKind::kPlain, i);
    }
  }
}

}  // namespace

UNetConfig unet_config(const ModelSpec& spec) {
  if (!spec.presets.empty()) {
    throw InputError(fmt::format("{}: unet takes key=value options only, got \"{}\"", spec.origin,
                                 spec.presets.front()));
  }
  spec.allow_only({"B", "C", "image", "channels", "out", "norm"});
  UNetConfig c;
  c.blocks = int_option(spec, "B", c.blocks, 2);
  c.channels = int_option(spec, "C", c.channels, 2);
  c.image = int_option(spec, "image", c.image);
  c.in_channels = int_option(spec, "channels", c.in_channels);
  c.out_channels = int_option(spec, "out", c.out_channels);
  require_multiple(spec, "C", c.channels, "2", 2);
  require_multiple(spec, "image", c.image, "2^5", int64_t{1} << kLevels);
  const std::string norm = spec.has("norm") ? spec.args.at("norm") : "batch";
  if (norm != "batch" && norm != "group") {
    throw InputError(fmt::format("{}: unet: option norm must be batch or group (\"{}\" given)",
                                 spec.origin, norm));
  }
  c.group_norm = norm == "group";
  return c;
}

int64_t parameter_count(const UNetConfig& c) {
  int64_t n = 0;
  for_each_block(c, [&n](const std::string&, int64_t in, int64_t out, BlockKind, int) {
    n += in * out * 9 + 2 * out;  // bias-free convolution, norm weight and bias
  });
  return n + level_channels(c, -1) * c.out_channels;
}

LayeredModel build_unet(const UNetConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kRegression;
  m.sample.input_shape = {c.in_channels, c.image, c.image};
  m.sample.target_shape = {c.out_channels, c.image, c.image};
  std::vector<int> stash(kLevels + 1, -1);  // per level: the last layer so far
  for_each_block(
      c, [&](const std::string& name, int64_t in, int64_t out, BlockKind kind, int level) {
        Layer layer{name, "conv", {}};
        if (kind == BlockKind::kUp) {
          // The encoder's last block of this level: stash[level] was last set by the encoder.
          layer.module =
              torch::nn::AnyModule(std::make_shared<UNetUpBlockImpl>(f, in, out, c.group_norm));
          layer.skip_from = stash[static_cast<size_t>(level)];
        } else {
          layer.module = torch::nn::AnyModule(
              std::make_shared<UNetBlockImpl>(f, in, out, c.group_norm, kind == BlockKind::kPool));
        }
        m.layers.push_back(std::move(layer));
        if (name.rfind("enc", 0) == 0)
          stash[static_cast<size_t>(level)] = static_cast<int>(m.layers.size()) - 1;
      });
  m.layers.push_back({"segment", "head",
                      torch::nn::AnyModule(std::make_shared<SegmentImpl>(f, level_channels(c, -1),
                                                                         c.out_channels))});
  return m;
}

}  // namespace pipetwin::models
