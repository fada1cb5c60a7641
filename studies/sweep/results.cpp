#include "studies/sweep/results.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_io.hpp"

namespace pipetwin::sim {

namespace {

int64_t int_field(const CsvRow& row, size_t column, const std::string& name,
                  const std::string& where) {
  const std::string& s = row[column];
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) {
    throw InputError(
        fmt::format("{}: {}: expected a non-negative integer, got \"{}\"", where, name, s));
  }
  return v;
}

}  // namespace

SweepTable load_sweep(const std::string& path) {
  CsvText text = read_csv(path);
  if (text.header.empty()) throw InputError(fmt::format("{}: empty file, no header", path));
  if (text.torn_tail) {
    throw InputError(
        fmt::format("{}: line {}: the last row is cut short (an interrupted sweep); "
                    "resume it first",
                    path, text.rows.size() + 2));
  }
  for (size_t k = 0; k < text.rows.size(); ++k) {
    if (text.rows[k].size() != text.header.size()) {
      throw InputError(fmt::format("{}: line {}: {} fields, the header has {}", path, k + 2,
                                   text.rows[k].size(), text.header.size()));
    }
  }
  return {std::move(text.header), std::move(text.rows)};
}

SweepTable merge_sweeps(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("sweep merge: no input files");
  SweepTable merged;
  std::map<int64_t, CsvRow> by_point;
  int64_t points = -1;
  for (const auto& path : paths) {
    SweepTable t = load_sweep(path);
    if (merged.header.empty()) merged.header = t.header;
    if (t.header != merged.header) {
      throw InputError(fmt::format("{}: header differs from {}'s (shards of different sweeps?)",
                                   path, paths.front()));
    }
    const size_t pc = csv_column(t.header, "point", path),
                 nc = csv_column(t.header, "points", path);
    for (size_t k = 0; k < t.rows.size(); ++k) {
      const std::string where = fmt::format("{}: line {}", path, k + 2);
      const int64_t p = int_field(t.rows[k], pc, "point", where);
      const int64_t n = int_field(t.rows[k], nc, "points", where);
      if (points >= 0 && n != points) {
        throw InputError(fmt::format("{}: points: {} here, {} before (shards of different grids?)",
                                     where, n, points));
      }
      points = n;
      if (p >= n)
        throw InputError(fmt::format("{}: point: {} is not below points = {}", where, p, n));
      auto [it, fresh] = by_point.try_emplace(p, std::move(t.rows[k]));
      if (!fresh && it->second != t.rows[k]) {
        throw InputError(fmt::format("{}: point {} differs from an earlier copy of it", where, p));
      }
    }
  }
  const int64_t missing = std::max<int64_t>(points, 0) - static_cast<int64_t>(by_point.size());
  if (missing > 0) {
    int64_t first = 0;
    while (by_point.count(first)) ++first;
    throw InputError(
        fmt::format("sweep merge: {} of {} points missing (first: point {}); run or "
                    "resume the shards that own them",
                    missing, points, first));
  }
  for (auto& [p, row] : by_point) merged.rows.push_back(std::move(row));
  return merged;
}

void save_sweep(const SweepTable& table, const std::string& path) {
  std::string text = csv_line(table.header);
  for (const auto& row : table.rows) text += csv_line(row);
  write_file_atomic(path, text);
}

SweepTable best_points(const SweepTable& table, size_t top) {
  const std::string origin = "sweep results";
  const size_t fits = csv_column(table.header, "fits", origin);
  const size_t error = csv_column(table.header, "error", origin);
  // An elastic sweep ranks whole training runs; a plain one, steady-state iterations.
  const bool elastic =
      std::count(table.header.begin(), table.header.end(), "elastic_samples_per_s");
  const size_t rate = csv_column(
      table.header, elastic ? "elastic_samples_per_s" : "throughput_samples_per_s", origin);
  std::vector<std::pair<double, size_t>> order;  // (throughput, row)
  for (size_t k = 0; k < table.rows.size(); ++k) {
    const CsvRow& row = table.rows[k];
    if (row[fits] != "yes" || !row[error].empty()) continue;
    order.emplace_back(std::strtod(row[rate].c_str(), nullptr), k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  SweepTable best;
  best.header = {"rank"};
  best.header.insert(best.header.end(), table.header.begin(), table.header.end());
  for (size_t i = 0; i < std::min(top, order.size()); ++i) {
    CsvRow row = {std::to_string(i + 1)};
    const CsvRow& src = table.rows[order[i].second];
    row.insert(row.end(), src.begin(), src.end());
    best.rows.push_back(std::move(row));
  }
  return best;
}

std::string best_path(const std::string& output) {
  const std::string ext = ".csv";
  if (output.size() > ext.size() &&
      output.compare(output.size() - ext.size(), ext.size(), ext) == 0) {
    return output.substr(0, output.size() - ext.size()) + ".best.csv";
  }
  return output + ".best.csv";
}

BestPoints save_best_points(const std::string& csv, int top) {
  BestPoints out;
  out.all = load_sweep(csv);
  out.best = best_points(out.all, static_cast<size_t>(std::max(top, 0)));
  out.path = best_path(csv);
  save_sweep(out.best, out.path);
  return out;
}

std::vector<size_t> varying_inputs(const SweepTable& table) {
  std::vector<size_t> out;
  const std::string origin = "sweep results";
  const size_t first = csv_column(table.header, "points", origin) + 1;
  const size_t last = csv_column(table.header, "plan_M", origin);
  for (size_t c = first; c < last; ++c) {
    for (const auto& row : table.rows) {
      if (row[c] != table.rows.front()[c]) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

}  // namespace pipetwin::sim
