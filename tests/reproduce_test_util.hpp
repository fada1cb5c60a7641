// Helpers of the reproduction suites: run an entry once per test binary, find its tables and
// rows. Thread-safety: test threads only (one at a time).
#pragma once

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "studies/reproduce/reproduce.hpp"

namespace pipetwin::testing {

using sim::Comparison;
using sim::ReproContext;
using sim::ReproResult;
using sim::ReproTable;

// The entry's result, run once for the whole binary (entries take seconds).
inline const ReproResult& repro_result(const std::string& id) {
  static std::map<std::string, ReproResult> cache;
  auto it = cache.find(id);
  if (it == cache.end()) {
    const ReproContext ctx{Catalog::load(Catalog::default_dir()), sim::default_reference_dir()};
    it = cache.emplace(id, sim::find_repro_entry(id).run(ctx)).first;
  }
  return it->second;
}

inline const ReproTable& repro_table(const ReproResult& r, const std::string& name) {
  for (const auto& t : r.tables) {
    if (t.name == name) return t;
  }
  throw std::runtime_error(r.id + ": no table " + name);
}

// The row of `t` whose item and metric are these; fails the test when absent.
inline const Comparison& repro_row(const ReproTable& t, const std::string& item,
                                   const std::string& metric) {
  for (const auto& r : t.rows) {
    if (r.item == item && r.metric == metric) return r;
  }
  ADD_FAILURE() << t.name << ": no row \"" << item << "\" / \"" << metric << "\"";
  static const Comparison none{"", "", NAN, NAN, "", ""};
  return none;
}

}  // namespace pipetwin::testing
