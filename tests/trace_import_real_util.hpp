// Helpers of the tests that record real traces with python/pipetwin_trace.py and Debian's
// python3-torch (trace_import_real_test.cpp, trace_import_agreement_test.cpp).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "test_util.hpp"

namespace pipetwin::trace_import {

inline constexpr const char* kPython = "/usr/bin/python3";

inline int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool torch_importable() {
  static const bool ok = run(fmt::format("{} -c 'import torch' >/dev/null 2>&1", kPython)) == 0;
  return ok;
}

// Records `model` ("mlp" or "skip") at the micro-batch `sizes` into `dir`, with `extra` arguments
// of the script (layer sizes); the trace paths.
inline std::vector<std::string> record(const std::string& model, const test::TempDir& dir,
                                       const std::vector<int>& sizes = {1, 4},
                                       const std::string& extra = "") {
  const std::string cmd = fmt::format(
      "OPENBLAS_NUM_THREADS=1 {} {}/python/pipetwin_trace.py --model {} --micro-batches {} "
      "--steps 6 {} --out-dir {} >{} 2>&1",
      kPython, test::source_dir(), model, fmt::join(sizes, ","), extra, dir.path().string(),
      dir.file("record.log"));
  EXPECT_EQ(run(cmd), 0) << test::read_text(dir.file("record.log"));
  std::vector<std::string> paths;
  for (int b : sizes) paths.push_back(dir.file(fmt::format("{}.mb{}.trace.json", model, b)));
  return paths;
}

inline std::string binary() {
  return std::string(PIPETWIN_BINARY_DIR) + "/pipetwin";
}

}  // namespace pipetwin::trace_import
