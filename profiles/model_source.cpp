#include "profiles/model_source.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "profiles/model_spec.hpp"
#include "profiles/synthetic.hpp"
#include "profiles/zoo/analytic.hpp"
#include "profiles/zoo/op_cost.hpp"
#include "profiles/zoo/tensor_parallel.hpp"
#include "profiles/zoo/zoo.hpp"

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
                     doc.value("source", "measured"), doc.value("dtype", "float32")});
    } catch (const InputError&) {
      // A broken shipped file is reported when it is used, not while listing.
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

namespace {

// Shipped profiles of `model` in `dtype` (float32 when empty): the best measured one (preferring
// `device`), and the best other.
struct ShippedMatch {
  const ShippedProfile* measured = nullptr;
  const ShippedProfile* other = nullptr;
};

bool better_than(const ShippedProfile& s, const ShippedProfile* best, const std::string& device) {
  if (!best) return true;
  return (s.device == device) && (best->device != device);
}

ShippedMatch find_shipped(const std::vector<ShippedProfile>& shipped, const ModelSpec& spec,
                          const std::string& model, const std::string& device,
                          const std::string& dtype) {
  ShippedMatch m;
  for (const auto& s : shipped) {
    if (s.model != spec.to_string() && s.model != model) continue;
    // No dtype asked for is float32's: a profile measured under autocast stands for another
    // training set-up, taken only when its dtype is asked for.
    if (s.dtype != (dtype.empty() ? "float32" : dtype)) continue;
    const ShippedProfile*& best = s.source == "measured" ? m.measured : m.other;
    if (better_than(s, best, device)) best = &s;
  }
  return m;
}

zoo::Efficiency efficiency_for(const DeviceSpec& device, const std::string& dtype,
                               const std::string& efficiency_file) {
  if (!efficiency_file.empty()) return zoo::load_efficiency(efficiency_file);
  const fs::path dir = fs::path(Catalog::default_dir()) / "efficiency";
  const fs::path for_dtype = dir / (device.name + "-" + dtype + ".json");
  if (fs::is_regular_file(for_dtype)) return zoo::load_efficiency(for_dtype.string());
  const fs::path any = dir / (device.name + ".json");
  if (fs::is_regular_file(any)) {
    zoo::Efficiency e = zoo::load_efficiency(any.string());
    if (e.dtype.empty() || e.dtype == dtype) return e;
  }
  return zoo::default_efficiency();
}

[[noreturn]] void no_profile(const std::string& model, const std::string& dtype,
                             const std::string& why) {
  const std::string in = dtype.empty() ? "" : " in " + dtype;
  const std::string flag = dtype.empty() ? "" : " --dtype " + dtype;
  throw InputError(
      fmt::format("--model: no shipped profile of \"{}\"{} under {}{}; measure one with "
                  "`pipetwin profile --model {}{}` and pass it with --profile",
                  model, in, default_traces_dir(), why, model, flag));
}

Profile load_in_dtype(const std::string& path, const std::string& dtype) {
  Profile p = load_profile(path);
  if (!dtype.empty() && p.dtype != dtype) {
    throw InputError(fmt::format("{}: dtype: the profile was measured in {}, not {} (--dtype)",
                                 path, p.dtype, dtype));
  }
  return p;
}

// An efficiency file the catalog derived from published measurements of the device (one with
// "sources", hardware/efficiency/derive_published.py), for `dtype`.
bool published_efficiency(const std::string& device, const std::string& dtype) {
  const fs::path dir = fs::path(Catalog::default_dir()) / "efficiency";
  for (const fs::path& f : {dir / (device + "-" + dtype + ".json"), dir / (device + ".json")}) {
    if (!fs::is_regular_file(f)) continue;
    const zoo::Efficiency e = zoo::load_efficiency(f.string());
    if (e.dtype.empty() || e.dtype == dtype) return !e.sources.empty();
  }
  return false;
}

// The op parameters step 4 prices the device with, when the op-level model applies.
std::optional<zoo::OpParams> op_params_for(const std::string& device, const std::string& dtype,
                                           const std::string& efficiency_file) {
  if (!efficiency_file.empty() || device.empty()) return std::nullopt;
  const std::string path = zoo::op_params_path(Catalog::default_dir(), device);
  if (!fs::is_regular_file(path) || published_efficiency(device, dtype)) return std::nullopt;
  zoo::OpParams p = zoo::load_op_params(path);
  if (p.gemm.count(dtype) == 0) return std::nullopt;
  return p;
}

// Steps 1-3 of the resolution; null when none applies. A measured profile of another device is
// not scaled to a device the op-level model prices (step 4 prices it from its operations).
std::optional<Profile> explicit_or_measured(const std::string& model,
                                            const std::string& profile_path,
                                            const std::string& device, const ResolveOptions& o,
                                            std::vector<ShippedProfile>& shipped,
                                            ShippedMatch& match) {
  if (!profile_path.empty()) return load_in_dtype(profile_path, o.dtype);
  if (model.empty()) throw InputError("give a model (--model NAME) or a profile (--profile FILE)");
  const ModelSpec spec = ModelSpec::parse(model, "--model");
  if (is_synthetic_model(spec)) return synthetic_profile(spec);
  shipped = list_shipped_profiles(default_traces_dir());
  match = find_shipped(shipped, spec, model, device, o.dtype);
  if (!match.measured) return std::nullopt;
  const std::string dtype = o.dtype.empty() ? "float32" : o.dtype;
  if (match.measured->device != device && zoo::is_zoo_family(spec) &&
      op_params_for(device, dtype, o.efficiency_file)) {
    return std::nullopt;
  }
  return load_profile(match.measured->path);
}

// The analytic pricing of a zoo descriptor on `device` that step 4 uses (op-level where the
// device has op parameters, else the roofline), at the given micro-batch sizes.
Profile price_descriptor(const zoo::ZooModel& model, const DeviceSpec& device,
                         const ResolveOptions& o, const std::vector<int>& micro_batches) {
  zoo::AnalyticOptions options;
  options.dtype = o.dtype.empty() ? "float32" : o.dtype;
  if (!o.optimizer.empty()) options.optimizer = o.optimizer;
  if (!micro_batches.empty()) options.micro_batches = micro_batches;
  if (auto ops = op_params_for(device.name, options.dtype, o.efficiency_file))
    return zoo::op_level_profile(model, device, *ops, options);
  options.efficiency = efficiency_for(device, options.dtype, o.efficiency_file);
  return zoo::analytic_profile(model, device, options);
}

// Steps 1-5. `device` null: look `device_name` up in the default catalog if step 4 needs it.
Profile resolve_whole(const std::string& model, const std::string& profile_path,
                      const std::string& device_name, const DeviceSpec* device,
                      const ResolveOptions& o) {
  ShippedMatch match;
  std::vector<ShippedProfile> shipped;
  std::optional<Profile> p =
      explicit_or_measured(model, profile_path, device_name, o, shipped, match);
  if (!p) {
    const ModelSpec spec = ModelSpec::parse(model, "--model");
    const std::string dtype = o.dtype.empty() ? "float32" : o.dtype;
    std::optional<Catalog> catalog;
    if (zoo::is_zoo_family(spec) && !device && !device_name.empty()) {
      catalog = Catalog::load(Catalog::default_dir());
      device = catalog->find_device(device_name);
    }
    if (zoo::is_zoo_family(spec) && device) {
      return price_descriptor(zoo::describe_model(spec), *device, o, {});
    }
    if (!match.other) {
      no_profile(model, o.dtype,
                 zoo::is_zoo_family(spec) && !device_name.empty()
                     ? fmt::format(", and device \"{}\" is not in the catalog for an analytic "
                                   "profile",
                                   device_name)
                     : "");
    }
    p = load_profile(match.other->path);
  }
  if (!o.optimizer.empty()) apply_optimizer(*p, parse_optimizer(o.optimizer), "--optimizer");
  return *p;
}

// Steps 1-5, then the shard of o.tensor_parallel (profiles/zoo/tensor_parallel.hpp), priced on
// the device asked for (else the profile's own, from the default catalog).
Profile resolve(const std::string& model, const std::string& profile_path,
                const std::string& device_name, const DeviceSpec* device, const ResolveOptions& o) {
  Profile whole = resolve_whole(model, profile_path, device_name, device, o);
  if (o.tensor_parallel == TensorParallel{}) return whole;
  const std::string name = whole.model.empty() ? model : whole.model;
  const ModelSpec spec = ModelSpec::parse(name, "--tp: model");
  if (!zoo::is_zoo_family(spec)) {
    throw InputError(fmt::format("--tp: tensor parallelism splits the zoo's transformer families "
                                 "(vit, bert, gpt2); \"{}\" is not one",
                                 name));
  }
  std::optional<Catalog> catalog;
  if (device == nullptr) {
    catalog = Catalog::load(Catalog::default_dir());
    device = catalog->find_device(device_name.empty() ? whole.device : device_name);
    if (device == nullptr) device = catalog->find_device(whole.device);
  }
  if (device == nullptr) {
    throw InputError(fmt::format("--tp: pricing the shard needs the device \"{}\" in the catalog",
                                 device_name.empty() ? whole.device : device_name));
  }
  ResolveOptions pricing = o;
  pricing.dtype = whole.dtype;
  if (pricing.optimizer.empty()) pricing.optimizer = whole.optimizer;
  const DeviceSpec& priced_on = *device;
  return zoo::shard_profile(whole, zoo::describe_model(spec), o.tensor_parallel,
                            [&](const zoo::ZooModel& m, const std::vector<int>& b) {
                              return price_descriptor(m, priced_on, pricing, b);
                            });
}

}  // namespace

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const DeviceSpec& device, const ResolveOptions& options) {
  return resolve(model, profile_path, device.name, &device, options);
}

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& device, const ResolveOptions& options) {
  return resolve(model, profile_path, device, nullptr, options);
}

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const DeviceSpec& device, const std::string& efficiency_file) {
  ResolveOptions o;
  o.efficiency_file = efficiency_file;
  return resolve_profile(model, profile_path, device, o);
}

Profile resolve_profile(const std::string& model, const std::string& profile_path,
                        const std::string& preferred_device) {
  return resolve_profile(model, profile_path, preferred_device, ResolveOptions{});
}

}  // namespace pipetwin
