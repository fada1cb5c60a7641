// The one description of every model family that both the analytic zoo (profiles/zoo/) and the
// LibTorch zoo (models/) build: its config, the ONE parser from a ModelSpec with the ONE preset
// table, and the layout (layer names, kinds, block shapes, skips) that describe_model() and
// models/'s builders both follow. models::build_model(name) parses with these parsers, so a name
// means the same model, layer for layer, in both zoos (tests/models_zoo_test.cpp checks names,
// kinds, parameters per layer and edges for every preset).
//
// Presets (aliases name the same config; every name either zoo accepted before is kept):
//   vit:   test, tiny (default), small, base = b16, large = l16
//   bert:  tiny (default), mini, small, medium, base, large
//   gpt2:  tiny (default), small = 124m, medium = 355m, large = 774m, xl = 1.5b
//   resnet20 | resnet32 | ... | resnet:depth=6n+2 (CIFAR), resnet:50 | resnet:101 | resnet:152
//   unet[:B=,C=,...], mlp[:layers=,...]: options only
// The families' papers, shapes and options are documented in transformer.cpp, convnets.cpp and
// unet.cpp (analytic side) and models/<family>.hpp (LibTorch side).
//
// Thread-safety: pure functions over value types; the preset tables are immutable statics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/model_spec.hpp"
#include "profiles/zoo/options.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

// ---- configs and parsers -------------------------------------------------------------------

struct VitConfig {
  int64_t depth = 12, dim = 192, heads = 3, mlp = 768;
  int64_t image = 32, patch = 4, channels = 3, classes = 10;
  double dropout = 0;
};

struct BertConfig {
  int64_t layers = 2, hidden = 128, heads = 2, ffn = 512;
  int64_t vocab = 30522, positions = 512, type_vocab = 2;
  int64_t seq = 128, classes = 2;
  double dropout = 0;
};

// `vocab` is the tokenizer's vocabulary (token ids and targets lie in [0, vocab)); the embedding
// table and the LM head have padded_vocab() rows, vocab rounded up to a multiple of
// `vocab_multiple` (128: Megatron-LM's and nanoGPT's practice, 50257 -> 50304, so the head's
// matrix product tiles evenly). The extra logits are never targets; the softmax still covers them.
// Every GPT-2 pads by the same rule, the test sizes with a small vocabulary too (vocab=40 builds
// 128 rows), so the tests exercise the padded model that the paper sizes train; vocab_multiple=1
// builds the unpadded, published shape.
struct Gpt2Config {
  int64_t layers = 2, dim = 128, heads = 2;
  int64_t vocab = 1024, ctx = 64, seq = 64;
  double dropout = 0;
  int64_t vocab_multiple = 128;
  int64_t padded_vocab() const {
    return (vocab + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  }
};

// CIFAR ResNets (basic blocks, `bottleneck` false) and ImageNet ResNets (bottleneck blocks,
// `stages` blocks per stage, base width `width`, 64 as published).
struct ResNetConfig {
  int64_t depth = 20;  // CIFAR: 6n + 2; ImageNet: 50, 101, 152
  int64_t classes = 10;
  int64_t channels = 3;
  int64_t image = 32;
  bool group_norm = false;
  bool bottleneck = false;
  std::vector<int64_t> stages;  // ImageNet: bottleneck blocks per stage
  int64_t width = 64;           // ImageNet: the stem's channels, 4x that after stage 1
};

struct UNetConfig {
  int64_t blocks = 5;     // B: convolution blocks per level (>= 2)
  int64_t channels = 64;  // C: output channels of the first convolution (even)
  int64_t image = 192;    // input side, a multiple of 2^5
  int64_t in_channels = 3;
  int64_t out_channels = 1;
  bool group_norm = false;
};

struct MlpConfig {
  int64_t layers = 4;  // hidden Linear + ReLU layers (0: the head alone)
  int64_t width = 256;
  int64_t input = 64;
  int64_t classes = 10;
  bool skip = false;  // the head reads fc0's output too: Linear(x + fc0's output)
};

inline constexpr int64_t kResNetGroups = 8;  // GroupNorm groups of resnet:norm=group

VitConfig vit_config(const ModelSpec& spec);
BertConfig bert_config(const ModelSpec& spec);
Gpt2Config gpt2_config(const ModelSpec& spec);
ResNetConfig resnet_config(const ModelSpec& spec);  // family "resnet" or "resnet<depth>"
UNetConfig unet_config(const ModelSpec& spec);
MlpConfig mlp_config(const ModelSpec& spec);

const std::vector<Preset<VitConfig>>& vit_presets();
const std::vector<Preset<BertConfig>>& bert_presets();
const std::vector<Preset<Gpt2Config>>& gpt2_presets();
const std::vector<Preset<ResNetConfig>>& resnet_presets();  // ImageNet; CIFAR: resnet<depth>

bool is_resnet_alias(const std::string& family);  // "resnet20", "resnet32", ...

// The families both zoos build ("vit", "bert", "gpt2", "resnet", "unet", "mlp"), and every name
// their preset tables accept, as model names: "vit:b16", "resnet20", "resnet:50", "unet".
std::vector<std::string> shared_families();
std::vector<std::string> preset_models(const std::string& family);

// ---- descriptors of a parsed config ----------------------------------------------------------

ZooModel describe_vit(const VitConfig& c);
ZooModel describe_bert(const BertConfig& c);
ZooModel describe_gpt2(const Gpt2Config& c);
ZooModel describe_resnet(const ResNetConfig& c);
ZooModel describe_unet(const UNetConfig& c);
ZooModel describe_mlp(const MlpConfig& c);

// ---- layouts the LibTorch builders follow ----------------------------------------------------

// One residual block of a ResNet: "block{i}", c_in -> c_out at `stride`. A bottleneck block's
// middle width is `mid`; `project` when its shortcut is a 1x1 projection (ImageNet) -- CIFAR
// blocks pad the shortcut with zeros instead (option A).
struct ResNetBlock {
  std::string name;
  int64_t in = 0, mid = 0, out = 0, stride = 1;
  bool project = false;
};
int64_t resnet_stem_width(const ResNetConfig& c);  // 16 (CIFAR) or width (ImageNet)
std::vector<ResNetBlock> resnet_blocks(const ResNetConfig& c);

// One convolution block of U-Net(B, C): 3x3 convolution c_in -> c_out at `level` (the image
// side is image >> level; the bottleneck is level 5). `pool`: max-pools its input first. `skip`:
// up-samples its input and concatenates the output of layer `skip` (an encoder block) first.
struct UNetBlock {
  std::string name;
  int level = 0;
  int64_t in = 0, out = 0;
  bool pool = false;
  int skip = -1;
};
inline constexpr int kUNetLevels = 5;  // "five down-sampling layers and five up-sampling layers"
std::vector<UNetBlock> unet_blocks(const UNetConfig& c);
int64_t unet_segment_channels(const UNetConfig& c);  // C / 2, the 1x1 "segment" head's input

}  // namespace pipetwin::zoo
