#include "profiles/synthetic.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

constexpr double kKiB = 1024.0;
constexpr double kMs = 1e-3;

// One per-layer option: a list of L values, a single value broadcast to L, or a fallback.
class LayerOption {
 public:
  LayerOption(const ModelSpec& spec, const std::string& key)
      : key_(key), values_(spec.numbers(key)) {}
  bool given() const { return !values_.empty(); }
  size_t length() const { return values_.size(); }
  double at(size_t layer, double fallback) const {
    if (values_.empty()) return fallback;
    return values_.size() == 1 ? values_[0] : values_[layer];
  }
  void check(const ModelSpec& spec, size_t layers) const {
    if (values_.size() > 1 && values_.size() != layers) {
      throw InputError(fmt::format("{}: model option {} has {} values for {} layers", spec.origin,
                                   key_, values_.size(), layers));
    }
    for (double v : values_) {
      if (v < 0) {
        throw InputError(fmt::format("{}: model option {} must not be negative ({} given)",
                                     spec.origin, key_, v));
      }
    }
  }

 private:
  std::string key_;
  std::vector<double> values_;
};

// The model options: "layers", then one LayerOption per per-layer key, in this order.
const std::vector<std::string>& synthetic_keys() {
  static const std::vector<std::string> keys = {
      "layers",   "fwd_ms",   "bwd_ms",       "recompute_ms", "overhead_ms", "act_kb",  "saved_kb",
      "input_kb", "param_kb", "optimizer_kb", "opt_ms",       "opt_new_ms",  "wgrad_ms"};
  return keys;
}

// Indices into the LayerOptions (synthetic_keys() without "layers").
enum Key {
  kFwd,
  kBwd,
  kRecompute,
  kOverhead,
  kAct,
  kSaved,
  kInput,
  kParam,
  kOptimizer,
  kOpt,
  kOptNew,
  kWgrad  // the weight-gradient part of bwd_ms (a split backward's W); unset: estimated
};

// Layer i: t(b) = overhead + per-sample * b at micro-batches 1, 2, 4, 8; backward defaults to
// twice the forward, recompute to the forward, saved bytes to the output's.
LayerProfile synthetic_layer(size_t i, const std::vector<LayerOption>& o) {
  LayerProfile l;
  l.name = fmt::format("layer{}", i);
  l.kind = "synthetic";
  const double f = o[kFwd].at(i, 1.0);
  const double b = o[kBwd].at(i, 2.0 * f);
  const double r = o[kRecompute].at(i, f);
  const double overhead = o[kOverhead].at(i, 0.0);
  for (int mb : {1, 2, 4, 8}) {
    LayerTiming t;
    t.micro_batch = mb;
    t.forward_s = (overhead + f * mb) * kMs;
    t.backward_s = (overhead + b * mb) * kMs;
    t.recompute_s = (overhead + r * mb) * kMs;
    const double w = o[kWgrad].at(i, -1.0);
    if (w >= 0) t.backward_weight_s = std::min(w * mb * kMs, t.backward_s);
    l.timings.push_back(t);
  }
  l.output_bytes_per_sample = o[kAct].at(i, 0.0) * kKiB;
  l.saved_bytes_per_sample = o[kSaved].at(i, o[kAct].at(i, 0.0)) * kKiB;
  l.param_bytes = o[kParam].at(i, 0.0) * kKiB;
  l.optimizer_bytes = o[kOptimizer].at(i, 0.0) * kKiB;
  l.optimizer_step_s = o[kOpt].at(i, 0.0) * kMs;
  l.optimizer_new_version_s = o[kOptNew].at(i, 0.0) * kMs;
  return l;
}

}  // namespace

bool is_synthetic_model(const ModelSpec& spec) {
  return spec.family == "uniform";
}

Profile synthetic_profile(const ModelSpec& spec, const std::string& device) {
  if (!is_synthetic_model(spec)) {
    throw InputError(fmt::format("{}: \"{}\" is not a synthetic model", spec.origin, spec.family));
  }
  if (!spec.presets.empty()) {
    throw InputError(fmt::format("{}: synthetic model takes key=value options only, got \"{}\"",
                                 spec.origin, spec.presets.front()));
  }
  const std::vector<std::string>& keys = synthetic_keys();
  spec.allow_only(keys);
  std::vector<LayerOption> opts;
  size_t list_len = 0;
  for (size_t i = 1; i < keys.size(); ++i) {
    opts.emplace_back(spec, keys[i]);
    if (opts.back().length() > 1) list_len = std::max(list_len, opts.back().length());
  }
  const long layers = spec.integer("layers", list_len ? static_cast<long>(list_len) : 4);
  // The largest models have a few thousand layers; a bound keeps a typo (or a fuzzer) from
  // asking for terabytes of layer records.
  constexpr long kMaxLayers = 100000;
  if (layers < 1 || layers > kMaxLayers) {
    throw InputError(fmt::format("{}: model option layers must be in [1, {}] ({} given)",
                                 spec.origin, kMaxLayers, layers));
  }
  const auto L = static_cast<size_t>(layers);
  for (const auto& o : opts) o.check(spec, L);

  Profile p;
  p.model = spec.to_string();
  p.device = device;
  p.dtype = "float32";
  p.source = "synthetic";
  p.notes = "closed-form synthetic model; times are exact, t(b) = overhead + per-sample * b";
  p.input_bytes_per_sample = opts[kInput].at(0, opts[kAct].at(0, 0)) * kKiB;
  for (size_t i = 0; i < L; ++i) p.layers.push_back(synthetic_layer(i, opts));
  return p;
}

}  // namespace pipetwin
