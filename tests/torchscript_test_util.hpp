// Fixtures of the TorchScript tests (models_torchscript_test.cpp, exec_torchscript_test.cpp):
// modules saved by tests/data/torchscript_fixtures.py with Debian's python3-torch 1.13, and plain
// single-process training of them in Python.
//
// ctest runs every test in a process of its own, and importing torch takes seconds here, so both
// are made once and shared through a folder of the temp dir named by a hash of what they are made
// from (the scripts; for a training, its batches and settings too): the first test makes it under
// another name and renames it into place, so a reader never sees half of it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <torch/csrc/jit/serialization/pickle.h>

#include "exec/platform/tensor_io.hpp"
#include "test_util.hpp"

namespace pipetwin::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

inline int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string fixture_script() {
  return test::source_dir() + "/tests/data/torchscript_fixtures.py";
}

// A folder of the temp dir that `make(folder)` fills, named by `key`; made once, atomically.
inline std::string shared_folder(const std::string& key,
                                 const std::function<bool(const std::string&)>& make) {
  const auto base = std::filesystem::temp_directory_path() / "pipetwin-tests" /
                    fmt::format("torchscript-{:016x}", std::hash<std::string>{}(key));
  if (std::filesystem::is_directory(base)) return base.string();
  const std::string tmp = fmt::format("{}.tmp{}", base.string(), ::getpid());
  test::remove_tree(tmp);
  std::filesystem::create_directories(tmp);
  if (!make(tmp)) {
    test::remove_tree(tmp);
    return "";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, base, ec);
  if (ec) test::remove_tree(tmp);  // another test process made it first
  return base.string();
}

// The fixtures' folder, or "" when Debian's python3-torch is missing (the tests then skip).
inline const std::string& torchscript_fixtures() {
  static const std::string dir = []() -> std::string {
    if (shell(fmt::format("{} -c 'import torch' >/dev/null 2>&1", kPython)) != 0) return "";
    const std::string py = test::source_dir() + "/python/";
    const std::string key = test::read_text(fixture_script()) +
                            test::read_text(py + "pipetwin_save.py") +
                            test::read_text(py + "pipetwin_trace.py");
    return shared_folder(key, [](const std::string& out) {
      const std::string log = out + "/make.log";
      const int rc = shell(fmt::format("OMP_NUM_THREADS=1 {} -W ignore {} make {} >{} 2>&1",
                                       kPython, fixture_script(), out, log));
      EXPECT_EQ(rc, 0) << test::read_text(log);
      return rc == 0;
    });
  }();
  return dir;
}

#define SKIP_WITHOUT_TORCHSCRIPT_FIXTURES()                                                   \
  if (::pipetwin::testing::torchscript_fixtures().empty())                                    \
  GTEST_SKIP() << "no /usr/bin/python3 with torch (Debian's python3-torch): the TorchScript " \
                  "fixtures cannot be made"

// `torchscript:<fixtures>/<file>`.
inline std::string fixture_model(const std::string& file) {
  return "torchscript:" + torchscript_fixtures() + "/" + file;
}

// The tensors of a list Python's torch.save wrote.
inline std::vector<at::Tensor> python_tensors(const std::string& path) {
  const std::string bytes = test::read_text(path);
  const c10::IValue v = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  std::vector<at::Tensor> out;
  for (const c10::IValue& t : v.toListRef()) out.push_back(t.toTensor());
  return out;
}

struct PythonTraining {
  std::vector<double> losses;      // mean loss of each mini-batch
  std::vector<at::Tensor> params;  // final parameters, in model.parameters() order
};

// torch.optim.SGD(lr, momentum) training of fixture `file` in Python over `batches`
// ([x0, y0, x1, y1, ...]), one step per pair (tests/data/torchscript_fixtures.py train).
inline PythonTraining python_training(const std::string& file,
                                      const std::vector<at::Tensor>& batches,
                                      const std::string& loss, double lr, double momentum) {
  // Not a test::TempDir: that is the test's own folder, which the caller may hold already.
  const auto scratch = std::filesystem::temp_directory_path() / "pipetwin-tests" /
                       fmt::format("torchscript-batches.{}", ::getpid());
  std::filesystem::create_directories(scratch);
  const std::string batch_file = (scratch / "batches.pt").string();
  exec::save_tensors(batch_file, batches);
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}", test::read_text(batch_file), file, loss,
                                      lr, momentum, test::read_text(fixture_script()));
  const std::string dir = shared_folder(key, [&](const std::string& out) {
    const std::string log = out + "/train.log";
    const int rc = shell(fmt::format(
        "OMP_NUM_THREADS=1 {} -W ignore {} train {}/{} {} {}/result.pt --loss {} --lr {} "
        "--momentum {} >{} 2>&1",
        kPython, fixture_script(), torchscript_fixtures(), file, batch_file, out, loss, lr,
        momentum, log));
    EXPECT_EQ(rc, 0) << test::read_text(log);
    return rc == 0;
  });
  test::remove_tree(scratch);
  PythonTraining r;
  if (dir.empty()) return r;
  const std::vector<at::Tensor> t = python_tensors(dir + "/result.pt");
  const at::Tensor losses = t.front().contiguous();
  r.losses.assign(losses.data_ptr<double>(), losses.data_ptr<double>() + losses.numel());
  r.params.assign(t.begin() + 1, t.end());
  return r;
}

}  // namespace pipetwin::testing
