// LayeredModel: a LibTorch model as an ordered list of named layers, so that a pipeline stage can
// take any subset of them (contiguous, or non-contiguous as FTPipe's Mixed-pipe does).
//
// Layer i consumes layer i-1's output and layer 0 consumes the model input; running all layers in
// order is the whole model (PipeTransformer Section 3.1 writes the model as f_0 o ... o f_{L-1}).
// Each layer is a torch::nn::AnyModule whose forward maps one tensor to one tensor. Most skip
// connections live inside a layer (a residual block, an attention sub-layer; PipeTransformer
// Section 3.2 "we do not consider breaking skip connections"). A model may also have skip
// connections ACROSS layers, as U-Net has (torchgpipe Section 3.3.1, "skip connections"): a layer
// with skip_from = j >= 0 takes a second input, the output of the earlier layer j, and its module's
// forward maps (x, skip) to one tensor. Then several tensors may cross one stage boundary and a
// tensor may cross several stages on its way (exec/runtime/stage_io.hpp). The model's graph,
// edges(), has the chain edges i-1 -> i and the skip edges j -> i. The layer names are those of the
// matching profile (core/profile.hpp), so a plan's layer indices address the same layers here.
//
// Besides the layers, a model knows its task and the shape of one sample, so it can make
// deterministic synthetic batches and compute a per-sample loss: an executor sums the per-sample
// losses of its micro-batches and divides by the mini-batch size, which reproduces single-process
// gradients exactly (for models without BatchNorm; see resnet.hpp).
//
// Build one with build_model() (zoo.hpp).
//
// Thread-safety: a LayeredModel is not synchronised. Different threads may run different layers
// concurrently (that is what pipeline stages do); one layer must not be run by two threads at
// once while training (BatchNorm updates its running statistics in place). The const methods are
// safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include "profiles/zoo/zoo.hpp"

namespace pipetwin::models {

struct Layer {
  std::string name;  // unique: "embed", "block3.attn", "block3.mlp", "head", "layer0", ...
  std::string kind;  // "embedding", "attention", "mlp", "conv", "residual", "linear", "head",
                     // "synthetic"
  torch::nn::AnyModule module;  // forward(Tensor) -> Tensor; forward(Tensor, Tensor) with a skip
  int skip_from = -1;           // model layer whose output is the second input, or -1

  // module.forward(x), or module.forward(x, skip) for a layer with skip_from >= 0.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip = {});
  torch::nn::Module& impl() const { return *module.ptr(); }
  std::vector<torch::Tensor> parameters() const { return impl().parameters(); }
  int64_t num_parameters() const;
};

// kRegression is pipetwin's addition for the synthetic model (uniform:...): its layers map
// [b, d] to [b, d] and its loss is a per-sample mean squared error.
enum class Task { kClassification, kLanguageModel, kRegression };
std::string to_string(Task task);

// One sample of the model's data.
struct SampleSpec {
  std::vector<int64_t> input_shape;   // without the batch dimension
  bool token_input = false;           // int64 token ids in [0, vocab) instead of real values
  int64_t vocab = 0;                  // token inputs and language models
  int64_t classes = 0;                // classification labels in [0, classes)
  std::vector<int64_t> target_shape;  // without the batch dimension: {} for a label, {seq} for a
                                      // language model or a label per position, {d} for
                                      // regression
};

struct LayeredModel {
  std::string name;  // canonical model name (ModelSpec::to_string form)
  Task task = Task::kClassification;
  torch::Dtype dtype = torch::kFloat32;  // parameters and real-valued inputs
  uint64_t seed = 0;                     // build_model's seed (clone() rebuilds from it)
  SampleSpec sample;
  std::vector<Layer> layers;

  // All layers in order: the whole model.
  torch::Tensor forward(const torch::Tensor& input);
  // Layers [begin, end) in order; `x` is layer begin-1's output. Throws std::invalid_argument
  // when a layer of the range takes a skip from a layer before `begin`.
  torch::Tensor forward_range(torch::Tensor x, size_t begin, size_t end);
  // Runs `layer_ids` (ascending) over `values`, keyed by producer: a model layer index, or
  // kModelInput for the model's input. Each layer reads its inputs from `values` and adds its
  // output; std::invalid_argument names a missing input.
  static constexpr int kModelInput = -1;
  void forward_layers(const std::vector<int>& layer_ids, std::map<int, torch::Tensor>& values);
  // The model graph: (producer, consumer) for the chain edges i-1 -> i and the skip edges, by
  // consumer, then producer.
  std::vector<std::pair<int, int>> edges() const;
  bool has_skips() const;
  // skip_from of every layer, in order.
  std::vector<int> skip_sources() const;

  // A batch of synthetic data on the CPU, a pure function of (batch, seed): normal(0, 1) values
  // or uniform token ids for the input; uniform labels (of target_shape per sample), normal(0, 1)
  // regression targets, or, for
  // a language model, the input sequence shifted by one (both are cut from one sequence of
  // seq + 1 tokens drawn from `seed`).
  torch::Tensor synthetic_input(int64_t batch, uint64_t seed) const;
  torch::Tensor synthetic_target(int64_t batch, uint64_t seed) const;

  // Loss per sample, shape [batch]: cross entropy for classification (over the output's last
  // dimension; the mean over positions where a sample has a label per position), the mean over
  // tokens of the cross entropy for a language model, the mean over features of the squared error
  // for regression.
  torch::Tensor per_sample_loss(const torch::Tensor& output, const torch::Tensor& target) const;

  std::vector<torch::Tensor> parameters() const;
  int64_t num_parameters() const;
  size_t index_of(const std::string& layer_name) const;  // throws if absent

  void train(bool on = true);  // dropout and BatchNorm statistics on/off (on after build)
  void to(torch::Device device);
  // A deep copy: the same architecture built again, then this model's parameter and buffer
  // values copied in, on the device of this model's first parameter.
  LayeredModel clone() const;

  // One line per layer: index, name, kind, parameter count; then a total line.
  std::string describe() const;
};

// The layers of a model description (profiles/zoo/configs.hpp's describe_*): the description's
// names, kinds and skip edges (an edge j -> i with j < i - 1 makes layer i's skip_from j), each
// with the module `make(layer, index)` returns, made in order (so parameters are drawn in order).
using MakeModule = std::function<torch::nn::AnyModule(const zoo::ZooLayer& layer, size_t index)>;
std::vector<Layer> layers_of(const zoo::ZooModel& description, const MakeModule& make);

}  // namespace pipetwin::models
