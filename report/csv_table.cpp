#include "report/csv_table.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::report {

int CsvTable::column(std::string_view name) const {
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c] == name) return static_cast<int>(c);
  }
  return -1;
}

bool CsvTable::numeric(size_t col) const {
  bool any = false;
  for (const auto& r : rows) {
    if (r[col].empty()) continue;
    if (!parse_number(r[col])) return false;
    any = true;
  }
  return any;
}

size_t CsvTable::distinct(size_t col) const {
  std::set<std::string> seen;
  for (const auto& r : rows) {
    if (!r[col].empty()) seen.insert(r[col]);
  }
  return seen.size();
}

namespace {

// Splits CSV text into records of cells. Quoted cells may span lines; "" is a quote.
std::vector<std::vector<std::string>> split_records(std::string_view text,
                                                    const std::string& origin) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> cur(1);
  bool quoted = false, line_has_content = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cur.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur.back() += c;
      }
    } else if (c == '"') {
      quoted = line_has_content = true;
    } else if (c == ',') {
      cur.emplace_back();
      line_has_content = true;
    } else if (c == '\n') {
      if (line_has_content) records.push_back(std::move(cur));
      cur.assign(1, "");
      line_has_content = false;
    } else if (c != '\r') {
      cur.back() += c;
      line_has_content = true;
    }
  }
  if (quoted) throw InputError(fmt::format("{}: a quoted cell is never closed", origin));
  if (line_has_content) records.push_back(std::move(cur));
  return records;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

CsvTable parse_csv(std::string_view text, const std::string& origin) {
  CsvTable t;
  t.path = origin;
  for (auto& rec : split_records(text, origin)) {
    if (t.columns.empty()) {
      if (!rec.empty() && !rec[0].empty() && rec[0][0] == '#') continue;  // citation comment
      t.columns = std::move(rec);
      continue;
    }
    if (rec.size() != t.columns.size()) {
      throw InputError(fmt::format("{}: row {} has {} cells, the header {}", origin,
                                   t.rows.size() + 1, rec.size(), t.columns.size()));
    }
    t.rows.push_back(std::move(rec));
  }
  if (t.columns.empty()) throw InputError(fmt::format("{}: no header row", origin));
  std::set<std::string> seen;
  for (const auto& c : t.columns) {
    if (!seen.insert(c).second) {
      throw InputError(fmt::format("{}: column \"{}\" appears twice in the header", origin, c));
    }
  }
  return t;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), path);
}

std::optional<double> parse_number(std::string_view cell) {
  std::string s(cell);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  double scale = 1;
  if (!s.empty() && s.back() == '%') {
    s.pop_back();
    scale = 0.01;
  }
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  // strtod also takes "inf", "nan" and hex; a report plots finite decimals only.
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  if (s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  return v * scale;
}

bool is_metric_column(std::string_view name) {
  const std::string n = lower(name);
  static const std::array<std::string_view, 11> units = {
      "_s", "_ms", "_us", "_per_s", "_fraction", "_bytes", "_gib", "_mib", "_usd", "_pct", "_gb"};
  for (auto u : units) {
    if (ends_with(n, u)) return true;
  }
  static const std::array<std::string_view, 10> words = {
      "throughput", "bubble", "utilization", "memory",    "cost",
      "speedup",    "error",  "overlap",     "staleness", "time"};
  for (auto w : words) {
    if (n.find(w) != std::string::npos) return true;
  }
  return false;
}

std::optional<ComparisonColumns> comparison_columns(const CsvTable& t) {
  ComparisonColumns c;
  auto matches = [](const std::string& col, std::initializer_list<std::string_view> names) {
    const std::string n = lower(col);
    for (auto w : names) {
      if (n == w || n.rfind(std::string(w) + "_", 0) == 0) return true;
    }
    return false;
  };
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const int col = static_cast<int>(i);
    if (c.reference < 0 && matches(t.columns[i], {"paper", "predicted", "reference"})) {
      c.reference = col;
    } else if (c.ours < 0 && matches(t.columns[i], {"ours", "measured"})) {
      c.ours = col;
    } else if (c.item < 0 && !t.numeric(i)) {
      c.item = col;
    }
  }
  if (c.reference < 0 || c.ours < 0) return std::nullopt;
  return c;
}

namespace {

// Columns that describe a point's outcome or identity rather than an input: never a line of
// their own, never the x axis unless asked for. `pipetwin sweep` writes point/points (identity),
// plan_* (what the planner resolved, e.g. plan_M for chunks=auto), fits/oom_device (outcome).
bool is_outcome_or_id(std::string_view name) {
  static const std::array<std::string_view, 14> names = {
      "fits",  "feasible", "status", "note",  "notes",  "reason", "message",
      "error", "id",       "index",  "point", "points", "row",    "rank"};
  const std::string n = lower(name);
  if (n.rfind("plan_", 0) == 0 || n.rfind("oom", 0) == 0) return true;
  return std::find(names.begin(), names.end(), n) != names.end();
}

int pick_x_column(const CsvTable& t, const std::vector<size_t>& inputs, const std::string& hint) {
  if (!hint.empty()) {
    const int h = t.column(hint);
    if (h >= 0 && t.numeric(static_cast<size_t>(h)) && t.distinct(static_cast<size_t>(h)) >= 2) {
      return h;
    }
  }
  int x = -1;
  for (size_t c : inputs) {
    if (is_outcome_or_id(t.columns[c]) || !t.numeric(c) || t.distinct(c) < 2) continue;
    if (x < 0 || t.distinct(c) > t.distinct(static_cast<size_t>(x))) x = static_cast<int>(c);
  }
  return x;
}

SweepChart build_chart(const CsvTable& t, size_t x, size_t metric,
                       const std::vector<size_t>& series_cols, size_t max_series) {
  SweepChart chart{t.columns[x], t.columns[metric], {}, 0, 0};
  std::map<std::string, size_t> index;
  std::vector<SweepSeries> all;
  for (const auto& row : t.rows) {
    const auto xv = parse_number(row[x]);
    const auto yv = parse_number(row[metric]);
    if (!xv || !yv) {
      ++chart.skipped_points;
      continue;
    }
    std::string key;
    for (size_t c : series_cols) key += (key.empty() ? "" : " ") + t.columns[c] + "=" + row[c];
    if (key.empty()) key = "all";
    auto [it, added] = index.emplace(key, all.size());
    if (added) all.push_back({key, {}, {}});
    all[it->second].x.push_back(*xv);
    all[it->second].y.push_back(*yv);
  }
  for (auto& s : all) {
    std::vector<size_t> order(s.x.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    SweepSeries sorted{s.name, {}, {}};
    for (size_t i : order) {
      sorted.x.push_back(s.x[i]);
      sorted.y.push_back(s.y[i]);
    }
    if (chart.series.size() < max_series) {
      chart.series.push_back(std::move(sorted));
    } else {
      ++chart.dropped_series;
    }
  }
  return chart;
}

}  // namespace

std::optional<SweepLayout> sweep_layout(const CsvTable& t, const std::string& x_hint,
                                        size_t max_series, size_t max_charts) {
  if (t.rows.size() < 2) return std::nullopt;
  std::vector<size_t> inputs, metrics;
  // `pipetwin sweep`'s own layout: its knobs sit between "points" and "plan_M", its results
  // after (studies/sweep/results.hpp); other CSVs go by the naming rule.
  const int points = t.column("points"), plan_m = t.column("plan_M");
  const bool sweep_file = points >= 0 && plan_m > points;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const int ci = static_cast<int>(c);
    const bool input = sweep_file ? ci > points && ci < plan_m : !is_metric_column(t.columns[c]);
    if (input) {
      inputs.push_back(c);
    } else if (!is_outcome_or_id(t.columns[c]) && t.numeric(c) && t.distinct(c) > 1) {
      metrics.push_back(c);  // a constant has nothing to plot
    }
  }
  const int x = pick_x_column(t, inputs, x_hint);
  if (x < 0) return std::nullopt;
  std::erase(metrics, static_cast<size_t>(x));
  if (metrics.empty()) return std::nullopt;
  SweepLayout layout;
  layout.x_column = t.columns[static_cast<size_t>(x)];
  std::vector<size_t> series_cols;
  for (size_t c : inputs) {
    if (static_cast<int>(c) == x || is_outcome_or_id(t.columns[c]) || t.distinct(c) < 2) continue;
    series_cols.push_back(c);
    layout.series_columns.push_back(t.columns[c]);
  }
  for (size_t m : metrics) {
    if (layout.charts.size() >= max_charts) break;
    layout.charts.push_back(build_chart(t, static_cast<size_t>(x), m, series_cols, max_series));
  }
  // Lines of one point each are no lines: a table that happens to have numbers (a capacity
  // ranking, one row per cluster) is shown as a table, unless the user named the x column.
  if (!x_hint.empty() && t.column(x_hint) == x) return layout;
  const SweepChart& first = layout.charts.front();
  const size_t drawn = t.rows.size() - first.skipped_points;
  const size_t lines = first.series.size() + first.dropped_series;
  if (lines == 0 || 2 * drawn < 3 * lines) return std::nullopt;
  return layout;
}

CsvKind classify_csv(const CsvTable& t, const std::string& x_hint) {
  if (comparison_columns(t)) return CsvKind::kComparison;
  if (sweep_layout(t, x_hint)) return CsvKind::kSweep;
  return CsvKind::kTable;
}

}  // namespace pipetwin::report
