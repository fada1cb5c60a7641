// Name tables: an enum's values with the names files and messages write them with, looked up both
// ways (the payloads, streams and collective kinds of the schedule IR and its timelines).
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace pipetwin {

template <class E, std::size_t N>
using NameTable = std::pair<E, const char*>[N];

// The name of `value` in `table`; `missing` when it has none.
template <class E, std::size_t N>
const char* name_in(const NameTable<E, N>& table, E value, const char* missing) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return missing;
}

// The value named `text` in `table` into `out`; false (out untouched) when none is.
template <class E, std::size_t N>
bool parse_name(const NameTable<E, N>& table, const std::string& text, E& out) {
  for (const auto& [v, name] : table) {
    if (text == name) {
      out = v;
      return true;
    }
  }
  return false;
}

}  // namespace pipetwin
