// LayerSelection's --layers parsing (attribute.hpp).
#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/trace_import/attribute.hpp"

namespace pipetwin::trace_import {

LayerSelection LayerSelection::parse(const std::string& spec) {
  LayerSelection s;
  if (spec.empty() || spec == "children") return s;
  if (starts_with(spec, "depth=")) {
    const std::string v = spec.substr(6);
    const bool digits = !v.empty() && v.size() < 6 && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (!digits || std::stoi(v) < 1) {
      throw InputError(
          fmt::format("--layers: depth must be a whole number of at least 1 (\"{}\" given)", v));
    }
    s.mode = Mode::kDepth;
    s.depth = std::stoi(v);
    return s;
  }
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (std::all_of(spec.begin(), spec.end(), digit)) {
    if (spec.size() > 5 || std::stoi(spec) < 1) {
      throw InputError(fmt::format(
          "--layers: a count of layers must be a whole number from 1 to 99999 (\"{}\" given)",
          spec));
    }
    s.mode = Mode::kCount;
    s.count = std::stoi(spec);
    return s;
  }
  s.mode = Mode::kNames;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    std::string name = spec.substr(start, comma - start);
    if (starts_with(name, kLayerPrefix)) name = name.substr(kLayerPrefix.size());
    if (name.empty()) throw InputError(fmt::format("--layers: empty layer name in \"{}\"", spec));
    if (std::find(s.names.begin(), s.names.end(), name) != s.names.end())
      throw InputError(fmt::format("--layers: layer \"{}\" named twice in \"{}\"", name, spec));
    s.names.push_back(name);
    start = comma + 1;
  }
  return s;
}

std::string LayerSelection::to_string() const {
  if (mode == Mode::kChildren) return "children";
  if (mode == Mode::kDepth) return fmt::format("depth={}", depth);
  if (mode == Mode::kCount) return std::to_string(count);
  return fmt::format("{}", fmt::join(names, ","));
}

}  // namespace pipetwin::trace_import
