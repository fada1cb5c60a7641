#include "studies/reproduce/reproduce.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_io.hpp"

namespace pipetwin::sim {

namespace fs = std::filesystem;

double Comparison::relative_error() const {
  if (!std::isfinite(paper) || paper == 0) return std::numeric_limits<double>::quiet_NaN();
  return (ours - paper) / std::abs(paper);
}

std::string default_reference_dir() {
  if (const char* env = std::getenv("PIPETWIN_DATA"); env && *env) {
    return (fs::path(env) / "experiments" / "reference").string();
  }
  return (fs::path(PIPETWIN_DATA_DIR) / "experiments" / "reference").string();
}

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fmt_value(double v) {
  if (!std::isfinite(v)) return "";
  return fmt::format("{:.6g}", v);
}

std::string fmt_error(double e) {
  if (!std::isfinite(e)) return "";
  return fmt::format("{:+.1f}%", e * 100);
}

}  // namespace

const std::string& ReferenceTable::cell(size_t row, const std::string& column) const {
  if (row >= rows.size()) {
    throw InputError(
        fmt::format("{}: row {} does not exist ({} rows)", path, row + 1, rows.size()));
  }
  const auto it = rows[row].find(column);
  if (it == rows[row].end()) {
    throw InputError(fmt::format("{}: row {}: no column \"{}\"", path, row + 1, column));
  }
  return it->second;
}

double ReferenceTable::number(size_t row, const std::string& column) const {
  const std::string& s = cell(row, column);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    throw InputError(
        fmt::format("{}: row {}: {} must be a number (\"{}\")", path, row + 1, column, s));
  }
  return v;
}

size_t ReferenceTable::find(const std::string& column, const std::string& value) const {
  for (size_t r = 0; r < rows.size(); ++r) {
    if (cell(r, column) == value) return r;
  }
  throw InputError(fmt::format("{}: no row with {} = \"{}\"", path, column, value));
}

ReferenceTable load_reference(const ReproContext& context, const std::string& file) {
  ReferenceTable t;
  t.path = (fs::path(context.reference_dir) / file).string();
  std::ifstream in(t.path);
  if (!in) throw InputError(fmt::format("{}: cannot open the reference table", t.path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    if (line[0] == '#') {
      t.comments.push_back(line.substr(line.find_first_not_of("# ") == std::string::npos
                                           ? line.size()
                                           : line.find_first_not_of("# ")));
      continue;
    }
    auto cells = split_csv_line(line);
    if (t.columns.empty()) {
      t.columns = std::move(cells);
      continue;
    }
    if (cells.size() != t.columns.size()) {
      throw InputError(fmt::format("{}: row {} has {} cells, the header {}", t.path,
                                   t.rows.size() + 1, cells.size(), t.columns.size()));
    }
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < cells.size(); ++c) row[t.columns[c]] = cells[c];
    t.rows.push_back(std::move(row));
  }
  if (t.columns.empty()) throw InputError(fmt::format("{}: no header row", t.path));
  return t;
}

std::string render_repro_table(const ReproTable& table) {
  std::vector<std::vector<std::string>> cells = {
      {"item", "metric", "paper", "ours", "error", "note"}};
  for (const auto& r : table.rows) {
    const std::string unit = r.unit.empty() ? "" : " " + r.unit;
    cells.push_back({r.item, r.metric, std::isfinite(r.paper) ? fmt_value(r.paper) + unit : "-",
                     fmt_value(r.ours) + unit, fmt_error(r.relative_error()), r.note});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out = table.title + "\n";
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < cells[r].size(); ++c) {
      const bool numeric = c >= 2 && c <= 4;
      line += numeric ? fmt::format("{:>{}}", cells[r][c], width[c])
                      : fmt::format("{:<{}}", cells[r][c], width[c]);
      if (c + 1 < cells[r].size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {

std::string table_csv(const ReproTable& table) {
  std::string out = "item,metric,paper,ours,unit,relative_error,note\n";
  for (const auto& r : table.rows) {
    const double e = r.relative_error();
    out += fmt::format("{},{},{},{},{},{},{}\n", csv_cell(r.item), csv_cell(r.metric),
                       fmt_value(r.paper), fmt_value(r.ours), csv_cell(r.unit),
                       std::isfinite(e) ? fmt::format("{:.6g}", e) : "", csv_cell(r.note));
  }
  return out;
}

}  // namespace

std::string write_repro_result(const ReproResult& result, const std::string& dir) {
  const fs::path out = fs::path(dir) / result.id;
  fs::create_directories(out);
  std::string readme = fmt::format("# {}\n\n{}\n\n", result.id, result.citation);
  for (const auto& t : result.tables) {
    write_file_atomic((out / (t.name + ".csv")).string(), table_csv(t));
    readme += "```\n" + render_repro_table(t) + "```\n\n";
  }
  if (!result.assumptions.empty()) {
    readme += "Modelling assumptions:\n\n";
    for (const auto& a : result.assumptions) readme += "- " + a + "\n";
  }
  write_file_atomic((out / "README.md").string(), readme);
  return readme;
}

void write_repro_summary(const std::vector<ReproResult>& results, const std::string& dir) {
  fs::create_directories(dir);
  std::string out = "entry,table,item,metric,paper,ours,unit,relative_error\n";
  for (const auto& res : results) {
    for (const auto& t : res.tables) {
      for (const auto& r : t.rows) {
        const double e = r.relative_error();
        out += fmt::format("{},{},{},{},{},{},{},{}\n", res.id, t.name, csv_cell(r.item),
                           csv_cell(r.metric), fmt_value(r.paper), fmt_value(r.ours),
                           csv_cell(r.unit), std::isfinite(e) ? fmt::format("{:.6g}", e) : "");
      }
    }
  }
  write_file_atomic((fs::path(dir) / "summary.csv").string(), out);
}

}  // namespace pipetwin::sim
