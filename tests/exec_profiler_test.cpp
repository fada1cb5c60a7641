// The profiler (exec/profile/profiler.hpp): what it measures matches the model it measures.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/host.hpp"
#include "exec/profile/profile_passes.hpp"
#include "exec/profile/profiler.hpp"
#include "models/zoo.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::exec {
namespace {

constexpr const char* kModel = "mlp:layers=2,width=64,input=16";

ProfileOptions quick() {
  ProfileOptions o;
  o.micro_batches = {1, 4};
  o.warmup = 1;
  o.repeats = 3;
  return o;
}

TEST(Profiler, LayersSizesAndBytesMatchTheModel) {
  ProfileOptions o = quick();
  o.optimizer.momentum = 0.9;
  const Profile p = profile_model(kModel, o);
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].name, "fc0");
  EXPECT_EQ(p.layers[2].name, "head");
  EXPECT_EQ(p.dtype, "float32");
  EXPECT_EQ(p.source, "measured");
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 16 * 4);
  // fc0: Linear(16, 64); fc1: Linear(64, 64); head: Linear(64, 10), float32.
  EXPECT_DOUBLE_EQ(p.layers[0].param_bytes, (16 * 64 + 64) * 4);
  EXPECT_DOUBLE_EQ(p.layers[1].param_bytes, (64 * 64 + 64) * 4);
  EXPECT_DOUBLE_EQ(p.layers[2].param_bytes, (64 * 10 + 10) * 4);
  EXPECT_DOUBLE_EQ(p.layers[1].optimizer_bytes, p.layers[1].param_bytes);  // one momentum buffer
  EXPECT_EQ(p.optimizer, "momentum");  // what core/precision.hpp rescales from
  EXPECT_DOUBLE_EQ(p.layers[0].output_bytes_per_sample, 64 * 4);
  EXPECT_DOUBLE_EQ(p.layers[2].output_bytes_per_sample, 10 * 4);
  for (const auto& l : p.layers) {
    ASSERT_EQ(l.timings.size(), 2u) << l.name;
    EXPECT_EQ(l.timings[0].micro_batch, 1);
    EXPECT_EQ(l.timings[1].micro_batch, 4);
    for (const auto& t : l.timings) {
      EXPECT_GT(t.forward_s, 0) << l.name;
      EXPECT_GT(t.backward_s, 0) << l.name;
      EXPECT_GT(t.recompute_s, 0) << l.name;
      EXPECT_GE(t.contention, 1.0) << l.name;
    }
    EXPECT_GT(l.optimizer_step_s, 0) << l.name;
  }
  // The forward keeps at least its output alive for backward.
  EXPECT_GE(p.layers[1].saved_bytes_per_sample, p.layers[1].output_bytes_per_sample);
  // Workspace (core/profile.hpp): fc1 is Linear then ReLU. The Linear's output is freed once the
  // ReLU has made its own (the forward's workspace), and its gradient lives between the two
  // operators' backwards (the backward's): one activation each, exactly.
  EXPECT_DOUBLE_EQ(p.layers[1].forward_workspace_bytes_per_sample, 64 * 4);
  EXPECT_DOUBLE_EQ(p.layers[1].backward_workspace_bytes_per_sample, 64 * 4);
  // What the profiler writes, the loader accepts.
  const Json doc = profile_to_json(p);
  EXPECT_NO_THROW(profile_from_json(JsonView(doc, "measured.json")));
}

TEST(Profiler, Float64DoublesTheBytes) {
  ProfileOptions o = quick();
  o.micro_batches = {2};
  o.float64 = true;
  o.contention = false;
  const Profile p = profile_model(kModel, o);
  EXPECT_EQ(p.dtype, "float64");
  EXPECT_DOUBLE_EQ(p.layers[0].param_bytes, (16 * 64 + 64) * 8);
  EXPECT_DOUBLE_EQ(p.layers[0].output_bytes_per_sample, 64 * 8);
  EXPECT_DOUBLE_EQ(p.layers[0].optimizer_bytes, 0);  // plain SGD keeps no state
}

TEST(Profiler, ContentionIsMeasuredOnlyWithASecondCore) {
  ProfileOptions o = quick();
  o.contention = false;
  const Profile off = profile_model(kModel, o);
  for (const auto& l : off.layers) {
    for (const auto& t : l.timings) EXPECT_EQ(t.contention, 1.0);
  }
  EXPECT_NE(off.notes.find("not measured"), std::string::npos) << off.notes;
  EXPECT_TRUE(off.cold_pauses_s.empty());  // cold starts are measured beside the co-runner
  o.contention = true;
  const Profile on = profile_model(kModel, o);
  EXPECT_TRUE(off.core_slowdown.empty());
  const bool two = usable_cores() >= 2;
  EXPECT_EQ(on.notes.find("co-runner") != std::string::npos, two) << on.notes;
  if (two) {
    for (const auto& l : on.layers) {
      for (const auto& t : l.timings) {
        EXPECT_GE(t.contention, 1.0) << l.name;
        EXPECT_GE(t.contention_backward, 1.0) << l.name << ": measured apart from the forward's";
        ASSERT_EQ(t.cold_forward_s.size(), o.cold_pauses_s.size()) << l.name;
        ASSERT_EQ(t.cold_backward_s.size(), o.cold_pauses_s.size()) << l.name;
        for (size_t i = 0; i < o.cold_pauses_s.size(); ++i) {
          EXPECT_GE(t.cold_forward_s[i], 0) << l.name;
          EXPECT_GE(t.cold_backward_s[i], 0) << l.name;
        }
      }
    }
    EXPECT_EQ(on.cold_pauses_s, o.cold_pauses_s);
    ASSERT_EQ(on.core_slowdown.size(), static_cast<size_t>(std::min(usable_cores(), 8)));
    EXPECT_EQ(on.core_slowdown[0], 1.0);  // relative to the core the layers were timed on
    for (double s : on.core_slowdown) EXPECT_GT(s, 0);
  }
}

// A pass times every layer once per kind (the untimed warm-up forward not among them), and one
// stopped by `keep_going` goes on where it stopped: the co-runner's passes run on across pauses.
TEST(Profiler, PassesTimeEachKindOnceAndResumeWhereTheyStopped) {
  const std::unique_ptr<Device> device = make_device("cpu", 0);
  for (const char* name : {kModel, "unet:B=2,C=4,image=32"}) {
    models::LayeredModel model = models::build_model(name, at::kFloat, 1);
    const size_t n = model.layers.size();
    SequenceRunner runner(model, 2, quick(), *device);
    PassTimes t(n);
    std::atomic<bool> go{false};
    runner.pass(&t, &go);  // stopped before its first layer
    EXPECT_EQ(t.passes, 0);
    runner.pass(&t);
    go = true;
    runner.pass(&t, &go);
    EXPECT_EQ(t.passes, 2);
    for (size_t l = 0; l < n; ++l) {
      EXPECT_EQ(t.forward[l].size(), 2u) << name << " layer " << l;
      EXPECT_EQ(t.recompute[l].size(), 2u) << name << " layer " << l;
      EXPECT_EQ(t.backward[l].size(), 2u) << name << " layer " << l;
      if (model.layers[l].parameters().empty()) continue;
      EXPECT_EQ(t.optimizer[l].size(), 1u) << name << " layer " << l;  // the two steps take turns
      EXPECT_EQ(t.optimizer_new_version[l].size(), 1u) << name << " layer " << l;
    }
  }
}

// Per-layer medians are scaled to the median pass: two layers slow in different passes have
// medians of 1 ms each, while the passes' totals are 2, 6 and 6 ms, so the median pass is 6 ms.
TEST(Profiler, LayerMediansAddUpToTheMedianPass) {
  const Samples s{{1e-3, 1e-3, 5e-3}, {1e-3, 5e-3, 1e-3}, {}};
  const std::vector<double> m = pass_medians(s);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_DOUBLE_EQ(m[0], 3e-3);
  EXPECT_DOUBLE_EQ(m[1], 3e-3);
  EXPECT_EQ(m[2], 0);  // no samples: nothing, and no part in the totals
  // Passes alike: the medians as they are.
  const std::vector<double> same = pass_medians({{1e-3, 2e-3, 3e-3}, {4e-3, 5e-3, 6e-3}});
  EXPECT_DOUBLE_EQ(same[0], 2e-3);
  EXPECT_DOUBLE_EQ(same[1], 5e-3);
}

// A pass asked to wait sleeps before its timed forward and before its backward, outside the
// times it records.
TEST(Profiler, AWaitingPassSleepsOutsideItsTimes) {
  const std::unique_ptr<Device> device = make_device("cpu", 0);
  models::LayeredModel model = models::build_model(kModel, at::kFloat, 1);
  const size_t n = model.layers.size();
  SequenceRunner runner(model, 2, quick(), *device);
  runner.pass(nullptr);
  PassTimes t(n);
  constexpr double kWait = 0.05;
  const auto begin = std::chrono::steady_clock::now();
  runner.pass(&t, nullptr, kWait);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_GE(wall, 2 * kWait);
  double timed = 0;
  for (size_t l = 0; l < n; ++l) timed += t.forward[l].at(0) + t.backward[l].at(0);
  EXPECT_LT(timed, wall - 2 * kWait);
}

// Stopped mid-pass from another thread, the next call finishes that pass: every kind is timed
// as often as passes completed, never a layer twice in one pass.
TEST(Profiler, APassStoppedMidwayIsFinishedByTheNextCall) {
  const std::unique_ptr<Device> device = make_device("cpu", 0);
  models::LayeredModel model = models::build_model(kModel, at::kFloat, 1);
  const size_t n = model.layers.size();
  SequenceRunner runner(model, 4, quick(), *device);
  PassTimes t(n);
  std::atomic<bool> go{true};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    go = false;
  });
  while (go.load()) runner.pass(&t, &go);
  stopper.join();
  const int64_t started = t.passes;
  runner.pass(&t);  // finishes the pass the stop cut short, if it did
  EXPECT_GE(t.passes, started);
  EXPECT_LE(t.passes, started + 1);
  const auto passes = static_cast<size_t>(t.passes);
  for (size_t l = 0; l < n; ++l) {
    EXPECT_EQ(t.forward[l].size(), passes) << "layer " << l;
    EXPECT_EQ(t.recompute[l].size(), passes) << "layer " << l;
    EXPECT_EQ(t.backward[l].size(), passes) << "layer " << l;
  }
}

TEST(Profiler, BadOptionsNameTheFlag) {
  ProfileOptions o = quick();
  o.micro_batches = {2, 0};
  EXPECT_EQ(test::input_error([&] { profile_model(kModel, o); }),
            "--micro-batch: sizes must be positive (0 given)");
  o = quick();
  o.repeats = 0;
  EXPECT_THROW(profile_model(kModel, o), InputError);
  o = quick();
  EXPECT_THROW(profile_model("mlp:layers=-1", o), InputError);
  o = quick();
  o.cold_pauses_s = {0.004, 0.001};
  EXPECT_EQ(test::input_error([&] { profile_model(kModel, o); }),
            "cold pauses must be positive and increase (0.004, 0.001 given)");
}

}  // namespace
}  // namespace pipetwin::exec
