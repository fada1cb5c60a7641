// Reading a model family's options from its ModelSpec (profiles/model_spec.hpp): the preset word and
// the typed `key=value` options, each validated with an InputError that names the model, the
// option and the bad value ("vit: unknown preset \"huge\" (known: test, tiny, ...)").
//
// Every family, in profiles/zoo/ and in models/ alike (both parse with profiles/zoo/configs.hpp), follows
// the same rules: at most one preset word (a fallback preset applies when there is none),
// options override the preset's fields, unknown options are rejected by ModelSpec::allow_only.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/model_spec.hpp"

namespace pipetwin::zoo {

template <class Config>
struct Preset {
  std::string name;
  Config config;
};

// The config of the preset named in `spec`, or of `fallback` when the spec names none.
template <class Config>
Config choose_preset(const ModelSpec& spec, const std::vector<Preset<Config>>& presets,
                     const std::string& fallback) {
  if (spec.presets.size() > 1) {
    throw InputError(fmt::format("{}: {}: more than one preset (\"{}\" and \"{}\")", spec.origin,
                                 spec.family, spec.presets[0], spec.presets[1]));
  }
  const std::string wanted = spec.presets.empty() ? fallback : spec.presets.front();
  std::string known;
  for (const auto& p : presets) {
    if (p.name == wanted) return p.config;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw InputError(fmt::format("{}: {}: unknown preset \"{}\" (known: {})", spec.origin,
                               spec.family, wanted, known));
}

// The names of a preset table, in order.
template <class Config>
std::vector<std::string> preset_names(const std::vector<Preset<Config>>& presets) {
  std::vector<std::string> names;
  for (const auto& p : presets) names.push_back(p.name);
  return names;
}

// An integer option that must be at least `minimum` (1 unless said otherwise).
int64_t int_option(const ModelSpec& spec, const std::string& key, int64_t fallback,
                   int64_t minimum = 1);
// An integer option under either of two names (`depth` or `layers`); both given is an error.
int64_t int_option2(const ModelSpec& spec, const std::string& key, const std::string& alias,
                    int64_t fallback);
// The dropout probability option `dropout=`, in [0, 1).
double dropout_option(const ModelSpec& spec, double fallback);
// `norm=batch|group` (batch when absent); true for group.
bool group_norm_option(const ModelSpec& spec);
// Throws unless `divisor` divides `value` ("vit: dim 100 is not a multiple of heads 3").
void require_multiple(const ModelSpec& spec, const std::string& what, int64_t value,
                      const std::string& by, int64_t divisor);
// For families that take key=value options only.
void reject_presets(const ModelSpec& spec);

}  // namespace pipetwin::zoo
