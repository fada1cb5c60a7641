#include "models/dataset.hpp"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include <ATen/ops/cat.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::models {

namespace {

constexpr int64_t kPixels = 64;

std::string read_gzip(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw InputError(fmt::format(
        "digits data set: {} not found (it ships with the Debian package python3-sklearn)", path));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) throw InputError(fmt::format("digits data set: cannot open {}", path));
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(file.get(), buffer, sizeof buffer)) > 0) text.append(buffer, n);
  if (n < 0) throw InputError(fmt::format("digits data set: {} is not a valid gzip file", path));
  return text;
}

// Parses "v0,v1,...,v64" into 65 numbers; false if the row is malformed.
bool parse_row(const std::string& line, std::vector<double>& values) {
  values.clear();
  const char* p = line.c_str();
  while (*p) {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    if (end == p) return false;
    p = end;
    if (*p == ',')
      ++p;
    else if (*p && *p != '\r')
      return false;
    else
      break;
  }
  return static_cast<int64_t>(values.size()) == kPixels + 1;
}

}  // namespace

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  return {source, inputs.slice(0, begin, end), labels.slice(0, begin, end), classes};
}

std::string default_digits_path() {
  return "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
}

Dataset load_digits(const std::string& path) {
  const std::string text = read_gzip(path);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::vector<double> row;
  size_t start = 0;
  for (int64_t line_no = 1; start < text.size(); ++line_no) {
    size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    const std::string line = text.substr(start, stop - start);
    start = stop + 1;
    if (line.empty()) continue;
    const bool ok = parse_row(line, row);
    const double label = ok ? row.back() : -1;
    if (!ok || label < 0 || label >= kDigitsClasses || label != static_cast<int64_t>(label)) {
      throw InputError(
          fmt::format("digits data set: {}: line {} is not 64 pixel values and a "
                      "label 0..9",
                      path, line_no));
    }
    for (int64_t i = 0; i < kPixels; ++i)
      pixels.push_back(static_cast<float>(row[i] / kDigitsMaxPixel));
    labels.push_back(static_cast<int64_t>(label));
  }
  const auto n = static_cast<int64_t>(labels.size());
  Dataset d;
  d.source = path;
  d.inputs = at::from_blob(pixels.data(), {n, 1, 8, 8}, at::kFloat).clone();
  d.labels = at::from_blob(labels.data(), {n}, at::kLong).clone();
  d.classes = kDigitsClasses;
  return d;
}

Dataset digits_as_tokens(const Dataset& digits) {
  const int64_t n = digits.size();
  const auto pixels =
      digits.inputs.reshape({n, kPixels}).mul(kDigitsMaxPixel).round().to(at::kLong);
  const auto cls = at::full({n, 1}, kDigitsClsToken, at::kLong);
  return {digits.source, at::cat({cls, pixels}, 1), digits.labels, digits.classes};
}

}  // namespace pipetwin::models
