#include "core/model_source.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/synthetic.hpp"
#include "core/zoo/analytic.hpp"
#include "core/zoo/zoo.hpp"

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
    if (!e.is_regular_file() || name.size() < 13 ||
        name.substr(name.size() - 13) != ".profile.json")
      continue;
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

namespace {

// Shipped profiles of `model`: the best measured one (preferring `device`), and the best other.
struct ShippedMatch {
  const ShippedProfile* measured = nullptr;
  const ShippedProfile* other = nullptr;
};

ShippedMatch find_shipped(const std::vector<ShippedProfile>& shipped, const ModelSpec& spec,
                          const std::string& model, const std::string& device) {
  ShippedMatch m;
  for (const auto& s : shipped) {
    if (s.model != spec.to_string() && s.model != model) continue;
    const ShippedProfile*& best = s.source == "measured" ? m.measured : m.other;
    if (!best || (s.device == device && best->device != device)) best = &s;
  }
  return m;
}

zoo::Efficiency efficiency_for(const DeviceSpec& device, const std::string& efficiency_file) {
  if (!efficiency_file.empty()) return zoo::load_efficiency(efficiency_file);
  const fs::path catalog_file =
      fs::path(Catalog::default_dir()) / "efficiency" / (device.name + ".json");
  if (fs::is_regular_file(catalog_file)) return zoo::load_efficiency(catalog_file.string());
  return zoo::default_efficiency();
}

[[noreturn]] void no_profile(const std::string& model, const std::string& why) {
  throw InputError(
      fmt::format("--model: no shipped profile of \"{}\" under {}{}; measure one with "
                  "`pipetwin profile --model {}` and pass it with --profile",
                  model, default_traces_dir(), why, model));
}

// Steps 1-3 of the resolution; null when none applies.
std::optional<Profile> explicit_or_measured(const std::string& model,
                                            const std::string& profile_path,
                                            const std::string& device, ShippedMatch& match,
                                            std::vector<ShippedProfile>& shipped) {
  if (!profile_path.empty()) return load_profile(profile_path);
  if (model.empty()) throw InputError("give a model (--model NAME) or a profile (--profile FILE)");
  const ModelSpec spec = ModelSpec::parse(model, "--model");
  if (is_synthetic_model(spec)) return synthetic_profile(spec);
  shipped = list_shipped_profiles(default_traces_dir());
  match = find_shipped(shipped, spec, model, device);
  if (match.measured) return load_profile(match.measured->path);
  return std::nullopt;
}

}  // namespace

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const DeviceSpec& device, const std::string& efficiency_file) {
  ShippedMatch match;
  std::vector<ShippedProfile> shipped;
  if (auto p = explicit_or_measured(model, profile_path, device.name, match, shipped)) return *p;
  const ModelSpec spec = ModelSpec::parse(model, "--model");
  if (zoo::is_zoo_family(spec)) {
    zoo::AnalyticOptions options;
    options.efficiency = efficiency_for(device, efficiency_file);
    return zoo::analytic_profile(zoo::describe_model(spec), device, options);
  }
  if (match.other) return load_profile(match.other->path);
  no_profile(model, "");
}

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& preferred_device) {
  ShippedMatch match;
  std::vector<ShippedProfile> shipped;
  if (auto p = explicit_or_measured(model, profile_path, preferred_device, match, shipped)) {
    return *p;
  }
  const ModelSpec spec = ModelSpec::parse(model, "--model");
  if (zoo::is_zoo_family(spec) && !preferred_device.empty()) {
    const Catalog catalog = Catalog::load(Catalog::default_dir());
    if (const DeviceSpec* device = catalog.find_device(preferred_device)) {
      return resolve_profile(model, "", *device);
    }
  }
  if (match.other) return load_profile(match.other->path);
  no_profile(model, zoo::is_zoo_family(spec) && !preferred_device.empty()
                        ? fmt::format(", and device \"{}\" is not in the catalog for an analytic "
                                      "profile",
                                      preferred_device)
                        : "");
}

}  // namespace pipetwin
