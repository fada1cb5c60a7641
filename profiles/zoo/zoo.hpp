// The analytic model zoo: paper-scale models described by numbers, with no weights.
//
// Where it lives. The LibTorch models are under models/, but models/ is
// built only with LibTorch; the descriptors live in profiles/zoo/ so that the planner-only build
// (PIPETWIN_WITH_TORCH=OFF) can plan and simulate BERT-large or T5-3B on hardware the user does
// not own. Nothing here includes LibTorch.
//
// What a descriptor is. For every layer (the unit a partitioner places on a stage): its op kind,
// parameter count, forward FLOPs per sample, the elements of its output per sample (what crosses
// a stage boundary) and of what it keeps for backward, the activation elements its forward
// reads and writes (for the roofline's memory term, profiles/zoo/analytic.hpp), and the
// operations it launches (for the op-level model, profiles/zoo/ops.hpp and op_cost.hpp). Elements,
// not bytes: the dtype is chosen when a profile is built. Edges are tensors between layers; a skip
// connection (U-Net, T5's encoder output feeding every decoder cross-attention, AmoebaNet's
// two-input cells) is an edge between non-adjacent layers. Without edges the layers form a chain.
//
// Conventions (chosen here; the papers leave them open):
//   - FLOPs count multiply-adds of matrix products and convolutions as 2 FLOPs; element-wise
//     ops (norms, activations, softmax) are left out of FLOPs and appear in the memory traffic.
//   - Saved elements follow what LibTorch's autograd keeps for the models of models/ (layer
//     output included, layer input excluded, as exec/profile/profiler.cpp measures): for the
//     test-size models they match the shipped measured profiles to within per-micro-batch constants
//     (a causal mask, BatchNorm statistics) that do not scale with the micro-batch.
//   - Traffic per sample = input + 2 x saved: every kept intermediate is written once and read
//     once by the next op. Weights are read once per micro-batch (embeddings gather rows only).
//   - Transformer blocks are split into an attention and an MLP sub-layer, each its own layer,
//     the granularity PipeTransformer's AutoPipe partitions at (Algorithm 1, line 7).
//
// Names (profiles/model_spec.hpp syntax) are one description with the LibTorch zoo
// (models/zoo.hpp): the families both build (vit, bert, gpt2, resnet, unet, mlp) have one config,
// parser and preset table (profiles/zoo/configs.hpp), and the LibTorch builders follow the
// descriptors' layer lists (names, order, kinds, skip edges). Described here only:
//   t5:small | base | large | 3b | 11b [,enc_seq=,dec_seq=]   amoebanet:L=,F= (torchgpipe / GPipe)
//   vgg:11 | 13 | 16 | 19 (or vgg16, ...)   alexnet   (torchvision's, PipeDream;
//   profiles/zoo/vgg.cpp)
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/precision.hpp"
#include "profiles/model_spec.hpp"
#include "profiles/zoo/ops.hpp"

namespace pipetwin::zoo {

struct ZooLayer {
  std::string name;
  std::string kind;  // "embedding", "attention", "cross-attention", "mlp", "head", "conv", ...
  int64_t params = 0;
  double forward_flops = 0;   // per sample
  double output_elems = 0;    // per sample
  double saved_elems = 0;     // per sample, output included
  double traffic_elems = 0;   // per sample: activation elements read and written by the forward
  bool dense_weights = true;  // forward reads every weight (false: an embedding gathers rows)
  // Under bfloat16/float16 autocast the output stays float32: the layer ends by adding to a
  // float32 residual stream or a float32 parameter (a transformer block's x + f(x), an embedding's
  // positions; autocast lowers only matmuls and convolutions). Measured: every layer of ViT, BERT
  // and GPT-2 but the head hands on 4-byte elements in a bfloat16 profile.
  bool float32_output = false;
  // The operations the forward launches, per sample (profiles/zoo/ops.hpp), as the executor's
  // module for the layer calls them; empty: priced from forward_flops and traffic_elems alone.
  std::vector<OpSpec> ops;
};

struct ZooEdge {
  int from = 0;
  int to = 0;
  double elems = 0;     // per sample
  bool tokens = false;  // int64 token ids rather than activations of the model's dtype
};

struct ZooModel {
  std::string name;    // canonical ModelSpec string
  std::string family;  // "vit", "bert", ...
  std::string description;
  double input_elems = 0;     // model input per sample
  bool input_tokens = false;  // int64 token ids (8 bytes each) rather than the model's dtype
  std::vector<ZooLayer> layers;
  std::vector<ZooEdge> edges;  // empty: a chain, edge i -> i+1 carries layer i's output
  // Parameters the published model shares between two layers (GPT-2's LM head and T5's decoder
  // embedding and LM head, tied to the input embedding) that this descriptor, like the executor,
  // keeps as separate copies in separate layers so that stages can hold them apart.
  int64_t tied_params = 0;

  int num_layers() const { return static_cast<int>(layers.size()); }
  int64_t parameters() const;  // as built: every layer's parameters
  int64_t unique_parameters() const { return parameters() - tied_params; }  // the published count
  double forward_flops() const;                                             // per sample
  int layer_index(const std::string& layer_name) const;                     // -1 when absent
};

// True when `spec` names a family this zoo describes (presets and options are checked later).
bool is_zoo_family(const ModelSpec& spec);
// The descriptor of a model; an unknown family, preset or option is an InputError naming
// spec.origin and the bad item.
ZooModel describe_model(const ModelSpec& spec);
ZooModel describe_model(const std::string& name, const std::string& origin = "--model");
// Every preset name, test sizes and paper sizes, in a stable order.
std::vector<std::string> zoo_names();

// Bytes of one element of a dtype: the table in core/precision.hpp.
using pipetwin::dtype_bytes;

}  // namespace pipetwin::zoo
