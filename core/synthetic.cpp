#include "core/synthetic.hpp"

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
  const std::vector<std::string> keys = {"layers",      "fwd_ms",       "bwd_ms",   "recompute_ms",
                                         "overhead_ms", "act_kb",       "saved_kb", "input_kb",
                                         "param_kb",    "optimizer_kb", "opt_ms",   "opt_new_ms"};
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
  const auto& fwd = opts[0];
  const auto& bwd = opts[1];
  const auto& rec = opts[2];
  const auto& overhead = opts[3];
  const auto& act = opts[4];
  const auto& saved = opts[5];
  const auto& input = opts[6];
  const auto& param = opts[7];
  const auto& optimizer = opts[8];
  const auto& opt_ms = opts[9];
  const auto& opt_new_ms = opts[10];

  Profile p;
  p.model = spec.to_string();
  p.device = device;
  p.dtype = "float32";
  p.source = "synthetic";
  p.notes = "closed-form synthetic model; times are exact, t(b) = overhead + per-sample * b";
  p.input_bytes_per_sample = input.at(0, act.at(0, 0)) * kKiB;
  for (size_t i = 0; i < L; ++i) {
    LayerProfile l;
    l.name = fmt::format("layer{}", i);
    l.kind = "synthetic";
    const double f = fwd.at(i, 1.0);
    const double b = bwd.at(i, 2.0 * f);
    const double r = rec.at(i, f);
    const double o = overhead.at(i, 0.0);
    for (int mb : {1, 2, 4, 8}) {
      LayerTiming t;
      t.micro_batch = mb;
      t.forward_s = (o + f * mb) * kMs;
      t.backward_s = (o + b * mb) * kMs;
      t.recompute_s = (o + r * mb) * kMs;
      l.timings.push_back(t);
    }
    l.output_bytes_per_sample = act.at(i, 0.0) * kKiB;
    l.saved_bytes_per_sample = saved.at(i, act.at(i, 0.0)) * kKiB;
    l.param_bytes = param.at(i, 0.0) * kKiB;
    l.optimizer_bytes = optimizer.at(i, 0.0) * kKiB;
    l.optimizer_step_s = opt_ms.at(i, 0.0) * kMs;
    l.optimizer_new_version_s = opt_new_ms.at(i, 0.0) * kMs;
    p.layers.push_back(std::move(l));
  }
  return p;
}

}  // namespace pipetwin
