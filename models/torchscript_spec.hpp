// TorchScriptSpec: what a model name `torchscript:FILE.pt[,key=value...]` says about a user's
// TorchScript module, merged with the metadata python/pipetwin_save.py's save_for_pipetwin()
// writes beside it (FILE.pt.json, format "pipetwin.torchscript"). models/torchscript.hpp builds
// the module from it; this half reads no LibTorch, so it stays cheap to compile.
//
// The name's options (each also a `pipetwin profile` flag, folded into the name by
// torchscript_model_name so that the profile, the plan made from it and every process of a run
// carry them):
//   input_shape=D1/D2/...   one sample's input, without the batch dimension (--input-shape D1,D2)
//   input_dtype=float32|float64|int64   real values (made in the run's dtype) or token ids
//   vocab=N                 token ids are drawn from [0, N) (int64 inputs)
//   loss=cross_entropy|mse  per sample: cross entropy over the output's last dimension (averaged
//                           over the other positions), or the mean squared error
//   classes=N               cross entropy: the number of classes (default: the output's last
//                           dimension)
//   target_shape=D1/D2/...  one sample's target (default: the output's shape, less the class
//                           dimension for cross entropy)
// An option given in the name wins over the metadata. The metadata also lists the module's layers
// (its children) with the skip edge each one takes (`skip_from`: an earlier child whose output is
// the child's second input), which the name cannot say.
//
// Thread-safety: pure functions (read the metadata file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiles/model_spec.hpp"

namespace pipetwin::models {

inline constexpr const char* kTorchScriptFamily = "torchscript";

// One layer as the metadata lists it.
struct TorchScriptLayerMeta {
  std::string name;       // the child's name: "0", "fc1", "layers.3"
  std::string kind;       // "" where the metadata has none
  std::string skip_from;  // name of the child whose output is the second input, or ""
};

struct TorchScriptSpec {
  std::string path;                  // FILE.pt, as the name gives it
  std::string name;                  // canonical model name (ModelSpec::to_string)
  std::string metadata_path;         // FILE.pt.json when it exists, else ""
  std::vector<int64_t> input_shape;  // empty: not given
  bool has_input_shape = false;
  bool token_input = false;  // int64 token ids, else real values
  int64_t vocab = 0;
  std::string loss = "cross_entropy";  // or "mse"
  int64_t classes = 0;                 // 0: the output's last dimension
  std::optional<std::vector<int64_t>> target_shape;
  std::vector<TorchScriptLayerMeta> layers;  // empty: no metadata
};

// Whether `name` is a `torchscript:` model name.
bool is_torchscript_model(const std::string& name);

// The spec of a parsed `torchscript:` name, with FILE.pt.json read when it exists. InputError for
// a name without a file, an unknown option, a bad value, or a metadata file that does not
// validate (naming the file and the field).
TorchScriptSpec torchscript_spec(const ModelSpec& spec);

// `pipetwin profile`'s flags for a TorchScript model; empty / 0: not given.
struct TorchScriptFlags {
  std::string input_shape;   // "D1,D2,..."
  std::string input_dtype;   // float32, float64 or int64
  std::string loss;          // cross_entropy or mse
  std::string target_shape;  // "D1,D2,..."
  int64_t classes = 0;
  int64_t vocab = 0;
  bool any() const;
};

// `model` with the flags folded in as options, canonical. InputError when a flag is given for a
// model that is not `torchscript:`, is malformed, or repeats an option the name already has.
std::string torchscript_model_name(const std::string& model, const TorchScriptFlags& flags);

}  // namespace pipetwin::models
