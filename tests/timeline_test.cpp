// core/timeline.hpp and core/metrics.hpp: the Chrome-trace format and the metrics of hand-built
// timelines, each against a hand-computed value.
#include "core/timeline.hpp"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::Pair;

constexpr double kTol = 1e-12;

TimelineEvent ev(int device, Op op, int stage, int mb, int step, int version, double start,
                 double end) {
  TimelineEvent e;
  e.device = device;
  e.action.op = op;
  e.action.stage = stage;
  e.action.micro_batch = mb;
  e.action.step = step;
  e.action.version = version;
  e.start_s = start;
  e.end_s = end;
  return e;
}

TimelineEvent comm(int device, Op op, Payload payload, int stage, int peer, int mb, double start,
                   double end) {
  TimelineEvent e = ev(device, op, stage, mb, 0, -1, start, end);
  e.action.payload = payload;
  e.action.peer_stage = peer;
  return e;
}

Timeline blank(int devices) {
  Timeline t;
  t.schedule = "test";
  for (int d = 0; d < devices; ++d) t.device_names.push_back("dev" + std::to_string(d));
  return t;
}

// Two stages on two devices, one micro-batch: every kind of action and field appears once.
// Listed in (start, device) order, the order the trace is written in.
Timeline sample_timeline() {
  Timeline t;
  t.source = "measured";
  t.schedule = "gpipe";
  t.device_names = {"gpu0", "gpu1"};
  t.events = {
      ev(0, Op::kForward, 0, 0, 0, 0, 0.0, 0.001),
      comm(0, Op::kSend, Payload::kActivation, 0, 1, 0, 0.001, 0.0015),
      comm(1, Op::kRecv, Payload::kActivation, 1, 0, 0, 0.001, 0.0015),
      ev(1, Op::kForward, 1, 0, 0, 0, 0.0015, 0.0025),
      ev(1, Op::kRecompute, 1, 0, 0, 0, 0.0025, 0.003),
      ev(1, Op::kBackward, 1, 0, 0, 0, 0.003, 0.0035),
      comm(1, Op::kSend, Payload::kGradient, 1, 0, 0, 0.0035, 0.004),
      ev(0, Op::kBackward, 0, 0, 0, 0, 0.004, 0.006),
      ev(0, Op::kAllReduce, 0, -1, 0, -1, 0.006, 0.007),
      ev(0, Op::kOptimizerStep, 0, -1, 0, 1, 0.007, 0.0075),
      ev(1, Op::kOptimizerStep, 1, -1, 0, 1, 0.007, 0.0072),
  };
  t.events[8].action.bucket = 2;
  t.memory = {{{0, 100}, {0.001, 250.5}}, {{0.002, 10}}};
  t.peak_memory_bytes = {250.5, 10};
  return t;
}

void expect_same(const Timeline& a, const Timeline& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.device_names, b.device_names);
  EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& x = a.events[i];
    const auto& y = b.events[i];
    EXPECT_EQ(x.device, y.device);
    EXPECT_NEAR(x.start_s, y.start_s, kTol);
    EXPECT_NEAR(x.end_s, y.end_s, kTol);
    EXPECT_EQ(x.action.op, y.action.op);
    EXPECT_EQ(x.action.payload, y.action.payload);
    EXPECT_EQ(x.action.stage, y.action.stage);
    EXPECT_EQ(x.action.micro_batch, y.action.micro_batch);
    EXPECT_EQ(x.action.peer_stage, y.action.peer_stage);
    EXPECT_EQ(x.action.bucket, y.action.bucket);
    EXPECT_EQ(x.action.step, y.action.step);
    EXPECT_EQ(x.action.version, y.action.version);
  }
  ASSERT_EQ(a.memory.size(), b.memory.size());
  for (size_t d = 0; d < a.memory.size(); ++d) {
    ASSERT_EQ(a.memory[d].size(), b.memory[d].size());
    for (size_t i = 0; i < a.memory[d].size(); ++i) {
      EXPECT_NEAR(a.memory[d][i].time_s, b.memory[d][i].time_s, kTol);
      EXPECT_EQ(a.memory[d][i].bytes, b.memory[d][i].bytes);
    }
  }
}

TEST(Timeline, ChromeTraceRoundTripKeepsEveryField) {
  const Timeline t = sample_timeline();
  const Json doc = timeline_to_chrome_trace(t);
  expect_same(timeline_from_chrome_trace(JsonView(doc, "t.json")), t);
}

TEST(Timeline, FileRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("timeline.json");
  const Timeline t = sample_timeline();
  save_timeline(t, path);
  expect_same(load_timeline(path), t);
}

TEST(Timeline, OneProcessPerDeviceAndOneThreadPerStream) {
  const Json doc = timeline_to_chrome_trace(sample_timeline());
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  EXPECT_THAT(process, ElementsAre(Pair(0, "gpu0"), Pair(1, "gpu1")));
  for (int pid : {0, 1}) {
    EXPECT_EQ(thread[std::pair(pid, 0)], "compute");
    EXPECT_EQ(thread[std::pair(pid, 1)], "send");
    EXPECT_EQ(thread[std::pair(pid, 2)], "recv");
    EXPECT_EQ(thread[std::pair(pid, 3)], "collective");
  }
  EXPECT_EQ(thread.size(), 8u);
  EXPECT_EQ(doc["otherData"]["format"], "pipetwin.timeline");
}

TEST(Timeline, CompleteEventsSitOnTheirStreamInMicroseconds) {
  const Json doc = timeline_to_chrome_trace(sample_timeline());
  std::map<std::string, int> tid_of;
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    tid_of[e["args"]["op"]] = e["tid"];
    if (e["args"]["op"] == "backward" && e["pid"] == 0) {
      EXPECT_NEAR(e["ts"].get<double>(), 4000, 1e-9);  // 0.004 s
      EXPECT_NEAR(e["dur"].get<double>(), 2000, 1e-9);
      EXPECT_EQ(e["args"]["mb"], 0);
      EXPECT_EQ(e["args"]["stage"], 0);
      EXPECT_EQ(e["args"]["version"], 0);
    }
    if (e["args"]["op"] == "allreduce") {
      EXPECT_EQ(e["args"]["bucket"], 2);
    }
  }
  EXPECT_EQ(complete, 11);
  EXPECT_EQ(tid_of["forward"], 0);
  EXPECT_EQ(tid_of["backward"], 0);
  EXPECT_EQ(tid_of["recompute"], 0);
  EXPECT_EQ(tid_of["send"], 1);
  EXPECT_EQ(tid_of["recv"], 2);
  EXPECT_EQ(tid_of["allreduce"], 3);
}

// A split backward's halves are slices of their own on the compute stream, named I and W.
TEST(Timeline, SplitBackwardHalvesAreTheirOwnSlices) {
  Timeline t = sample_timeline();
  Action i{Op::kBackwardInput, Payload::kNone, 0, 1, -1, -1, 0, 0};
  Action w{Op::kBackwardWeight, Payload::kNone, 0, 1, -1, -1, 0, 0};
  t.events.push_back({0, i, 0.010, 0.011});
  t.events.push_back({0, w, 0.012, 0.0135});
  const Json doc = timeline_to_chrome_trace(t);
  int seen = 0;
  for (const auto& e : doc["traceEvents"]) {
    // (a const json's operator[] must not be asked for a key it lacks: an optimizer step has no mb)
    if (e["ph"] != "X" || !e["args"].contains("mb") || e["args"]["mb"] != 1) continue;
    if (e["args"]["op"] == "backward_input") {
      EXPECT_EQ(e["name"], "I s0 mb1 v0");
      EXPECT_NEAR(e["dur"].get<double>(), 1000, 1e-9);
      ++seen;
    } else if (e["args"]["op"] == "backward_weight") {
      EXPECT_EQ(e["name"], "W s0 mb1 v0");
      EXPECT_NEAR(e["dur"].get<double>(), 1500, 1e-9);
      ++seen;
    }
    if (seen > 0) EXPECT_EQ(e["tid"], 0);
  }
  EXPECT_EQ(seen, 2);
  const Timeline back = timeline_from_chrome_trace(JsonView(doc, "t.json"));
  EXPECT_EQ(back.events.size(), t.events.size());
  EXPECT_EQ(back.events.back().action.op, Op::kBackwardWeight);
}

TEST(TimelineErrors, BadTraces) {
  const Json good = timeline_to_chrome_trace(sample_timeline());
  auto error_of = [](const Json& doc) {
    return input_error([&] { timeline_from_chrome_trace(JsonView(doc, "t.json")); });
  };
  // Find the index of the first complete event.
  size_t x = 0;
  while (good["traceEvents"][x]["ph"] != "X") ++x;
  const std::string at = "t.json: traceEvents[" + std::to_string(x) + "]";

  Json doc = good;
  doc["traceEvents"][x]["pid"] = 5;
  EXPECT_EQ(error_of(doc), at + ".pid: device 5 not in otherData.devices (0..1)");
  doc = good;
  doc["traceEvents"][x]["args"]["op"] = "fly";
  EXPECT_EQ(error_of(doc), at + ".args.op: unknown op \"fly\"");
  doc = good;
  doc["traceEvents"][x]["ph"] = "B";
  EXPECT_EQ(error_of(doc), at + ".ph: unsupported event phase \"B\"");
  doc = good;
  doc["traceEvents"][x]["dur"] = -1;
  EXPECT_EQ(error_of(doc), at + ".dur: expected a non-negative number, got -1");
  doc = good;
  doc["traceEvents"][x]["args"]["mb"] = 4294967296LL;  // 2^32 must not wrap to 0
  EXPECT_EQ(error_of(doc), at + ".args.mb: 4294967296 is out of range");
  doc = good;
  doc["traceEvents"][x]["args"].erase("step");
  EXPECT_EQ(error_of(doc), at + ".args.step: missing required field");
  doc = good;
  size_t u = x;  // the first optimizer step
  while (good["traceEvents"][u]["args"].value("op", "") != "optimizer_step") ++u;
  doc["traceEvents"][u]["args"]["step"] = -1;
  EXPECT_EQ(error_of(doc),
            "t.json: traceEvents[" + std::to_string(u) +
                "].args.step: an optimizer step needs a step number >= 0 (-1 given)");
  doc = good;
  doc["otherData"]["format"] = "pipetwin.metrics";
  EXPECT_EQ(error_of(doc),
            "t.json: otherData.format: expected \"pipetwin.timeline\", got \"pipetwin.metrics\"");
  doc = good;
  doc.erase("otherData");
  EXPECT_EQ(error_of(doc), "t.json: otherData: missing required field");
}

// One device, three synchronous steps of period 4: F [4k, 4k+1], B [4k+1, 4k+3],
// U [4k+3, 4k+3.5], idle until 4k+4.
Timeline three_steps() {
  Timeline t = blank(1);
  for (int k = 0; k < 3; ++k) {
    const double base = 4.0 * k;
    t.events.push_back(ev(0, Op::kForward, 0, k, k, k, base, base + 1));
    t.events.push_back(ev(0, Op::kBackward, 0, k, k, k, base + 1, base + 3));
    t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, k, k + 1, base + 3, base + 3.5));
  }
  return t;
}

TEST(Metrics, IterationTimeOverTheSteadyWindow) {
  const Metrics m = compute_metrics(three_steps(), 1, false, 8);
  EXPECT_EQ(m.steps, 3);
  EXPECT_THAT(m.step_end_s, ElementsAre(3.5, 7.5, 11.5));
  EXPECT_TRUE(m.steady_state);
  EXPECT_EQ(m.window_start_s, 3.5);
  EXPECT_EQ(m.window_end_s, 11.5);
  EXPECT_NEAR(m.iteration_time_s, 4, kTol);
  EXPECT_NEAR(m.throughput_samples_per_s, 8.0 / 4, kTol);
  EXPECT_EQ(m.makespan_s, 11.5);
  // Busy in [3.5, 11.5]: [4, 7.5] and [8, 11.5], 7 of 8 seconds.
  ASSERT_EQ(m.devices.size(), 1u);
  EXPECT_NEAR(m.devices[0].busy_s, 7, kTol);
  EXPECT_NEAR(m.devices[0].utilization, 7.0 / 8, kTol);
  EXPECT_NEAR(m.bubble_fraction, 1.0 / 8, kTol);
  EXPECT_NEAR(m.compute_s_by_op.at("forward"), 3, kTol);
  EXPECT_NEAR(m.compute_s_by_op.at("backward"), 6, kTol);
  EXPECT_NEAR(m.compute_s_by_op.at("optimizer_step"), 1.5, kTol);
}

TEST(Metrics, TwoStagePipelineBubble) {
  // Period 6.5: dev0 F [0,1], dev1 F [1,2], dev1 B [2,4], dev0 B [4,6], both U [6,6.5].
  // Each device computes 3.5 of every 6.5 seconds.
  Timeline t = blank(2);
  for (int k = 0; k < 3; ++k) {
    const double o = 6.5 * k;
    t.events.push_back(ev(0, Op::kForward, 0, k, k, k, o, o + 1));
    t.events.push_back(ev(1, Op::kForward, 1, k, k, k, o + 1, o + 2));
    t.events.push_back(ev(1, Op::kBackward, 1, k, k, k, o + 2, o + 4));
    t.events.push_back(ev(0, Op::kBackward, 0, k, k, k, o + 4, o + 6));
    t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, k, k + 1, o + 6, o + 6.5));
    t.events.push_back(ev(1, Op::kOptimizerStep, 1, -1, k, k + 1, o + 6, o + 6.5));
  }
  const Metrics m = compute_metrics(t, 2, false, 4);
  EXPECT_NEAR(m.iteration_time_s, 6.5, kTol);
  EXPECT_NEAR(m.devices[0].utilization, 7.0 / 13, kTol);
  EXPECT_NEAR(m.devices[1].utilization, 7.0 / 13, kTol);
  EXPECT_NEAR(m.bubble_fraction, 6.0 / 13, kTol);
  EXPECT_EQ(m.devices[1].name, "dev1");
}

TEST(Metrics, AsynchronousWindowLeavesOutFillAndDrain) {
  // Optimizer steps end at 1, 2, 4, 6, 7; with K = 1 the window runs from step 1's end to
  // step 3's: (6 - 2) / 2.
  Timeline t = blank(1);
  const std::vector<double> ends = {1, 2, 4, 6, 7};
  for (size_t k = 0; k < ends.size(); ++k) {
    const int step = static_cast<int>(k);
    t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, step, step + 1, ends[k] - 0.5, ends[k]));
  }
  const Metrics m = compute_metrics(t, 1, true, 1);
  EXPECT_TRUE(m.steady_state);
  EXPECT_EQ(m.window_start_s, 2);
  EXPECT_EQ(m.window_end_s, 6);
  EXPECT_NEAR(m.iteration_time_s, 2, kTol);
  // With K = 2 nothing is left between fill and drain: the whole run, makespan / steps.
  const Metrics short_run = compute_metrics(t, 2, true, 1);
  EXPECT_FALSE(short_run.steady_state);
  EXPECT_NEAR(short_run.iteration_time_s, 7.0 / 5, kTol);
}

TEST(Metrics, MedianStepIgnoresOneStalledStep) {
  // Steps end at 1, 2, 3, 9, 10, 11: step times in the window 1, 1, 6, 1, 1.
  Timeline t = blank(1);
  const std::vector<double> ends = {1, 2, 3, 9, 10, 11};
  for (size_t k = 0; k < ends.size(); ++k) {
    const int step = static_cast<int>(k);
    t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, step, step + 1, ends[k] - 0.5, ends[k]));
  }
  const Metrics m = compute_metrics(t, 1, false, 1);
  EXPECT_NEAR(m.iteration_time_s, 2, kTol);  // (11 - 1) / 5
  EXPECT_NEAR(m.iteration_time_median_s, 1, kTol);
  // An even count takes the mean of the middle two: 1, 1, 6, 1 -> (1 + 1) / 2; 1, 1 -> 1.
  t.events.pop_back();
  EXPECT_NEAR(compute_metrics(t, 1, false, 1).iteration_time_median_s, 1, kTol);
  t.events.resize(3);
  EXPECT_NEAR(compute_metrics(t, 1, false, 1).iteration_time_median_s, 1, kTol);
  // A synchronous steady state: the median is the mean.
  EXPECT_NEAR(compute_metrics(three_steps(), 1, false, 8).iteration_time_median_s, 4, kTol);
  const Json doc = metrics_to_json(m);
  EXPECT_NEAR(metrics_from_json(JsonView(doc, "m.json")).iteration_time_median_s, 1, kTol);
}

TEST(Metrics, OneStepIsTheWholeRun) {
  Timeline t = blank(1);
  t.events.push_back(ev(0, Op::kForward, 0, 0, 0, 0, 0, 2));
  t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, 0, 1, 3, 5));
  const Metrics m = compute_metrics(t, 1, false, 10);
  EXPECT_FALSE(m.steady_state);
  EXPECT_NEAR(m.iteration_time_s, 5, kTol);
  EXPECT_NEAR(m.throughput_samples_per_s, 2, kTol);
  EXPECT_NEAR(m.devices[0].utilization, 4.0 / 5, kTol);
}

TEST(Metrics, CommunicationOverlap) {
  // dev0 computes [0, 2] and sends [1, 3] (1 of 2 s overlapped); dev1 receives [1, 3] and
  // computes [2.5, 4] (0.5 of 2 s); dev0's all-reduce [5, 6] overlaps nothing.
  Timeline t = blank(2);
  t.events.push_back(ev(0, Op::kForward, 0, 0, 0, 0, 0, 2));
  t.events.push_back(comm(0, Op::kSend, Payload::kActivation, 0, 1, 0, 1, 3));
  t.events.push_back(comm(1, Op::kRecv, Payload::kActivation, 1, 0, 0, 1, 3));
  t.events.push_back(ev(1, Op::kForward, 1, 0, 0, 0, 2.5, 4));
  t.events.push_back(ev(0, Op::kAllReduce, 0, -1, 0, -1, 5, 6));
  const Metrics m = compute_metrics(t, 2, false, 1);
  EXPECT_NEAR(m.comm_time_s, 5, kTol);
  EXPECT_NEAR(m.comm_overlap_fraction, 1.5 / 5, kTol);
  EXPECT_NEAR(m.devices[0].comm_s, 3, kTol);
  EXPECT_NEAR(m.devices[1].comm_s, 2, kTol);
}

// PipeDream on one stage: two forwards on v0, then backward/update interleaved with forwards.
// `stash`: backwards read the version their forward used; else the current one.
Timeline pipedream_like(bool stash) {
  Timeline t = blank(1);
  t.events.push_back(ev(0, Op::kForward, 0, 0, 0, 0, 0, 1));
  t.events.push_back(ev(0, Op::kForward, 0, 1, 0, 0, 1, 2));
  t.events.push_back(ev(0, Op::kBackward, 0, 0, 0, 0, 2, 3));
  t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, 0, 1, 3, 3.5));
  t.events.push_back(ev(0, Op::kForward, 0, 2, 1, 1, 3.5, 4.5));
  t.events.push_back(ev(0, Op::kBackward, 0, 1, 1, stash ? 0 : 1, 4.5, 5.5));
  t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, 1, 2, 5.5, 6));
  t.events.push_back(ev(0, Op::kBackward, 0, 2, 2, stash ? 1 : 2, 6, 7));
  t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, 2, 3, 7, 7.5));
  return t;
}

TEST(Metrics, StalenessFromVersions) {
  // Delays (updates between a micro-batch's forward and its backward): mb0 0, mb1 1 - 0,
  // mb2 2 - 1.
  const Metrics m = compute_metrics(pipedream_like(true), 1, false, 1);
  ASSERT_EQ(m.staleness.size(), 1u);
  EXPECT_EQ(m.staleness[0].max, 1);
  EXPECT_NEAR(m.staleness[0].mean, 2.0 / 3, kTol);
  EXPECT_EQ(m.staleness[0].gradient_max, 1);     // stashed weights are as old as the forward's
  EXPECT_EQ(m.staleness[0].weight_versions, 2);  // mb1 on v0 and mb2 on v1 at once
  EXPECT_THAT(m.staleness_histogram, ElementsAre(Pair(0, 1), Pair(1, 2)));
  // Without stashing the backward reads current weights: no gradient delay, same loss delay.
  const Metrics fresh = compute_metrics(pipedream_like(false), 1, false, 1);
  EXPECT_EQ(fresh.staleness[0].max, 1);
  EXPECT_EQ(fresh.staleness[0].gradient_max, 0);
  // Synchronous training has none.
  const Metrics sync = compute_metrics(three_steps(), 1, false, 8);
  EXPECT_EQ(sync.staleness[0].max, 0);
  EXPECT_EQ(sync.staleness[0].weight_versions, 1);
  EXPECT_THAT(sync.staleness_histogram, ElementsAre(Pair(0, 3)));
}

TEST(Metrics, OptimizerStepWithoutAStepNumberIsRejected) {
  Timeline t = blank(1);
  t.events.push_back(ev(0, Op::kOptimizerStep, 0, -1, -1, 1, 0, 1));
  EXPECT_THROW(compute_metrics(t, 1, false, 1), std::exception);
}

TEST(Metrics, PeakMemoryFromSamplesAndPeaks) {
  Timeline t = blank(2);
  t.events.push_back(ev(0, Op::kForward, 0, 0, 0, 0, 0, 1));
  t.peak_memory_bytes = {100, 500};
  t.memory = {{{0, 50}, {0.5, 300}}, {{0, 20}}};
  const Metrics m = compute_metrics(t, 2, false, 1);
  EXPECT_EQ(m.devices[0].peak_memory_bytes, 300);
  EXPECT_EQ(m.devices[1].peak_memory_bytes, 500);
}

TEST(Metrics, JsonUsesTheDesignKeysAndRoundTrips) {
  Timeline t = pipedream_like(true);
  t.peak_memory_bytes = {1234};
  const Metrics m = compute_metrics(t, 1, false, 16);
  const Json j = metrics_to_json(m);
  for (const char* key : {"iteration_time_s", "throughput_samples_per_s", "bubble_fraction",
                          "comm_overlap_fraction", "devices", "staleness"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["devices"][0].contains("utilization"));
  EXPECT_TRUE(j["devices"][0].contains("peak_memory_bytes"));
  EXPECT_EQ(j["staleness"]["per_stage"], Json::array({1}));

  test::TempDir dir;
  const std::string path = dir.file("metrics.json");
  save_metrics(m, path);
  const Metrics b = load_metrics(path);
  EXPECT_EQ(b.source, m.source);
  EXPECT_EQ(b.schedule, m.schedule);
  EXPECT_EQ(b.num_stages, m.num_stages);
  EXPECT_EQ(b.steps, m.steps);
  EXPECT_EQ(b.steady_state, m.steady_state);
  EXPECT_EQ(b.samples_per_step, m.samples_per_step);
  EXPECT_EQ(b.iteration_time_s, m.iteration_time_s);
  EXPECT_EQ(b.throughput_samples_per_s, m.throughput_samples_per_s);
  EXPECT_EQ(b.bubble_fraction, m.bubble_fraction);
  EXPECT_EQ(b.comm_time_s, m.comm_time_s);
  EXPECT_EQ(b.comm_overlap_fraction, m.comm_overlap_fraction);
  EXPECT_EQ(b.makespan_s, m.makespan_s);
  EXPECT_EQ(b.step_end_s, m.step_end_s);
  ASSERT_EQ(b.devices.size(), 1u);
  EXPECT_EQ(b.devices[0].name, "dev0");
  EXPECT_EQ(b.devices[0].busy_s, m.devices[0].busy_s);
  EXPECT_EQ(b.devices[0].utilization, m.devices[0].utilization);
  EXPECT_EQ(b.devices[0].comm_s, m.devices[0].comm_s);
  EXPECT_EQ(b.devices[0].peak_memory_bytes, 1234);
  ASSERT_EQ(b.staleness.size(), 1u);
  EXPECT_EQ(b.staleness[0].max, 1);
}

TEST(MetricsErrors, RequiredFieldsAndFormat) {
  const Json good = metrics_to_json(compute_metrics(three_steps(), 1, false, 8));
  Json doc = good;
  doc.erase("iteration_time_s");
  EXPECT_EQ(input_error([&] { metrics_from_json(JsonView(doc, "m.json")); }),
            "m.json: iteration_time_s: missing required field");
  doc = good;
  doc["devices"][0]["utilization"] = -0.5;
  EXPECT_EQ(input_error([&] { metrics_from_json(JsonView(doc, "m.json")); }),
            "m.json: devices[0].utilization: expected a non-negative number, got -0.5");
  doc = good;
  doc["format"] = "pipetwin.timeline";
  EXPECT_EQ(input_error([&] { metrics_from_json(JsonView(doc, "m.json")); }),
            "m.json: format: expected \"pipetwin.metrics\", got \"pipetwin.timeline\"");
}

}  // namespace
}  // namespace pipetwin
