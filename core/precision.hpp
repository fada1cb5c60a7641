// Precision and optimizer: what one parameter costs in memory and in the optimizer step, for a
// training dtype and an optimizer rule.
//
// Mixed precision as Micikevicius et al. ("Mixed Precision Training", ICLR 2018) and ZeRO
// (Rajbhandari et al., SC 2020, section 3.1) count it: the forward and backward run on 2-byte
// (float16/bfloat16) weights and produce 2-byte gradients; the optimizer updates a float32 master
// copy of the weights and keeps its state in float32, then writes the 2-byte weights back. Per
// parameter, in bytes:
//
//                       weight  gradient  master  state (sgd / momentum / adam)
//   float32, float64     e        e         0      0 / e / 2e         (e = 4 or 8)
//   float16, bfloat16    2        2         4      0 / 4 / 8
//
// So Adam in mixed precision is ZeRO's 2 + 2 + 12 = 16 bytes per parameter. PyTorch's autocast
// keeps float32 weights and gradients (4 + 4) and casts the weights per forward, which is the
// same 16 bytes (8 + 8 for Adam's moments) split differently; a profile measured under autocast
// carries that split (its param_bytes are float32) and optimizer_state_bytes() below applies to
// it unchanged, since it counts state per byte of the weights the optimizer updates.
//
// The step is bound by memory traffic (it does a few flops per byte): it reads the weight it
// updates, the gradient and each state buffer, and writes the weight and each buffer; in mixed
// precision it also writes the 2-byte copy. Bytes moved per parameter:
//   plain dtypes   3e + 2 x moments x e                   (Adam in float32: 28 = 7 x 4)
//   mixed          (4 + 4) + 2 + 2 + 2 x moments x 4     (read/write master, read gradient,
//                                                          write the 2-byte weight: also 28)
//
// Thread-safety: value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"

namespace pipetwin {

// One training dtype, the one table every layer reads (the executor maps `name` to its
// at::ScalarType in exec/runtime/autocast.hpp; the roofline reads the device's peak under
// `peak_key`).
struct DtypeInfo {
  std::string name;
  double bytes = 4;       // bytes per element of weights, gradients and activations
  bool mixed = false;     // 2-byte compute with a float32 master copy (autocast in the executor)
  std::string peak_key;   // the device catalog's peak_flops key (DeviceSpec::flops)
  bool executable = true; // the executor can train in it (tfloat32 is a GPU math mode only)
};

// The dtypes pipetwin knows, in the order error messages list them.
const std::vector<DtypeInfo>& dtype_table();
std::vector<std::string> dtype_names();
// `name`'s row; anything else is an InputError naming `origin` and the known dtypes.
const DtypeInfo& dtype_info(const std::string& name, const std::string& origin = "dtype");
// The dtypes the executor trains in (DtypeInfo::executable).
std::vector<std::string> executable_dtype_names();
// Bytes per element of `name` (dtype_info(name, origin).bytes).
double dtype_bytes(const std::string& name, const std::string& origin = "dtype");

// An optimizer rule by the state it keeps: "sgd" (none), "momentum" (one buffer), "adam" (two).
struct OptimizerKind {
  std::string name;
  int moments = 0;  // state buffers, each the size of the master weights
};

// The optimizer rules pipetwin knows, in the order error messages list them.
std::vector<std::string> optimizer_names();

// "sgd", "momentum" or "adam"; anything else is an InputError naming `origin` and the known ones.
OptimizerKind parse_optimizer(const std::string& name, const std::string& origin = "--optimizer");

// True for the 2-byte dtypes trained with a float32 master copy (float16, bfloat16); an
// InputError for an unknown dtype.
bool is_mixed_precision(const std::string& dtype);

// Bytes per parameter for training in `dtype` with `optimizer` (the table above).
struct ParamBytes {
  double weight = 0, gradient = 0, master = 0, state = 0;
  double step_traffic = 0;  // bytes the optimizer step moves
  // What the profile calls optimizer_bytes: everything the optimizer alone keeps.
  double optimizer() const { return master + state; }
  double total() const { return weight + gradient + master + state; }
};
ParamBytes param_bytes(const std::string& dtype, const OptimizerKind& optimizer);

// Rewrites `profile`'s optimizer state and step time for `optimizer`. State: moments x the bytes of
// the weights the optimizer updates (for an analytic mixed-precision profile, on top of the
// master copy). Step time: a measured step is scaled by the ratio of the traffic of the new rule to
// that of the rule it was measured with (Profile::optimizer; an InputError naming `origin` when the
// profile does not say); a step of 0 (not measured) stays 0.
void apply_optimizer(Profile& profile, const OptimizerKind& optimizer,
                     const std::string& origin = "--optimizer");

}  // namespace pipetwin
