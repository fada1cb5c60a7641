// A plain-text table for terminal summaries: columns sized to their widest cell, numbers right-
// aligned. Deterministic output (no locale, no terminal probing).
//
// Thread-safety: value type.
#pragma once

#include <string>
#include <vector>

namespace pipetwin::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Human units: "12.3 ms", "1.50 GiB", "3.2k/s".
std::string fmt_seconds(double s);
std::string fmt_bytes(double b);
std::string fmt_rate(double per_s);
std::string fmt_percent(double fraction);

}  // namespace pipetwin::cli
