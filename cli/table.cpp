#include "cli/table.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace pipetwin::cli {

namespace {

bool numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+');
}

}  // namespace

std::string Table::render() const {
  std::vector<size_t> width(header_.size(), 0);
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& r : rows_) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const bool right = &cells != &header_ && numeric(cell);
      l += c ? "  " : "";
      l += right ? fmt::format("{:>{}}", cell, width[c]) : fmt::format("{:<{}}", cell, width[c]);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(header_);
  std::string rule;
  for (size_t c = 0; c < width.size(); ++c) rule += (c ? "  " : "") + std::string(width[c], '-');
  out += rule + "\n";
  for (const auto& r : rows_) line(r);
  return out;
}

std::string fmt_seconds(double s) {
  if (s == 0) return "0 s";
  if (std::fabs(s) < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (std::fabs(s) < 1) return fmt::format("{:.2f} ms", s * 1e3);
  if (std::fabs(s) < 120) return fmt::format("{:.3f} s", s);
  if (std::fabs(s) < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.2f} h", s / 3600);
}

std::string fmt_bytes(double b) {
  const double a = std::fabs(b);
  if (a < 1024) return fmt::format("{:.0f} B", b);
  if (a < 1024.0 * 1024) return fmt::format("{:.1f} KiB", b / 1024);
  if (a < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}

std::string fmt_rate(double r) {
  if (r >= 1e6) return fmt::format("{:.2f}M/s", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.2f}k/s", r / 1e3);
  return fmt::format("{:.2f}/s", r);
}

std::string fmt_percent(double f) { return fmt::format("{:.1f}%", f * 100); }

}  // namespace pipetwin::cli
