// The report's Gantt data (report/gantt.hpp): bubbles against GPipe's closed form, overlap
// against the metrics module, hand-built timelines, the cut to whole steps, foreign traces.
#include "report/gantt.hpp"

#include <gtest/gtest.h>

#include <map>

#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::report {
namespace {

using pipetwin::testing::PlanSpec;
using pipetwin::testing::uniform;

constexpr double kMs = 1e-3;

sim::SimResult simulate(const std::string& schedule, int K, int M, const std::string& extra,
                        int iterations, double bandwidth = 1e12) {
  PlanSpec s;
  s.model = uniform(K, 1.5, 2.5, extra);
  s.schedule = schedule;
  s.stages = K;
  s.chunks = M;
  s.cluster = pipetwin::testing::ideal_cluster(64, bandwidth);
  return pipetwin::testing::simulate(s, iterations);
}

std::map<int, double> idle_per_row(const Gantt& g) {
  std::map<int, double> idle;
  for (const auto& b : g.bubbles) idle[b.row] += b.end_s - b.start_s;
  return idle;
}

class GanttGPipe : public ::testing::TestWithParam<std::tuple<int, int>> {};

// GPipe (PipeTransformer Figure 6 and its appendix: "each device idles for (K-1) time blocks" in
// the forward and in the backward pass): every device idles (K-1)(f+b) per mini-batch, so the
// shaded share of a run of whole mini-batches is (K-1)/(M+K-1).
TEST_P(GanttGPipe, BubblesAreTheClosedForm) {
  const auto [K, M] = GetParam();
  const double f = 1.5 * kMs, b = 2.5 * kMs;
  const int iterations = 2;
  const Gantt g = gantt_from_timeline(simulate("gpipe", K, M, "", iterations).timeline, 100000);
  EXPECT_NEAR(g.end_s, iterations * (M + K - 1) * (f + b), 1e-12);
  EXPECT_NEAR(g.idle_fraction, double(K - 1) / (M + K - 1), 1e-9);
  int compute_rows = 0;
  const auto idle = idle_per_row(g);
  for (size_t r = 0; r < g.rows.size(); ++r) {
    if (g.rows[r].role != RowRole::kCompute) continue;
    ++compute_rows;
    const double want = iterations * (K - 1) * (f + b);
    EXPECT_NEAR(idle.count(int(r)) ? idle.at(int(r)) : 0.0, want, 1e-12) << g.rows[r].label;
  }
  EXPECT_EQ(compute_rows, K);
  // Device k waits k forwards for its first micro-batch.
  for (const auto& bub : g.bubbles) {
    const int device = g.rows[static_cast<size_t>(bub.row)].group;
    if (bub.start_s == 0) {
      EXPECT_NEAR(bub.end_s, device * f, 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KM, GanttGPipe,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 4)));

// Overlap shading covers the same share of communication as Metrics::comm_overlap_fraction
// (core/metrics.hpp), computed there by other code; with one step the idle share is the bubble
// fraction too.
TEST(Gantt, ShadingAgreesWithMetrics) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto r = simulate(schedule, 4, 6, "act_kb=64", 1, 1e8);
    const Gantt g = gantt_from_timeline(r.timeline, 100000);
    ASSERT_GT(r.metrics.comm_time_s, 0) << schedule;
    EXPECT_GT(g.overlap_fraction, 0) << schedule;
    EXPECT_NEAR(g.overlap_fraction, r.metrics.comm_overlap_fraction, 1e-9) << schedule;
    EXPECT_NEAR(g.idle_fraction, r.metrics.bubble_fraction, 1e-9) << schedule;
    EXPECT_FALSE(g.overlaps.empty());
    for (const auto& o : g.overlaps) {
      EXPECT_EQ(g.rows[static_cast<size_t>(o.row)].role, RowRole::kComm);
    }
  }
}

TimelineEvent event(int device, Op op, double start, double end, int step = 0, int mb = 0) {
  TimelineEvent e;
  e.device = device;
  e.action.op = op;
  e.action.stage = device;
  e.action.micro_batch = mb;
  e.action.step = step;
  e.start_s = start;
  e.end_s = end;
  return e;
}

TEST(Gantt, HandBuiltTimeline) {
  Timeline t;
  t.device_names = {"gpu0", "gpu1"};
  t.events = {event(0, Op::kForward, 0, 2), event(0, Op::kSend, 1, 4),
              event(0, Op::kBackward, 3, 5), event(1, Op::kForward, 4, 5)};
  const Gantt g = gantt_from_timeline(t, 100);
  ASSERT_EQ(g.rows.size(), 3u);  // dev 0 compute, dev 0 send, dev 1 compute
  EXPECT_EQ(g.rows[0].label, "dev 0 compute");
  EXPECT_EQ(g.rows[1].label, "dev 0 send");
  EXPECT_EQ(g.rows[2].label, "dev 1 compute");
  EXPECT_EQ(g.rows[2].device, "gpu1");
  EXPECT_DOUBLE_EQ(g.end_s, 5);
  // The send [1, 4] overlaps dev 0's compute on [1, 2] and [3, 4]: 2 of 3 seconds.
  ASSERT_EQ(g.overlaps.size(), 2u);
  EXPECT_DOUBLE_EQ(g.overlaps[0].start_s, 1);
  EXPECT_DOUBLE_EQ(g.overlaps[0].end_s, 2);
  EXPECT_DOUBLE_EQ(g.overlaps[1].start_s, 3);
  EXPECT_DOUBLE_EQ(g.overlaps[1].end_s, 4);
  EXPECT_DOUBLE_EQ(g.overlap_fraction, 2.0 / 3);
  // Bubbles: dev 0 idles [2, 3]; dev 1 idles [0, 4]. 5 of 10 compute-row seconds.
  ASSERT_EQ(g.bubbles.size(), 2u);
  EXPECT_EQ(g.bubbles[0].row, 0);
  EXPECT_DOUBLE_EQ(g.bubbles[0].start_s, 2);
  EXPECT_DOUBLE_EQ(g.bubbles[0].end_s, 3);
  EXPECT_EQ(g.bubbles[1].row, 2);
  EXPECT_DOUBLE_EQ(g.bubbles[1].end_s, 4);
  EXPECT_DOUBLE_EQ(g.idle_fraction, 0.5);
}

TEST(Gantt, CutKeepsWholeStepsFromTheFirst) {
  const auto r = simulate("1f1b", 2, 4, "", 4);
  std::map<int, size_t> per_step;
  for (const auto& e : r.timeline.events) ++per_step[e.action.step];
  ASSERT_EQ(per_step.size(), 4u);
  const size_t two_steps = per_step[0] + per_step[1];
  const Gantt g = gantt_from_timeline(r.timeline, two_steps + 1);
  EXPECT_EQ(g.total_events, r.timeline.events.size());
  EXPECT_EQ(g.events.size(), two_steps);
  EXPECT_EQ(g.shown_steps, 2);
  EXPECT_EQ(g.total_steps, 4);
  for (const auto& e : g.events) EXPECT_LE(e.step, 1);
  // A budget below one step still shows the first step whole.
  const Gantt one = gantt_from_timeline(r.timeline, 1);
  EXPECT_EQ(one.events.size(), per_step[0]);
  EXPECT_EQ(one.shown_steps, 1);
  // The JSON for the page has one array per drawn event, and the axis reaches the pair's end.
  const Json j = gantt_to_json(g, 1.0);
  EXPECT_EQ(j["events"].size(), two_steps);
  EXPECT_DOUBLE_EQ(j["scale_end_us"].get<double>(), 1e6);
  EXPECT_EQ(j["total_events"].get<size_t>(), r.timeline.events.size());
}

Gantt foreign(const std::string& text, size_t max_events = 100) {
  const Json doc = parse_json_text(text, "trace.json");
  return gantt_from_chrome_trace(JsonView(doc, "trace.json"), max_events);
}

TEST(Gantt, ForeignChromeTrace) {
  const Gantt g = foreign(R"({"traceEvents": [
    {"ph": "M", "pid": "host", "name": "process_name", "args": {"name": "GPU 0"}},
    {"ph": "M", "pid": "host", "tid": 7, "name": "thread_name", "args": {"name": "compute stream"}},
    {"ph": "M", "pid": "host", "tid": 8, "name": "thread_name", "args": {"name": "nccl send"}},
    {"ph": "X", "pid": "host", "tid": 7, "ts": 1000, "dur": 40, "name": "fwd", "cat": "forward",
     "args": {"mb": 3}},
    {"ph": "X", "pid": "host", "tid": 8, "ts": 1020, "dur": 40, "name": "send act"},
    {"ph": "i", "pid": "host", "tid": 7, "ts": 1500, "name": "marker"},
    {"ph": "X", "pid": "host", "tid": 7, "ts": 1080, "dur": 20, "name": "bwd"}]})");
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.rows[0].role, RowRole::kCompute);
  EXPECT_EQ(g.rows[1].role, RowRole::kComm);
  EXPECT_EQ(g.rows[0].device, "GPU 0");
  EXPECT_EQ(g.rows[0].label, "host compute stream");
  ASSERT_EQ(g.events.size(), 3u);
  EXPECT_DOUBLE_EQ(g.events[0].start_s, 0);  // time starts at the first event
  EXPECT_EQ(g.events[0].kind, "forward");
  EXPECT_EQ(g.events[0].micro_batch, 3);
  EXPECT_EQ(g.events[1].kind, "send act");  // no category: the name is the kind
  EXPECT_NEAR(g.end_s, 100e-6, 1e-15);
  // The send [20, 60] us overlaps compute on [20, 40]: half of it.
  EXPECT_NEAR(g.overlap_fraction, 0.5, 1e-12);
  // Compute idles [40, 80] us of [0, 100].
  EXPECT_NEAR(g.idle_fraction, 0.4, 1e-12);
}

TEST(Gantt, ForeignTraceWithoutThreadNamesShadesEveryRow) {
  const Gantt g = foreign(R"([
    {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "a"},
    {"ph": "X", "pid": 1, "tid": 2, "ts": 5, "dur": 10, "name": "b"},
    {"ph": "X", "pid": 1, "tid": 1, "ts": 12, "dur": 3, "name": "a"}])",
                          2);
  ASSERT_EQ(g.rows.size(), 2u);
  EXPECT_EQ(g.rows[0].role, RowRole::kCompute);
  EXPECT_EQ(g.rows[1].role, RowRole::kCompute);
  EXPECT_NE(g.rows[0].group, g.rows[1].group);
  EXPECT_EQ(g.total_events, 3u);
  EXPECT_EQ(g.events.size(), 2u);  // the earliest two
  EXPECT_DOUBLE_EQ(g.overlap_fraction, 0);
}

TEST(Gantt, ForeignTraceErrors) {
  EXPECT_NE(test::input_error([] {
              foreign(R"({"traceEvents": []})");
            }).find("no complete (\"X\") events"),
            std::string::npos);
  EXPECT_NE(test::input_error([] {
              foreign(R"({"traceEvents": [{"ph": "X", "pid": 0, "ts": "soon", "dur": 1}]})");
            }).find("traceEvents[0].ts"),
            std::string::npos);
  EXPECT_NE(test::input_error([] {
              foreign(R"({"traceEvents": [{"ph": "X", "pid": 0, "ts": 0, "dur": -5}]})");
            }).find("traceEvents[0].dur"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin::report
