// The synthetic model: a profile built from a few numbers, for teaching and closed-form tests.
//
//   uniform:layers=L,fwd_ms=f,bwd_ms=b,act_kb=a,param_kb=p
//
// gives L identical layers. Every per-layer option also takes a '/'-separated list, one value per
// layer ("per-layer list form"): `uniform:fwd_ms=1/2/3/4,bwd_ms=2/4/6/8` is a 4-layer model with
// unequal layers. Options (all per sample unless noted; a layer's time for a micro-batch of b
// samples is overhead_ms + fwd_ms*b):
//   layers        number of layers (default: the length of a list option, else 4)
//   fwd_ms        forward time per sample (default 1)
//   bwd_ms        backward time per sample (default 2*fwd_ms)
//   recompute_ms  recompute time per sample (default fwd_ms)
//   overhead_ms   fixed time per layer call (default 0)
//   act_kb        output activation per sample in KiB (default 0)
//   saved_kb      activations saved for backward per sample in KiB (default act_kb)
//   input_kb      model input per sample in KiB (default act_kb of the first layer)
//   param_kb      parameters per layer in KiB (default 0)
//   optimizer_kb  optimizer state per layer in KiB (default 0)
//   opt_ms        optimizer-step time per layer, in place (default 0)
//   opt_new_ms    the step that writes a new weight version (weight stashing; default opt_ms)
//   wgrad_ms      the weight-gradient part of bwd_ms per sample, a split backward's W (default:
//                 the cost model's estimate, none without parameters; cost_model.hpp)
// The same model exists in both engines: the executor builds matching LibTorch layers from it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "profiles/model_spec.hpp"
#include "core/profile.hpp"

namespace pipetwin {

bool is_synthetic_model(const ModelSpec& spec);
Profile synthetic_profile(const ModelSpec& spec, const std::string& device = "synthetic");

}  // namespace pipetwin
