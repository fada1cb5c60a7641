#include "studies/framework_runs.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "studies/sweep/csv.hpp"

namespace pipetwin::sim {

namespace {

enum Col {
  kModel,
  kCluster,
  kStages,
  kDp,
  kBatch,
  kMicroBatch,
  kSchedule,
  kDtype,
  kOptimizer,
  kMeasured,
  kVirtualStages,
  kPartitioner,
  kProfile,
  kColumns
};
constexpr std::array<const char*, kColumns> kNames = {
    "model",          "cluster",     "stages", "dp",        "batch",
    "micro_batch",    "schedule",    "dtype",  "optimizer", "measured_ms",
    "virtual_stages", "partitioner", "profile"};
constexpr int kRequired = kVirtualStages;  // the columns before it are required

// One row's fields, with where each came from.
struct Row {
  const CsvRow& fields;
  const std::array<int, kColumns>& index;  // column -> field index, -1 when absent
  const std::string& origin;
  int line;

  std::string where(Col c) const {
    return fmt::format("{}:{}:{}: {}", origin, line, index[c] + 1, kNames[c]);
  }
  std::string text(Col c) const {
    return index[c] < 0 ? std::string() : fields[static_cast<size_t>(index[c])];
  }
  std::string required(Col c) const {
    std::string v = text(c);
    if (v.empty()) throw InputError(fmt::format("{}: empty (a value is required)", where(c)));
    return v;
  }
  // All of `v` read by `parse` (std::stoi or std::stod); "expected `what`" naming the cell if not.
  template <class Parse>
  auto number(Col c, const std::string& v, Parse parse, const char* what) const {
    try {
      size_t used = 0;
      const auto out = parse(v, &used);
      if (used == v.size()) return out;
    } catch (const std::exception&) {
    }
    throw InputError(fmt::format("{}: expected {}, got \"{}\"", where(c), what, v));
  }
  int positive(Col c, bool optional = false) const {
    const std::string v = optional ? text(c) : required(c);
    if (v.empty()) return 0;
    const int out = number(
        c, v, [](const std::string& s, size_t* used) { return std::stoi(s, used); },
        "a positive integer");
    if (out < 1) throw InputError(fmt::format("{}: must be positive, got {}", where(c), out));
    return out;
  }
  double milliseconds(Col c) const {
    const std::string v = required(c);
    const double out = number(
        c, v, [](const std::string& s, size_t* used) { return std::stod(s, used); },
        "a time in milliseconds");
    if (!(out > 0) || !std::isfinite(out))
      throw InputError(fmt::format("{}: must be a positive time, got {}", where(c), v));
    return out;
  }
};

std::array<int, kColumns> column_index(const CsvRow& header, const std::string& origin) {
  std::array<int, kColumns> index;
  index.fill(-1);
  for (size_t i = 0; i < header.size(); ++i) {
    const auto it = std::find(kNames.begin(), kNames.end(), header[i]);
    if (it == kNames.end()) {
      throw InputError(fmt::format("{}:1:{}: unknown column \"{}\" (the columns: {})", origin,
                                   i + 1, header[i], fmt::join(kNames, ", ")));
    }
    const auto c = static_cast<size_t>(it - kNames.begin());
    if (index[c] >= 0) {
      throw InputError(fmt::format("{}:1:{}: column \"{}\" given twice (also column {})", origin,
                                   i + 1, header[i], index[c] + 1));
    }
    index[c] = static_cast<int>(i);
  }
  for (int c = 0; c < kRequired; ++c) {
    if (index[static_cast<size_t>(c)] < 0)
      throw InputError(fmt::format("{}:1: missing column \"{}\"", origin, kNames[c]));
  }
  return index;
}

FrameworkRun parse_row(const Row& r) {
  FrameworkRun run;
  run.origin = fmt::format("{}:{}", r.origin, r.line);
  run.model = r.required(kModel);
  run.cluster = r.required(kCluster);
  run.stages = r.positive(kStages);
  run.dp = r.positive(kDp);
  run.batch = r.positive(kBatch);
  run.micro_batch = r.positive(kMicroBatch);
  if (run.batch % (run.dp * run.micro_batch) != 0) {
    throw InputError(fmt::format("{}: {} does not divide the batch {} into dp {} replicas",
                                 r.where(kMicroBatch), run.micro_batch, run.batch, run.dp));
  }
  run.schedule = r.required(kSchedule);
  run.dtype = r.text(kDtype);
  run.optimizer = r.text(kOptimizer);
  run.measured_s = r.milliseconds(kMeasured) / 1e3;
  run.virtual_stages = r.positive(kVirtualStages, true);
  if (!r.text(kPartitioner).empty()) run.partitioner = r.text(kPartitioner);
  run.profile = r.text(kProfile);
  return run;
}

}  // namespace

std::vector<FrameworkRun> parse_framework_runs(std::string_view text, const std::string& origin) {
  std::string body(text);
  if (!body.empty() && body.back() != '\n') body += '\n';  // a last line without its break
  const CsvText csv = parse_csv(body, origin);
  if (csv.torn_tail) {
    const size_t end = csv.complete_bytes;
    throw InputError(fmt::format("{}:{}: a quoted field never closed", origin,
                                 1 + std::count(body.begin(), body.begin() + end, '\n')));
  }
  if (csv.header.empty()) throw InputError(fmt::format("{}: empty (no header row)", origin));
  const auto index = column_index(csv.header, origin);
  std::vector<FrameworkRun> runs;
  size_t begin = csv.header_end;
  int line = 1 + static_cast<int>(std::count(body.begin(), body.begin() + begin, '\n'));
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const CsvRow& fields = csv.rows[i];
    const size_t end = csv.row_end[i];
    const int lines = static_cast<int>(std::count(body.begin() + begin, body.begin() + end, '\n'));
    begin = end;
    const int row_line = line;
    line += lines;
    if (fields.size() == 1 && fields[0].empty()) continue;  // a blank line
    if (fields.size() != csv.header.size()) {
      throw InputError(fmt::format("{}:{}: {} fields, the header has {}", origin, row_line,
                                   fields.size(), csv.header.size()));
    }
    runs.push_back(parse_row(Row{fields, index, origin, row_line}));
  }
  if (runs.empty()) throw InputError(fmt::format("{}: no runs after the header", origin));
  return runs;
}

std::vector<FrameworkRun> read_framework_runs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read the runs file", path));
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<FrameworkRun> runs = parse_framework_runs(text.str(), path);
  // A relative profile or cluster file found beside the runs file is read from there, so that a
  // runs.csv shipped with its profiles fits from any working directory.
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto beside = [&dir](std::string& file) {
    if (file.empty() || std::filesystem::path(file).is_absolute()) return;
    const std::filesystem::path there = dir / file;
    if (!std::filesystem::exists(file) && std::filesystem::is_regular_file(there))
      file = there.string();
  };
  for (FrameworkRun& run : runs) {
    beside(run.profile);
    beside(run.cluster);
  }
  return runs;
}

std::string framework_runs_header() {
  CsvRow names(kNames.begin(), kNames.end());
  return csv_line(names);
}

std::string framework_run_line(const FrameworkRun& run) {
  return csv_line({run.model, run.cluster, std::to_string(run.stages), std::to_string(run.dp),
                   std::to_string(run.batch), std::to_string(run.micro_batch), run.schedule,
                   run.dtype, run.optimizer, fmt::format("{:.6g}", run.measured_s * 1e3),
                   run.virtual_stages > 0 ? std::to_string(run.virtual_stages) : "",
                   run.partitioner, run.profile});
}

}  // namespace pipetwin::sim
