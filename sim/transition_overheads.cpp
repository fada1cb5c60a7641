#include "sim/transition_overheads.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

TransitionOverheads TransitionOverheads::table4() {
  // PipeTransformer Table 4 (Appendix F.5), seconds: overall, C, P, D.
  return {{{8, 18.2, 16.6, 0.7, 0.9},
           {4, 10.2, 8.3, 1.3, 0.6},
           {2, 5.5, 3.8, 2.1, 0.7},
           {1, 9.5, 2.3, 6.1, 1.0}}};
}

TransitionOverheads TransitionOverheads::none() {
  return {};
}

TransitionOverheads TransitionOverheads::scaled(double factor) const {
  if (!(factor >= 0)) {
    throw InputError(
        fmt::format("transition overhead scale must not be negative ({} given)", factor));
  }
  TransitionOverheads out = *this;
  for (auto& r : out.rows) {
    r.overall_s *= factor;
    r.cuda_context_s *= factor;
    r.pipeline_warmup_s *= factor;
    r.ddp_s *= factor;
  }
  return out;
}

const TransitionRow* TransitionOverheads::row(int length) const {
  const TransitionRow* best = nullptr;
  double best_distance = 0;
  for (const auto& r : rows) {
    const double d = std::fabs(std::log2(static_cast<double>(r.length)) -
                               std::log2(static_cast<double>(length)));
    if (best == nullptr || d < best_distance) {
      best = &r;
      best_distance = d;
    }
  }
  return best;
}

double TransitionOverheads::start_s(int K) const {
  const TransitionRow* r = row(K);
  return r ? r->overall_s : 0.0;
}

double TransitionOverheads::compression_s(int K, bool new_processes) const {
  const TransitionRow* r = row(K);
  if (r == nullptr) return 0.0;
  return new_processes ? r->overall_s : r->pipeline_warmup_s + r->ddp_s;
}

double TransitionOverheads::repartition_s(int K) const {
  const TransitionRow* r = row(K);
  return r ? r->pipeline_warmup_s + r->ddp_s : 0.0;
}

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) {
    if (!cell.empty() && cell.back() == '\r') cell.pop_back();
    cells.push_back(cell);
  }
  return cells;
}

double cell_number(const std::string& text, const std::string& where) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(v >= 0) || !std::isfinite(v)) {
    throw InputError(fmt::format("{}: expected a non-negative number, got \"{}\"", where, text));
  }
  return v;
}

TransitionRow row_from(const std::map<std::string, std::string>& cells, const std::string& where) {
  TransitionRow r;
  const double length = cell_number(cells.at("length_after"), where + ": length_after");
  if (length < 1 || length != std::floor(length) || length > 1e6) {
    throw InputError(fmt::format("{}: length_after: expected a positive integer, got \"{}\"", where,
                                 cells.at("length_after")));
  }
  r.length = static_cast<int>(length);
  r.overall_s = cell_number(cells.at("overall_s"), where + ": overall_s");
  r.cuda_context_s = cell_number(cells.at("cuda_context_s"), where + ": cuda_context_s");
  r.pipeline_warmup_s = cell_number(cells.at("pipeline_warmup_s"), where + ": pipeline_warmup_s");
  r.ddp_s = cell_number(cells.at("ddp_s"), where + ": ddp_s");
  return r;
}

}  // namespace

TransitionOverheads load_transition_overheads(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open the transition overheads", path));
  std::vector<std::string> header;
  TransitionOverheads t;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line == "\r" || line[0] == '#') continue;
    const std::vector<std::string> cells = split(line);
    if (header.empty()) {
      header = cells;
      for (const char* need :
           {"length_after", "overall_s", "cuda_context_s", "pipeline_warmup_s", "ddp_s"}) {
        if (std::find(header.begin(), header.end(), need) == header.end()) {
          throw InputError(fmt::format("{}: line {}: the header has no column {}", path, n, need));
        }
      }
      continue;
    }
    if (cells.size() != header.size()) {
      throw InputError(fmt::format("{}: line {}: {} cells, the header has {}", path, n,
                                   cells.size(), header.size()));
    }
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < cells.size(); ++c) row[header[c]] = cells[c];
    t.rows.push_back(row_from(row, fmt::format("{}: line {}", path, n)));
  }
  if (t.rows.empty()) throw InputError(fmt::format("{}: no transition rows", path));
  return t;
}

}  // namespace pipetwin::elastic
