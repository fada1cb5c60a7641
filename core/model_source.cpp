#include "core/model_source.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/synthetic.hpp"

#ifndef PIPETWIN_DATA_DIR
#define PIPETWIN_DATA_DIR "."
#endif

namespace pipetwin {

namespace fs = std::filesystem;

std::string default_traces_dir() {
  if (const char* env = std::getenv("PIPETWIN_DATA"); env && *env) {
    return (fs::path(env) / "traces").string();
  }
  return (fs::path(PIPETWIN_DATA_DIR) / "traces").string();
}

std::vector<ShippedProfile> list_shipped_profiles(const std::string& dir) {
  std::vector<ShippedProfile> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.size() < 13 || name.substr(name.size() - 13) != ".profile.json") continue;
    try {
      const Json doc = load_json_file(e.path().string());
      out.push_back({e.path().string(), doc.value("model", ""), doc.value("device", ""),
                     doc.value("source", "")});
    } catch (const InputError&) {
      // A broken shipped file is reported when it is used, not while listing.
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& preferred_device) {
  if (!profile_path.empty()) return load_profile(profile_path);
  if (model.empty()) throw InputError("give a model (--model NAME) or a profile (--profile FILE)");
  const ModelSpec spec = ModelSpec::parse(model, "--model");
  if (is_synthetic_model(spec)) return synthetic_profile(spec);
  const auto shipped = list_shipped_profiles(default_traces_dir());
  const ShippedProfile* best = nullptr;
  for (const auto& s : shipped) {
    if (s.model != spec.to_string() && s.model != model) continue;
    if (!best || (s.device == preferred_device && best->device != preferred_device)) best = &s;
  }
  if (!best) {
    throw InputError(fmt::format("--model: no shipped profile of \"{}\" under {}; measure one with "
                                 "`pipetwin profile --model {}` and pass it with --profile",
                                 model, default_traces_dir(), model));
  }
  return load_profile(best->path);
}

}  // namespace pipetwin
