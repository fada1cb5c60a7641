// LayeredModel's methods and the zoo (zoo.hpp): name -> family -> config -> model.
#include "models/layered_model.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include "core/error.hpp"
#include "models/bert.hpp"
#include "models/gpt2.hpp"
#include "models/layers.hpp"
#include "models/mlp.hpp"
#include "models/resnet.hpp"
#include "models/synthetic.hpp"
#include "models/torchscript.hpp"
#include "models/unet.hpp"
#include "models/vit.hpp"
#include "models/zoo.hpp"
#include "profiles/zoo/configs.hpp"

namespace pipetwin::models {

namespace {

constexpr const char* kOrigin = "model";

at::Generator generator_for(uint64_t seed, uint64_t stream) {
  return at::make_generator<at::CPUGeneratorImpl>(mix64(seed ^ mix64(stream)));
}

std::vector<int64_t> batch_shape(int64_t batch, const std::vector<int64_t>& sample_shape) {
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  return shape;
}

// The seq + 1 tokens a language-model batch's input and target are cut from.
torch::Tensor lm_sequence(const SampleSpec& s, int64_t batch, uint64_t seed) {
  auto gen = generator_for(seed, 0);
  return at::randint(s.vocab, {batch, s.input_shape.at(0) + 1}, gen, at::kLong);
}

// ---- the zoo's families ---------------------------------------------------------------------

using Build = std::function<LayeredModel(const ModelSpec&, torch::Dtype, uint64_t)>;

template <class Config>
Build family(Config (*parse)(const ModelSpec&),
             LayeredModel (*build)(const Config&, torch::Dtype, uint64_t)) {
  return
      [=](const ModelSpec& s, torch::Dtype d, uint64_t seed) { return build(parse(s), d, seed); };
}

// The builder of spec's family; its config comes from profiles/zoo/configs.hpp's parser.
Build find_family(const ModelSpec& spec) {
  const std::string& f = spec.family;
  if (f == "mlp") return family(&zoo::mlp_config, &build_mlp);
  if (f == "resnet" || zoo::is_resnet_alias(f)) return family(&zoo::resnet_config, &build_resnet);
  if (f == "vit") return family(&zoo::vit_config, &build_vit);
  if (f == "bert") return family(&zoo::bert_config, &build_bert);
  if (f == "gpt2") return family(&zoo::gpt2_config, &build_gpt2);
  if (f == "unet") return family(&zoo::unet_config, &build_unet);
  if (f == "uniform") return family(&synthetic_config, &build_synthetic);
  if (f == "torchscript") return &build_torchscript_model;
  throw InputError(fmt::format(
      "{}: unknown model family \"{}\" (known: mlp, resnet, resnet20, ..., vit, bert, gpt2, "
      "unet, uniform, torchscript)",
      spec.origin, f));
}

}  // namespace

// ---- Layer, Task ----------------------------------------------------------------------------

torch::Tensor Layer::forward(const torch::Tensor& x, const torch::Tensor& skip) {
  if (skip_from < 0) return module.forward(x);
  if (!skip.defined()) {
    throw std::invalid_argument(fmt::format(
        "layer {}: takes a skip input from layer {}, but none was given", name, skip_from));
  }
  return module.forward(x, skip);
}

int64_t Layer::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

std::string to_string(Task task) {
  switch (task) {
    case Task::kClassification:
      return "classification";
    case Task::kLanguageModel:
      return "language-model";
    case Task::kRegression:
      return "regression";
  }
  return "unknown";
}

// ---- LayeredModel ---------------------------------------------------------------------------

torch::Tensor LayeredModel::forward(const torch::Tensor& input) {
  return forward_range(input, 0, layers.size());
}

torch::Tensor LayeredModel::forward_range(torch::Tensor x, size_t begin, size_t end) {
  if (begin > end || end > layers.size()) {
    throw std::invalid_argument(fmt::format(
        "{}: layer range [{}, {}) outside the model's {} layers", name, begin, end, layers.size()));
  }
  if (begin == end) return x;
  std::vector<int> ids;
  for (size_t i = begin; i < end; ++i) ids.push_back(static_cast<int>(i));
  std::map<int, torch::Tensor> values{{static_cast<int>(begin) - 1, std::move(x)}};
  forward_layers(ids, values);
  return values.at(static_cast<int>(end) - 1);
}

void LayeredModel::forward_layers(const std::vector<int>& layer_ids,
                                  std::map<int, torch::Tensor>& values) {
  auto input = [&](int consumer, int producer) -> const torch::Tensor& {
    auto it = values.find(producer);
    if (it == values.end()) {
      throw std::invalid_argument(fmt::format(
          "{}: layer {} ({}) needs the output of {}, which was not given", name, consumer,
          layers.at(static_cast<size_t>(consumer)).name,
          producer < 0 ? std::string("the model input") : fmt::format("layer {}", producer)));
    }
    return it->second;
  };
  for (int l : layer_ids) {
    Layer& layer = layers.at(static_cast<size_t>(l));
    const torch::Tensor& x = input(l, l - 1);
    values[l] =
        layer.skip_from >= 0 ? layer.forward(x, input(l, layer.skip_from)) : layer.forward(x);
  }
}

std::vector<std::pair<int, int>> LayeredModel::edges() const {
  std::vector<std::pair<int, int>> out;
  for (size_t i = 1; i < layers.size(); ++i) {
    const int to = static_cast<int>(i), skip = layers[i].skip_from;
    if (skip >= 0 && skip < to - 1) out.emplace_back(skip, to);
    out.emplace_back(to - 1, to);
  }
  return out;
}

bool LayeredModel::has_skips() const {
  return std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return l.skip_from >= 0; });
}

std::vector<int> LayeredModel::skip_sources() const {
  std::vector<int> out;
  for (const auto& l : layers) out.push_back(l.skip_from);
  return out;
}

torch::Tensor LayeredModel::synthetic_input(int64_t batch, uint64_t seed) const {
  if (task == Task::kLanguageModel) return lm_sequence(sample, batch, seed).slice(1, 0, -1);
  auto gen = generator_for(seed, 0);
  const auto shape = batch_shape(batch, sample.input_shape);
  if (sample.token_input) return at::randint(sample.vocab, shape, gen, at::kLong);
  return at::empty(shape, at::TensorOptions().dtype(dtype)).normal_(0.0, 1.0, gen);
}

torch::Tensor LayeredModel::synthetic_target(int64_t batch, uint64_t seed) const {
  if (task == Task::kLanguageModel) return lm_sequence(sample, batch, seed).slice(1, 1);
  auto gen = generator_for(seed, 1);
  const auto shape = batch_shape(batch, sample.target_shape);
  if (task == Task::kClassification) return at::randint(sample.classes, shape, gen, at::kLong);
  return at::empty(shape, at::TensorOptions().dtype(dtype)).normal_(0.0, 1.0, gen);
}

torch::Tensor LayeredModel::per_sample_loss(const torch::Tensor& output,
                                            const torch::Tensor& target) const {
  if (task == Task::kRegression) {
    return (output - target).pow(2).flatten(1).mean(1);
  }
  // Cross entropy: -log softmax(output)[target], over the last dimension, by the operator
  // torch.nn.functional.cross_entropy calls (log_softmax, then one nll_loss picking the targets'
  // entries: the same values and gradients bit for bit as -gather(...).squeeze(), in two autograd
  // nodes fewer). Under autocast the caller passes the reduced-precision logits as they are and
  // autocast's policy for these operators casts them as it does in an ordinary autocast loop
  // (exec/runtime/autocast.hpp). Logits [b, classes] go in as they are (a reshape to the same
  // shape would still add a view node to the backward); a language model's [b, s, vocabulary] go
  // in as [b * s, vocabulary], its losses back as [b, s]; so do the logits of a classifier with
  // several positions per sample (a TorchScript model's [b, ..., classes]).
  if (output.dim() == 2) return at::cross_entropy_loss(output, target, {}, at::Reduction::None);
  const auto nll = at::cross_entropy_loss(output.reshape({-1, output.size(-1)}),
                                          target.reshape({-1}), {}, at::Reduction::None)
                       .view(target.sizes());
  return task == Task::kLanguageModel ? nll.mean(1) : nll.flatten(1).mean(1);
}

std::vector<torch::Tensor> LayeredModel::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& l : layers) {
    for (auto& p : l.parameters()) out.push_back(p);
  }
  return out;
}

int64_t LayeredModel::num_parameters() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.num_parameters();
  return n;
}

size_t LayeredModel::index_of(const std::string& layer_name) const {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name == layer_name) return i;
  }
  throw InputError(fmt::format("{}: no layer named \"{}\"", name, layer_name));
}

void LayeredModel::train(bool on) {
  for (auto& l : layers) l.impl().train(on);
}

void LayeredModel::to(torch::Device device) {
  for (auto& l : layers) l.impl().to(device);
}

LayeredModel LayeredModel::clone() const {
  LayeredModel copy = build_model(name, dtype, seed);
  torch::NoGradGuard no_grad;
  // Every layer goes where the model lives (a GPU's), parameter-free layers with buffers too.
  c10::Device where(c10::kCPU);
  for (const auto& l : layers) {
    for (const auto& p : l.impl().parameters()) where = p.device();
  }
  if (!where.is_cpu()) copy.to(where);
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto src_params = layers[i].impl().parameters();
    const auto src_buffers = layers[i].impl().buffers();
    auto dst_params = copy.layers[i].impl().parameters();
    auto dst_buffers = copy.layers[i].impl().buffers();
    for (size_t j = 0; j < src_params.size(); ++j) dst_params[j].copy_(src_params[j]);
    for (size_t j = 0; j < src_buffers.size(); ++j) dst_buffers[j].copy_(src_buffers[j]);
    copy.layers[i].impl().train(layers[i].impl().is_training());
  }
  return copy;
}

std::string LayeredModel::describe() const {
  std::string out;
  for (size_t i = 0; i < layers.size(); ++i) {
    out += fmt::format("{:>4}  {:<16} {:<10} {:>14}\n", i, layers[i].name, layers[i].kind,
                       layers[i].num_parameters());
  }
  out += fmt::format("      {:<16} {:<10} {:>14}\n", "total", "", num_parameters());
  return out;
}

// ---- zoo ------------------------------------------------------------------------------------

std::string canonical_model_name(const std::string& name) {
  return ModelSpec::parse(name, kOrigin).to_string();
}

int64_t parameter_count(const std::string& name) {
  const auto spec = ModelSpec::parse(name, kOrigin);
  find_family(spec);  // a family models/ builds
  if (spec.family == "torchscript")
    return build_torchscript_model(spec, torch::kFloat32, 0).num_parameters();
  if (spec.family == "uniform") return parameter_count(synthetic_config(spec));
  return zoo::describe_model(spec).parameters();  // the description the builders follow
}

LayeredModel build_model(const std::string& name, torch::Dtype dtype, uint64_t seed) {
  if (dtype != torch::kFloat32 && dtype != torch::kFloat64) {
    throw InputError(fmt::format("{} \"{}\": dtype {} is not supported (float32 or float64)",
                                 kOrigin, name, c10::toString(dtype)));
  }
  const auto spec = ModelSpec::parse(name, kOrigin);
  LayeredModel m = find_family(spec)(spec, dtype, seed);
  m.name = spec.to_string();
  m.dtype = dtype;
  m.seed = seed;
  m.train(true);
  return m;
}

std::vector<std::string> model_presets() {
  std::vector<std::string> names;
  for (const auto& family : zoo::shared_families()) {
    for (const auto& name : zoo::preset_models(family)) names.push_back(name);
  }
  names.push_back("unet:B=2,C=4,image=32");
  names.push_back("uniform:layers=4");
  return names;
}

std::vector<Layer> layers_of(const zoo::ZooModel& description, const MakeModule& make) {
  std::vector<Layer> layers;
  for (size_t i = 0; i < description.layers.size(); ++i) {
    const auto& l = description.layers[i];
    layers.push_back({l.name, l.kind, make(l, i)});
  }
  for (const auto& e : description.edges) {
    if (e.from < e.to - 1) layers.at(static_cast<size_t>(e.to)).skip_from = e.from;
  }
  return layers;
}

}  // namespace pipetwin::models
