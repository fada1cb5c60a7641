#include "studies/sweep/csv.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::sim {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_line(const CsvRow& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_field(fields[i]);
  }
  return out + "\n";
}

namespace {

// Parses one record starting at `pos`; returns false when the text ends before its '\n'.
bool parse_record(std::string_view text, size_t& pos, CsvRow& row, int line,
                  const std::string& origin) {
  row.clear();
  std::string field;
  bool quoted = false, was_quoted = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') {
        field += c;
      } else if (i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      if (!field.empty() || was_quoted) {
        throw InputError(
            fmt::format("{}: line {}: a quote inside an unquoted field", origin, line));
      }
      quoted = was_quoted = true;
    } else if (c == ',' || c == '\n') {
      row.push_back(std::move(field));
      field.clear();
      was_quoted = false;
      if (c == '\n') {
        pos = i + 1;
        return true;
      }
    } else if (c != '\r') {
      field += c;
    }
  }
  return false;
}

}  // namespace

CsvText parse_csv(std::string_view text, const std::string& origin) {
  CsvText out;
  size_t pos = 0;
  CsvRow row;
  int line = 1;
  while (pos < text.size()) {
    if (!parse_record(text, pos, row, line, origin)) {
      out.torn_tail = true;
      break;
    }
    if (line == 1) {
      out.header = std::move(row);
      out.header_end = pos;
    } else {
      out.rows.push_back(std::move(row));
      out.row_end.push_back(pos);
    }
    out.complete_bytes = pos;
    ++line;
  }
  return out;
}

CsvText read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: cannot read", path));
  return parse_csv(buffer.str(), path);
}

size_t csv_column(const CsvRow& header, std::string_view name, const std::string& origin) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  throw InputError(fmt::format("{}: no column \"{}\" in the header", origin, name));
}

}  // namespace pipetwin::sim
