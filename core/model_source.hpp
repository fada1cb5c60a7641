// Where a model's costs come from: a profile file, the synthetic model, or a shipped profile.
//
// resolve_profile() turns the `--model` / `--profile` pair of the CLI (or a plan's model name)
// into a Profile: an explicit profile file wins; a synthetic spec is built in place; any other
// zoo name is looked up among the shipped profiles under traces/ (a profile whose "model" field
// is that name), preferring one measured on `preferred_device`.
//
// Thread-safety: pure functions (reads files).
#pragma once

#include <string>
#include <vector>

#include "core/profile.hpp"

namespace pipetwin {

// PIPETWIN_DATA (or the build's data folder) + "/traces".
std::string default_traces_dir();

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& preferred_device = "");

// Shipped profiles found under `dir` (recursively): path and the model/device they describe.
struct ShippedProfile {
  std::string path, model, device, source;
};
std::vector<ShippedProfile> list_shipped_profiles(const std::string& dir);

}  // namespace pipetwin
