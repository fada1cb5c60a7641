// ModelSpec: the textual name of a model, `family[:item,item,...]`.
//
// An item is `key=value` or a bare preset word: `uniform:layers=8,fwd_ms=2`, `vit:tiny`,
// `bert:tiny,layers=4`. Plans, profiles and the CLI all carry this string, so the same name
// builds the synthetic profile in core/ and the LibTorch model in models/.
//
// Thread-safety: value type.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pipetwin {

struct ModelSpec {
  std::string family;
  std::vector<std::string> presets;         // bare words, in order
  std::map<std::string, std::string> args;  // key=value items

  // Parses `text`; `origin` prefixes error messages ("--model", "plan.json: model").
  static ModelSpec parse(const std::string& text, const std::string& origin);
  std::string to_string() const;

  bool has(const std::string& key) const { return args.count(key) != 0; }
  // Typed lookups; a malformed value is an InputError naming the origin and the key.
  double number(const std::string& key, double fallback) const;
  long integer(const std::string& key, long fallback) const;
  // A '/'-separated list of numbers ("1/2/3"); a single number is a list of one.
  std::vector<double> numbers(const std::string& key) const;
  // Rejects keys outside `allowed`.
  void allow_only(const std::vector<std::string>& allowed) const;

  std::string origin;
};

}  // namespace pipetwin
