#include "models/mlp.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/layers.hpp"
#include "models/options.hpp"

namespace pipetwin::models {

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

}  // namespace

MlpConfig mlp_config(const ModelSpec& spec) {
  if (!spec.presets.empty()) {
    throw InputError(fmt::format("{}: mlp takes key=value options only, got \"{}\"", spec.origin,
                                 spec.presets.front()));
  }
  spec.allow_only({"layers", "width", "input", "classes"});
  MlpConfig c;
  c.layers = int_option(spec, "layers", c.layers, 0);
  c.width = int_option(spec, "width", c.width);
  c.input = int_option(spec, "input", c.input);
  c.classes = int_option(spec, "classes", c.classes);
  return c;
}

int64_t parameter_count(const MlpConfig& c) {
  int64_t n = 0;
  int64_t in = c.input;
  for (int64_t i = 0; i < c.layers; ++i) {
    n += in * c.width + c.width;
    in = c.width;
  }
  return n + in * c.classes + c.classes;
}

LayeredModel build_mlp(const MlpConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  LayeredModel m;
  m.task = Task::kClassification;
  m.sample.input_shape = {c.input};
  m.sample.classes = c.classes;
  int64_t in = c.input;
  for (int64_t i = 0; i < c.layers; ++i) {
    m.layers.push_back({fmt::format("fc{}", i), "linear",
                        torch::nn::AnyModule(
                            std::make_shared<MlpLayerImpl>(default_linear(f, in, c.width), true))});
    in = c.width;
  }
  m.layers.push_back({"head", "head",
                      torch::nn::AnyModule(std::make_shared<MlpLayerImpl>(
                          default_linear(f, in, c.classes), false))});
  return m;
}

}  // namespace pipetwin::models
