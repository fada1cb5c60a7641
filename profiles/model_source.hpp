// Where a model's costs come from: a profile file, the synthetic model, a shipped profile, or
// the analytic roofline over a zoo descriptor.
//
// resolve_profile() turns the `--model` / `--profile` pair of the CLI (or a plan's model name)
// into a Profile, first match wins:
//   1. an explicit profile file;
//   2. a synthetic spec, built in place;
//   3. a shipped MEASURED profile under traces/ (a profile whose "model" field is that name),
//      preferring one measured on the requested device: a measured profile wins over the
//      analytic one when both exist (the cost model scales it to the device), except that a
//      profile measured on another device is not scaled to a zoo model's device that has op
//      parameters (step 4's op-level model prices that device from its operations);
//   4. a zoo name (profiles/zoo/zoo.hpp) on a known device: an analytic profile on that device.
//      The op-level model (profiles/zoo/op_cost.hpp) when the catalog has op parameters for the
//      device (<catalog>/ops/<device>.json) in the dtype, unless an efficiency file is given
//      (ResolveOptions::efficiency_file) or the catalog's efficiency file for the device was
//      derived from published measurements of it (one with "sources": the Turing and Pascal GPUs
//      of the papers reproduced); else the roofline (profiles/zoo/analytic.hpp) with the
//      efficiencies calibrated for the device when the catalog has
//      <catalog>/efficiency/<device>.json, else the built-in defaults. So a GPU with op
//      parameters (the H100 and H200 among them) is priced by the operations its layers launch,
//      not by efficiencies fitted to profiles of a slow executor;
//   5. any other shipped profile of that name (e.g. an analytic one for another device).
// The device is a DeviceSpec, or a name looked up in the default catalog (hardware/devices.json).
//
// ResolveOptions narrows it to a training precision (float32 when none is given) and an optimizer.
// Steps 3 and 5 consider only profiles in that dtype (a bfloat16 profile measured on a GPU is not
// a float32 one scaled), step 1 refuses a file of another dtype, and step 4 builds
// the analytic profile in it (with the efficiencies calibrated for that device and dtype,
// <catalog>/efficiency/<device>-<dtype>.json, before <device>.json). With an optimizer, the
// profile's optimizer state and step time are made that optimizer's (core/precision.hpp).
//
// Thread-safety: pure functions (reads files).
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "core/tensor_parallel.hpp"

namespace pipetwin {

// PIPETWIN_DATA (or the build's data folder) + "/traces".
std::string default_traces_dir();

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& preferred_device = "");
// As above, for a device that need not be in the default catalog (a cluster's inline device).
// `efficiency_file` (optional) overrides the catalog's calibrated efficiencies.
Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const DeviceSpec& device, const std::string& efficiency_file = "");

struct ResolveOptions {
  std::string dtype;      // empty: float32
  std::string optimizer;  // empty: as the profile states (analytic: adam)
  std::string efficiency_file;  // overrides the catalog's calibrated efficiencies
  // Not the whole model but one shard of it (profiles/zoo/tensor_parallel.hpp): the profile of
  // the model, whatever its source, made a shard's by the ratios of the priced shard and whole on
  // the device (else the profile's own); a model outside the zoo's transformers is an InputError.
  TensorParallel tensor_parallel{};
};
Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const DeviceSpec& device, const ResolveOptions& options);
// As above with the device named in the default catalog (a name not there allows only steps
// 1-3 and 5).
Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& device, const ResolveOptions& options);

// Shipped profiles found under `dir` (recursively): path and the model/device they describe.
struct ShippedProfile {
  std::string path, model, device, source, dtype;
};
std::vector<ShippedProfile> list_shipped_profiles(const std::string& dir);

}  // namespace pipetwin
