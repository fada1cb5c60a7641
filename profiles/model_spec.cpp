#include "profiles/model_spec.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(sep, start);
    out.push_back(text.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(out);
}

}  // namespace

ModelSpec ModelSpec::parse(const std::string& text, const std::string& origin) {
  ModelSpec spec;
  spec.origin = origin;
  const size_t colon = text.find(':');
  spec.family = text.substr(0, colon);
  if (spec.family.empty()) {
    throw InputError(fmt::format("{}: model name \"{}\" has no family before ':'", origin, text));
  }
  if (colon == std::string::npos) return spec;
  for (const auto& item : split(text.substr(colon + 1), ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      spec.presets.push_back(item);
    } else {
      const std::string key = item.substr(0, eq);
      if (key.empty()) throw InputError(fmt::format("{}: empty key in \"{}\"", origin, item));
      if (spec.args.count(key)) {
        throw InputError(fmt::format("{}: model option \"{}\" given twice", origin, key));
      }
      spec.args[key] = item.substr(eq + 1);
    }
  }
  return spec;
}

std::string ModelSpec::to_string() const {
  std::string out = family;
  std::string items;
  for (const auto& p : presets) items += (items.empty() ? "" : ",") + p;
  for (const auto& [k, v] : args) items += (items.empty() ? "" : ",") + k + "=" + v;
  if (!items.empty()) out += ":" + items;
  return out;
}

double ModelSpec::number(const std::string& key, double fallback) const {
  auto it = args.find(key);
  if (it == args.end()) return fallback;
  double v = 0;
  if (!parse_double(it->second, v)) {
    throw InputError(fmt::format("{}: model option {}: expected a number, got \"{}\"", origin, key,
                                 it->second));
  }
  return v;
}

long ModelSpec::integer(const std::string& key, long fallback) const {
  const double v = number(key, static_cast<double>(fallback));
  if (std::floor(v) != v) {
    throw InputError(fmt::format("{}: model option {}: expected an integer, got \"{}\"", origin,
                                 key, args.at(key)));
  }
  // Converting a double beyond long's range is undefined behaviour (found by fuzzing).
  if (std::abs(v) > 1e15) {
    throw InputError(fmt::format("{}: model option {}: integer out of range, got \"{}\"", origin, key,
                                 args.at(key)));
  }
  return static_cast<long>(v);
}

std::vector<double> ModelSpec::numbers(const std::string& key) const {
  std::vector<double> out;
  auto it = args.find(key);
  if (it == args.end()) return out;
  for (const auto& item : split(it->second, '/')) {
    double v = 0;
    if (!parse_double(item, v)) {
      throw InputError(fmt::format("{}: model option {}: expected a number or a '/'-separated list "
                                   "of numbers, got \"{}\"",
                                   origin, key, it->second));
    }
    out.push_back(v);
  }
  return out;
}

void ModelSpec::allow_only(const std::vector<std::string>& allowed) const {
  for (const auto& [k, v] : args) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == k;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw InputError(
          fmt::format("{}: unknown option \"{}\" for model {} (known: {})", origin, k, family, list));
    }
  }
}

}  // namespace pipetwin
