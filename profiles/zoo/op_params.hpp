// Op parameters: what one device charges for the kernels of profiles/zoo/ops.hpp, in the units
// profiles/zoo/op_cost.hpp prices them with. One file per device, every number with its source:
// a datasheet, a ratio to another device's datasheet (for GPUs not at hand, said so), or the
// micro-benchmark that measured it (`pipetwin calibrate --microbench`,
// exec/profile/microbench.hpp).
//
// Format "pipetwin.op_params" version 1 (JSON), under <catalog>/ops/<device>.json:
//   {"format": "pipetwin.op_params", "version": 1, "device": "h100-sxm",
//    "derivation": "datasheet" | "derived" | "measured", "notes": "...",
//    "units":          {"value": 132, "source": "..."},     SMs (a GPU) or cores a stage uses
//    "async":          {"value": true, "source": "..."},    kernels run behind the host (GPU)
//    "launch_s", "host_s", "host_node_s", "host_tensor_s": {"value": s, "source": "..."},
//    "bandwidth":      {"value": B/s, ...},                  achievable memory bandwidth
//    "cache_bytes", "cache_bandwidth": {...},                working sets that stay in a cache
//    "fused_attention": {"value": false, ...},
//    "attention_efficiency": {"forward": {...}, "backward": {...}},
//    "gemm": {"<dtype>": {"tile_m", "tile_n", "unit_flops", "tile_k_overhead": {...}}, ...},
//    "conv": {"efficiency": {"forward", "dgrad", "wgrad": {...}},
//             "winograd_dtypes": {"value": ["float32"], "source": "..."},
//             "fixed_s": {...}},                                  optional (0)
//    "elementwise": {"<class>": {"forward": {...}, "backward": {...}}, ...},   optional
//    "layer_refinement": {"scale", "first_forward_s", "first_backward_s", "last_forward_s",
//                         "last_backward_s": {...}},                          optional
//    "fit": {...}}                                           free-form report, optional
// launch_s: the device's fixed cost per kernel; host_s: the host's per operator (dispatch,
// allocation, the launch call); host_node_s: the autograd engine's per node of a backward;
// host_tensor_s: an optimizer's per parameter tensor and call (a CPU loops over tensors; a GPU's
// multi-tensor kernels do not: 0). units x unit_flops is the device's achievable GEMM rate in
// that dtype; a GEMM's output is cut into tile_m x tile_n tiles, each costing
// 2 tile_m tile_n (K + tile_k_overhead) / unit_flops (profiles/zoo/op_cost.hpp). conv
// efficiencies scale the implicit-GEMM time of each pass; conv fixed_s is what every
// convolution call costs beyond it (a CPU library's set-up: oneDNN's primitive and reorders).
// elementwise: elements per second of a class (ops.hpp EltClass names) when its working set is in
// the cache, forward and backward; classes not listed are priced by memory traffic alone.
// layer_refinement: what the op-level profile does to a layer's op-priced pass times, fitted to
// measured layers (profiles/zoo/op_validation.hpp): every pass times `scale`, plus fixed seconds on
// the model's first and last layer. Every field but elementwise, layer_refinement, fit and notes is
// required; a bad one is an InputError naming the file and the field.
//
// Thread-safety: value types and pure functions (file I/O in load/save).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin::zoo {

// A number and where it comes from.
struct Sourced {
  double value = 0;
  std::string source;
};

struct GemmParams {
  Sourced tile_m, tile_n, unit_flops, tile_k_overhead;
};

struct EltRate {
  Sourced forward, backward;  // elements per second, working set in the cache
};

// Measured layers against their op-priced times (profiles/zoo/op_validation.hpp).
struct LayerRefinement {
  Sourced scale{1, "none"}, first_forward_s{0, "none"}, first_backward_s{0, "none"},
      last_forward_s{0, "none"}, last_backward_s{0, "none"};
};

struct OpParams {
  std::string device, derivation, notes;
  Sourced units, launch_s, host_s, host_node_s, host_tensor_s;
  bool async = true;
  std::string async_source;
  Sourced bandwidth, cache_bytes, cache_bandwidth;
  bool fused_attention = false;
  std::string fused_attention_source;
  Sourced attention_forward, attention_backward;  // fractions of the GEMM rate
  std::map<std::string, GemmParams> gemm;         // per dtype
  Sourced conv_forward, conv_dgrad, conv_wgrad;   // fractions of the implicit-GEMM rate
  Sourced conv_fixed_s{0, "none"};                // a convolution call's own fixed device time
  std::vector<std::string> winograd_dtypes;
  std::string winograd_source;
  std::map<std::string, EltRate> elementwise;  // per EltClass name
  std::optional<LayerRefinement> refinement;
  Json fit;
  std::string origin;  // the file it was read from (for errors); empty when built in code

  // The GEMM parameters of `dtype`; an InputError naming the file when it has none.
  const GemmParams& gemm_for(const std::string& dtype) const;
};

OpParams op_params_from_json(const JsonView& doc);
Json op_params_to_json(const OpParams& p);
OpParams load_op_params(const std::string& path);
void save_op_params(const OpParams& p, const std::string& path);  // atomically

// <catalog_dir>/ops/<device>.json
std::string op_params_path(const std::string& catalog_dir, const std::string& device);

}  // namespace pipetwin::zoo
