// import-trace on real PyTorch profiler traces: python/pipetwin_trace.py records an MLP and a
// model with a skip connection with the PyTorch of /usr/bin/python3 (Debian's python3-torch), and
// the imported profiles must hold together — positive times that add up to the step, the loss in
// the last layer, exact bytes and edges (trace_import_agreement_test.cpp compares the times with
// `pipetwin profile`). Skipped when that Python cannot import torch. The CLI part runs
// build/pipetwin (skipped when it is not built).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"
#include "trace_import_real_util.hpp"

namespace pipetwin::trace_import {
namespace {

// Per measured step: the parts add up to the step, the layers' forward stays inside it.
void expect_steps_add_up(const KinetoTrace& trace) {
  const TraceMeasure m = measure_trace(trace, LayerSelection{});
  ASSERT_GE(m.steps.size(), 4u);
  for (const StepMeasure& s : m.steps) {
    double fwd = 0, bwd = 0;
    for (size_t l = 0; l < m.layers.size(); ++l) {
      EXPECT_GT(s.forward_s[l], 0) << trace.origin << " " << m.layers[l];
      EXPECT_GT(s.backward_s[l], 0) << trace.origin << " " << m.layers[l];
      fwd += s.forward_s[l];
      bwd += s.backward_s[l];
    }
    EXPECT_LT(fwd, s.step_s);
    EXPECT_LT(fwd + bwd + s.optimizer_s, s.step_s);
    EXPECT_GT(s.optimizer_s, 0);
    EXPECT_NEAR(fwd + bwd + s.optimizer_s + s.unattributed_s, s.step_s, 1e-12);
    EXPECT_GT(s.unattributed_s, 0);  // the loss, zero_grad, Python between the layers
  }
}

ImportResult import_files(const std::vector<std::string>& paths) {
  std::vector<KinetoTrace> traces;
  for (const auto& p : paths) traces.push_back(load_kineto_trace(p));
  for (const auto& t : traces) expect_steps_add_up(t);
  return import_traces(traces, {});
}

// Bytes of a Linear(in, out) in float32.
double linear_bytes(int in, int out) {
  return 4.0 * (in * out + out);
}

TEST(TraceImportReal, TorchMlp) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  test::TempDir dir;
  const ImportResult r = import_files(record("mlp", dir));
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 5);
  const char* names[] = {"fc0", "fc1", "fc2", "fc3", "head"};
  for (int l = 0; l < 5; ++l) {
    const LayerProfile& x = p.layers[size_t(l)];
    EXPECT_EQ(x.name, names[l]);
    EXPECT_EQ(x.kind, "linear");
    ASSERT_EQ(x.timings.size(), 2u);
    EXPECT_EQ(x.timings[0].micro_batch, 1);
    EXPECT_EQ(x.timings[1].micro_batch, 4);
    EXPECT_GT(x.optimizer_step_s, 0);
    EXPECT_DOUBLE_EQ(x.param_bytes, l == 0  ? linear_bytes(64, 256)
                                    : l < 4 ? linear_bytes(256, 256)
                                            : linear_bytes(256, 10));
    EXPECT_DOUBLE_EQ(x.output_bytes_per_sample, l < 4 ? 1024 : 40);
    EXPECT_DOUBLE_EQ(x.saved_bytes_per_sample, l < 4 ? 1024 : 40);  // ReLU's output; the logits
  }
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 256);
  EXPECT_TRUE(p.edges.empty());
  EXPECT_EQ(p.device, "cpu-core");
  EXPECT_EQ(p.optimizer, "sgd");
  for (const TraceReport& t : r.traces) {
    // Every backward op is a layer's: the loss's NllLossBackward0 and LogSoftmaxBackward0 the
    // head's.
    EXPECT_EQ(t.backward_ops, t.backward_attributed) << t.origin;
    EXPECT_GT(t.loss_s, 0) << t.origin;
    EXPECT_GT(t.unattributed_share, 0);
    EXPECT_LT(t.unattributed_share, 0.6) << t.origin;
    // The helper's own measurements: the unprofiled step, and the steady heap's page faults
    // (about none; without steady_heap() about 1,000 per step at micro-batch 512, width 256).
    EXPECT_GT(t.unprofiled_step_s, 0) << t.origin;
    EXPECT_GE(t.page_faults_per_step, 0) << t.origin;
    EXPECT_LT(t.page_faults_per_step, kManyPageFaultsPerStep) << t.origin;
    std::printf("%s: step %.1f us, unattributed %.1f%%\n", t.origin.c_str(), t.step_s * 1e6,
                100 * t.unattributed_share);
  }
  for (const auto& l : p.layers) {
    std::printf("%-5s fwd b=1 %6.1f us b=4 %6.1f us  bwd b=1 %6.1f us b=4 %6.1f us  opt %5.1f us\n",
                l.name.c_str(), l.timings[0].forward_s * 1e6, l.timings[1].forward_s * 1e6,
                l.timings[0].backward_s * 1e6, l.timings[1].backward_s * 1e6,
                l.optimizer_step_s * 1e6);
  }
}

TEST(TraceImportReal, TorchSkipConnection) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  test::TempDir dir;
  const ImportResult r = import_files(record("skip", dir));
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 4);
  EXPECT_EQ(p.layers[3].name, "head");
  // The chain and head's second input, fc0's output (found by walking the autograd graph).
  ASSERT_EQ(p.edges.size(), 4u);
  const int ends[4][2] = {{0, 1}, {0, 3}, {1, 2}, {2, 3}};
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(p.edges[e].from, ends[e][0]) << e;
    EXPECT_EQ(p.edges[e].to, ends[e][1]) << e;
    EXPECT_DOUBLE_EQ(p.edges[e].bytes_per_sample, 1024) << e;
  }
  EXPECT_DOUBLE_EQ(p.layers[3].param_bytes, linear_bytes(256, 10));
  // The sum of its two inputs, which its Linear keeps, and the logits.
  EXPECT_DOUBLE_EQ(p.layers[3].saved_bytes_per_sample, 1024 + 40);
  for (const TraceReport& t : r.traces) {
    // The add is the head's (SkipHead), the loss's backward ops too.
    EXPECT_EQ(t.backward_ops, t.backward_attributed) << t.origin;
  }
  const Json j = profile_to_json(p);
  EXPECT_NO_THROW(profile_from_json(JsonView(j, "imported")));
}

// The verb as users meet it: a bad trace is one line on stderr, exit code 2, nothing written.
TEST(TraceImportReal, CliRefusesBadTracesAndWritesNothing) {
  if (!std::filesystem::exists(binary())) GTEST_SKIP() << binary() << " is not built";
  test::TempDir dir;
  const std::string src = test::source_dir() + "/tests/data/traces/";
  test::write_text(dir.file("bad.json"), "{\"traceEvents\": [");
  test::write_text(dir.file("profile.json"), "{\"format\": \"pipetwin.profile\"}");
  test::write_text(dir.file("ops.json"), R"([{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}])");
  // The legacy export of two steps with no layer ranges.
  test::write_text(dir.file("legacy.json"), R"([
      {"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2, "tid": 1},
      {"ph": "X", "name": "autograd::engine::evaluate_function: MmBackward0", "ts": 4, "dur": 2, "tid": 1},
      {"ph": "X", "name": "Optimizer.step#SGD.step", "ts": 7, "dur": 2, "tid": 1},
      {"ph": "X", "name": "aten::mm", "ts": 11, "dur": 2, "tid": 1},
      {"ph": "X", "name": "autograd::engine::evaluate_function: MmBackward0", "ts": 14, "dur": 2, "tid": 1},
      {"ph": "X", "name": "Optimizer.step#SGD.step", "ts": 17, "dur": 2, "tid": 1}])");
  const std::pair<std::string, std::string> cases[] = {
      {dir.file("bad.json"), "bad.json:1:"},
      {dir.file("profile.json"), "profile.json: traceEvents: missing required field"},
      {src + "cpu-skip.trace.json --layers depth=0", "--layers: depth must be"},
      {src + "cpu-skip.trace.json --micro-batch 8", "--micro-batch gives 8 for it"},
      {src + "cpu-skip.trace.json --device tpu-v9", "--device: unknown device"},
      {src + "cpu-skip.trace.json --loss first", "--loss: last or unattributed (\"first\" given)"},
      {src + "cpu-skip.trace.json " + src + "cpu-skip.trace.json", "already given by"},
      // Traces recorded without the helper (trace_import_plain_test.cpp).
      {src + "torch2-modules.trace.json --layers 4", "--layers 4: the trace's layer ranges give 5"},
      {src + "torch2-modules.trace.json --layers 0", "--layers: a count of layers must be"},
      {dir.file("ops.json"), "no training step: no \"pipetwin.step:<i>\", \"ProfilerStep#<n>\""},
      {dir.file("legacy.json"), "no \"pipetwin.layer:<name>\" or \"nn.Module: \" range"}};
  const std::string out = dir.file("out.profile.json");
  for (const auto& [args, want] : cases) {
    const int rc = run(fmt::format("{} import-trace {} -o {} >{} 2>{}", binary(), args, out,
                                   dir.file("stdout"), dir.file("stderr")));
    const std::string err = test::read_text(dir.file("stderr"));
    EXPECT_EQ(rc, 2) << args << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("pipetwin: error: ", 0), 0u) << err;
    EXPECT_NE(err.find(want), std::string::npos) << err << " wanted: " << want;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
  EXPECT_EQ(run(fmt::format("{} import-trace {}cpu-skip.trace.json -o {} -q", binary(), src, out)),
            0);
  EXPECT_NO_THROW(load_profile(out));
}

}  // namespace
}  // namespace pipetwin::trace_import
