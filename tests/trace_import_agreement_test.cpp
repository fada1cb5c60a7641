// `pipetwin import-trace` against `pipetwin profile`: python/pipetwin_trace.py records an MLP and
// a model with a skip connection with Debian's python3-torch; their imported profiles must agree
// with `pipetwin profile` of the same architectures built in models/ (the zoo's mlp and
// mlp:skip=1), measured in the same test run: each layer's forward and backward within 20% (the
// last layer's backward 30%, below), the sum over the layers within 10%. A ctest suite run alone
// (RUN_SERIAL), and again with the CPU dispatch capped at AVX2 (scripts/test.sh);
// experiments/import_agreement.sh runs both and keeps the logs. Skipped when that Python cannot
// import torch or build/pipetwin is not built.
//
// What made the two sides agree (both measured on this project's 2-vCPU VM, Debian's torch 1.13):
//   - the recording's heap (python/pipetwin_trace.py, steady_heap): under the profiler a step's
//     tensors landed on fresh pages (1,000 page faults per step at micro-batch 512), which read
//     +43% on fc0's backward at micro-batch 128 under the AVX2 cap;
//   - a CPU layer's time is its operators' (profiles/trace_import/attribute.hpp), not its range's,
//     which also holds the Python module call and hooks (+20..60 us per layer);
//   - the zoo's cross entropy is one nll_loss operator, as torch.nn.CrossEntropyLoss runs it
//     (models/layered_model.cpp; it was -gather(): two autograd nodes more; the last layer's
//     backward at micro-batch 128 read -3..-26% imported, median -18%, in six runs).
// What stays apart is the last layer's backward at micro-batch 128, read 3-19% lower imported
// (median -10% over 60 figures of this test, as dispatched and under the AVX2 cap; the other
// layers' about -3%), so it is held to 30%, not 20%. Part of it is systematic, about 5% in quiet
// phases: a trace times a backward as its autograd nodes' ranges, not the engine's ~5 us between
// them, and the last layer runs the loss's nodes besides its own (pipetwin's per-sample loss also
// its sum). The rest is `pipetwin profile`'s own spread on that figure: its ratio to the backward
// of the layer before ranged 1.15-1.30 (median 1.20) over 36 suites of this test, the recording's
// 1.11-1.15 (median 1.12). Not the profile's order of passes (the backward after the recompute
// pass): profiled right after the forward, the ratio was the same (1.15-1.25 over five profiles
// each way).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "core/profile.hpp"
#include "profiles/trace_import/import.hpp"
#include "profiles/trace_import/kineto.hpp"
#include "test_util.hpp"
#include "trace_import_real_util.hpp"

namespace pipetwin::trace_import {
namespace {

// Both sides at the sizes where a layer's matmuls, not per-operator overheads (the profiler's,
// Python's), make its time: width 256, micro-batches 128 and 512 (on this VM a 512 x 256 x 256
// matmul takes ~2 ms). Measured over three rounds (twelve at most, while the figures miss), the
// sides interleaved; each side's figure for a layer is its least over the rounds (each round's is
// already a median over steps or repeats): a busy host only ever slows a measurement, so the
// least is the one it disturbed least. The VM's slow phases last seconds, as long as a round, and
// hit the sides' rounds independently: twelve rounds in a row of each side, one after the other,
// gave totals at micro-batch 128 of 2.83-4.25 ms recorded and 2.78-4.85 ms profiled, whose least
// agree within 2%; the CI's run that stopped at six rounds read -14% (pipetwin profile's least
// there was 3.25 ms).
constexpr int kWidth = 256;
const std::vector<int> kSizes = {128, 512};

struct Side {
  std::map<std::pair<std::string, int>, std::pair<double, double>> time;  // (layer, b) -> fwd, bwd
  std::string last;                                                       // the last layer's name
  void add(const Profile& p) {
    if (!p.layers.empty()) last = p.layers.back().name;
    for (const auto& l : p.layers) {
      for (const auto& t : l.timings) {
        const auto [it, fresh] =
            time.try_emplace({l.name, t.micro_batch}, t.forward_s, t.backward_s);
        it->second.first = std::min(it->second.first, t.forward_s);
        it->second.second = std::min(it->second.second, t.backward_s);
      }
    }
  }
};

constexpr double kLayerBound = 0.20, kLastBackwardBound = 0.30, kSumBound = 0.10;

// The bound of a layer's backward (the last layer's is wider: the header says why).
double backward_bound(const Side& own, const std::string& layer) {
  return layer == own.last ? kLastBackwardBound : kLayerBound;
}

// Per micro-batch size: the sum over the layers of forward + backward, imported and pipetwin
// profile's (the layers both sides have).
std::map<int, std::pair<double, double>> sums(const Side& imported, const Side& own) {
  std::map<int, std::pair<double, double>> out;
  for (const auto& [key, mine] : imported.time) {
    const auto it = own.time.find(key);
    if (it == own.time.end()) continue;
    out[key.second].first += mine.first + mine.second;
    out[key.second].second += it->second.first + it->second.second;
  }
  return out;
}

// Whether every layer is within kLayerBound and every size's sum within kSumBound.
bool within_bounds(const Side& imported, const Side& own) {
  for (const auto& [key, mine] : imported.time) {
    const auto it = own.time.find(key);
    if (it == own.time.end()) continue;
    if (std::abs(mine.first / it->second.first - 1) > kLayerBound ||
        std::abs(mine.second / it->second.second - 1) > backward_bound(own, key.first))
      return false;
  }
  for (const auto& [b, t] : sums(imported, own)) {
    if (std::abs(t.first / t.second - 1) > kSumBound) return false;
  }
  return true;
}

void expect_agreement(const std::string& script_model, const std::string& zoo_model,
                      const std::string& extra) {
  test::TempDir dir;
  Side imported, own;
  // Three rounds; while the figures miss, up to nine more (a slow phase on one side passes, a
  // real difference stays).
  constexpr int kRounds = 3, kMostRounds = 12;
  for (int round = 0; round < kMostRounds; ++round) {
    if (round >= kRounds && within_bounds(imported, own)) break;
    std::vector<KinetoTrace> traces;
    for (const auto& path : record(script_model, dir, kSizes, extra))
      traces.push_back(load_kineto_trace(path));
    imported.add(import_traces(traces, {}).profile);
    const std::string out = dir.file(fmt::format("own{}.json", round));
    ASSERT_EQ(run(fmt::format("OPENBLAS_NUM_THREADS=1 {} profile --model {} --micro-batch {} "
                              "--no-contention --no-cold -q -o {}",
                              binary(), zoo_model, fmt::join(kSizes, ","), out)),
              0);
    own.add(load_profile(out));
    if (round + 1 >= kRounds) std::printf("after %d rounds\n", round + 1);
  }
  ASSERT_EQ(imported.time.size(), own.time.size());
  ASSERT_EQ(imported.last, own.last);
  for (const auto& [key, mine] : imported.time) {
    const auto it = own.time.find(key);
    ASSERT_NE(it, own.time.end()) << key.first << " b=" << key.second;
    const auto& theirs = it->second;
    std::printf(
        "%-5s b=%-3d fwd %7.1f us vs %7.1f us (%+5.1f%%)  bwd %7.1f us vs %7.1f us (%+5.1f%%)\n",
        key.first.c_str(), key.second, mine.first * 1e6, theirs.first * 1e6,
        100 * (mine.first / theirs.first - 1), mine.second * 1e6, theirs.second * 1e6,
        100 * (mine.second / theirs.second - 1));
    EXPECT_NEAR(mine.first / theirs.first, 1, kLayerBound) << key.first << " b=" << key.second;
    EXPECT_NEAR(mine.second / theirs.second, 1, backward_bound(own, key.first))
        << key.first << " b=" << key.second;
  }
  for (const auto& [b, t] : sums(imported, own)) {
    std::printf("total b=%d: %.2f ms imported, %.2f ms pipetwin profile (%+.1f%%)\n", b,
                t.first * 1e3, t.second * 1e3, 100 * (t.first / t.second - 1));
    EXPECT_NEAR(t.first / t.second, 1, kSumBound) << "b=" << b;
  }
}

TEST(TraceImportReal, AgreesWithPipetwinProfileOfTheSameMlp) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  if (!std::filesystem::exists(binary())) GTEST_SKIP() << binary() << " is not built";
  expect_agreement("mlp", fmt::format("mlp:layers=4,width={0},input={0},classes={0}", kWidth),
                   fmt::format("--width {0} --inputs {0} --classes {0}", kWidth));
}

TEST(TraceImportReal, AgreesWithPipetwinProfileOfTheSameSkipModel) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  if (!std::filesystem::exists(binary())) GTEST_SKIP() << binary() << " is not built";
  expect_agreement("skip",
                   fmt::format("mlp:layers=3,width={0},input={0},classes={0},skip=1", kWidth),
                   fmt::format("--width {0} --inputs {0} --classes {0}", kWidth));
}

}  // namespace
}  // namespace pipetwin::trace_import
