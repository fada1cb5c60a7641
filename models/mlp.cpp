#include "models/mlp.hpp"

#include "models/layers.hpp"

namespace pipetwin::models {

using zoo::MlpConfig;

namespace {

// Flatten, Linear, and ReLU unless it is the head.
class MlpLayerImpl : public torch::nn::Module {
 public:
  MlpLayerImpl(std::shared_ptr<LinearImpl> linear, bool relu) : relu_(relu) {
    linear_ = register_module("linear", std::move(linear));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = linear_->forward(x.flatten(1));
    return relu_ ? at::relu(y) : y;
  }

 private:
  std::shared_ptr<LinearImpl> linear_;
  bool relu_;
};

// The head of mlp:skip=1: Linear(x + fc0's output), no ReLU.
class MlpSkipHeadImpl : public torch::nn::Module {
 public:
  explicit MlpSkipHeadImpl(std::shared_ptr<LinearImpl> linear) {
    linear_ = register_module("linear", std::move(linear));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip) {
    return linear_->forward(x.flatten(1) + skip.flatten(1));
  }

 private:
  std::shared_ptr<LinearImpl> linear_;
};

}  // namespace

LayeredModel build_mlp(const MlpConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.input};
  m.sample.classes = c.classes;
  m.layers = layers_of(zoo::describe_mlp(c), [&](const zoo::ZooLayer& l, size_t i) {
    const int64_t in = i == 0 ? c.input : c.width;
    const bool head = l.kind == "head";
    if (head && c.skip) {  // layers_of sets skip_from from the description's skip edge
      return torch::nn::AnyModule(
          std::make_shared<MlpSkipHeadImpl>(default_linear(f, in, c.classes)));
    }
    return torch::nn::AnyModule(
        std::make_shared<MlpLayerImpl>(default_linear(f, in, head ? c.classes : c.width), !head));
  });
  return m;
}

}  // namespace pipetwin::models
