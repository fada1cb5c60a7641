// import-trace on hand-made Kineto traces (tests/data/traces/make_fixtures.py writes them; its
// durations are chosen so that every figure below can be worked out by hand).
#include <algorithm>
#include <map>
#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"

namespace pipetwin::trace_import {
namespace {

constexpr double us = 1e-6;

Json fixture(const std::string& name) {
  return load_json_file(test::source_dir() + "/tests/data/traces/" + name);
}

// The hand-worked figures below leave the loss unattributed (--loss unattributed); the test
// TheLossGoesToTheLastLayerByDefault works out the default from the same fixtures.
ImportOptions loss_apart() {
  ImportOptions o;
  o.loss_to_last_layer = false;
  return o;
}

ImportResult import_one(const Json& doc, const std::string& origin,
                        ImportOptions o = loss_apart()) {
  return import_traces({parse_kineto_trace(doc, origin)}, o);
}

double part(const TraceReport& r, const std::string& name) {
  for (const auto& [n, v] : r.unattributed_parts) {
    if (n == name) return v;
  }
  return -1;
}

// cpu-skip: measured steps 1..3 of 400 us each (step 0, warm-up, is three times slower).
//   forward   the operators in the layer ranges (the ranges' 30/34/32, 40/40/44 and 20/22/21 us
//             hold 4, 4 and 2 us between their operators): embed 26/30/28 -> 28 us, block
//             36/36/40 -> 36 us, head 18/20/19 -> 19 us
//   backward  embed: ReLU 4 + Addmm 30/30/34 + AccumulateGrad 2 + T 3 + AccumulateGrad 1
//             -> 40/40/44 -> 40 us; block: 4 + 50/54/52 + 6 -> 62 us; head: 24/26/25 + 6 -> 31 us
//   optimizer 50/52/54 -> 52 us, split 160 : 288 : 72 bytes -> 16, 28.8, 7.2 us
//   unattributed per step: 400 - (80 + 130 + 50) = 140, 400 - (86 + 136 + 52) = 126,
//             400 - (87 + 137 + 54) = 122 -> median 126 us, 31.5% of the step; of it zero_grad 4,
//             aten::add 5, cross_entropy_loss 15, ones_like 3, NllLossBackward0 5,
//             LogSoftmaxBackward0 4, AddBackward0 3, and 87 us between operators (10 of them
//             inside the layer ranges).
TEST(TraceImport, HandMadeCpuTraceGivesTheHandComputedProfile) {
  const ImportResult r = import_one(fixture("cpu-skip.trace.json"), "cpu-skip.trace.json");
  const Profile& p = r.profile;
  EXPECT_EQ(p.model, "skipnet");
  EXPECT_EQ(p.device, "cpu-core");
  EXPECT_EQ(p.dtype, "float32");
  EXPECT_EQ(p.optimizer, "sgd");
  EXPECT_EQ(p.source, "measured");
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 16);
  ASSERT_EQ(p.num_layers(), 3);
  const double fwd[] = {28, 36, 19}, bwd[] = {40, 62, 31}, opt[] = {16, 28.8, 7.2};
  const double params[] = {160, 288, 72}, out[] = {32, 32, 8};
  const char* names[] = {"embed", "block", "head"};
  for (size_t l = 0; l < 3; ++l) {
    const LayerProfile& x = p.layers[l];
    EXPECT_EQ(x.name, names[l]);
    EXPECT_EQ(x.kind, "linear");
    ASSERT_EQ(x.timings.size(), 1u);
    EXPECT_EQ(x.timings[0].micro_batch, 4);
    EXPECT_NEAR(x.timings[0].forward_s, fwd[l] * us, 1e-12) << x.name;
    EXPECT_NEAR(x.timings[0].backward_s, bwd[l] * us, 1e-12) << x.name;
    EXPECT_NEAR(x.timings[0].recompute_s, fwd[l] * us, 1e-12) << x.name;
    EXPECT_NEAR(x.optimizer_step_s, opt[l] * us, 1e-12) << x.name;
    EXPECT_DOUBLE_EQ(x.param_bytes, params[l]);
    EXPECT_DOUBLE_EQ(x.output_bytes_per_sample, out[l]);
    EXPECT_DOUBLE_EQ(x.saved_bytes_per_sample, out[l]);
    EXPECT_DOUBLE_EQ(x.optimizer_bytes, 0);  // plain SGD keeps no state
  }
  // The chain and the skip from embed to head, each carrying its producer's output.
  ASSERT_EQ(p.edges.size(), 3u);
  const int ends[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(p.edges[e].from, ends[e][0]);
    EXPECT_EQ(p.edges[e].to, ends[e][1]);
    EXPECT_DOUBLE_EQ(p.edges[e].bytes_per_sample, 32);
  }
  ASSERT_EQ(r.traces.size(), 1u);
  const TraceReport& t = r.traces[0];
  EXPECT_EQ(t.measured_steps, 3);
  EXPECT_EQ(t.all_steps, 4);
  EXPECT_FALSE(t.device_time);
  EXPECT_NEAR(t.step_s, 400 * us, 1e-12);
  EXPECT_NEAR(t.unattributed_s, 126 * us, 1e-12);
  EXPECT_NEAR(t.unattributed_share, 0.315, 1e-9);
  EXPECT_EQ(t.backward_ops, 3 * 17);
  EXPECT_EQ(t.backward_attributed, 3 * 14);  // all but the loss's two and the add's
  EXPECT_NEAR(part(t, "aten::cross_entropy_loss"), 15 * us, 1e-12);
  EXPECT_NEAR(part(t, "Optimizer.zero_grad#SGD.zero_grad"), 4 * us, 1e-12);
  EXPECT_NEAR(part(t, "aten::add"), 5 * us, 1e-12);
  EXPECT_NEAR(part(t, "aten::ones_like"), 3 * us, 1e-12);
  EXPECT_NEAR(part(t, "NllLossBackward0"), 5 * us, 1e-12);
  EXPECT_NEAR(part(t, "LogSoftmaxBackward0"), 4 * us, 1e-12);
  EXPECT_NEAR(part(t, "AddBackward0"), 3 * us, 1e-12);
  EXPECT_NEAR(part(t, "(between operators: Python, the profiler)"), 87 * us, 1e-12);
  EXPECT_EQ(t.unattributed_parts.front().first, "(between operators: Python, the profiler)");
  EXPECT_NE(p.notes.find("31.5% at b=4"), std::string::npos) << p.notes;
  EXPECT_NE(p.notes.find("split over layers by parameter bytes"), std::string::npos);
  // The profile is valid as pipetwin reads profiles.
  const Json j = profile_to_json(p);
  EXPECT_NO_THROW(profile_from_json(JsonView(j, "imported")));
}

// Without the metadata the same bytes follow from the recorded shapes: embed reads [4,4] and
// weights [8,4], [8]; block [4,8] and [8,8], [8]; head [4,8] and [2,8], [2]; the loss reads [4,2].
TEST(TraceImport, WithoutMetadataBytesComeFromTheRecordedShapes) {
  Json doc = fixture("cpu-skip.trace.json");
  doc.erase("pipetwin");
  const ImportResult r = import_one(doc, "dir/cpu-skip.trace.json");
  const Profile& p = r.profile;
  EXPECT_EQ(p.model, "cpu-skip");
  EXPECT_EQ(p.optimizer, "");
  EXPECT_EQ(p.layers[0].timings[0].micro_batch, 4);  // the leading dimension of embed's input
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 16);
  const double params[] = {160, 288, 72}, out[] = {32, 32, 8};
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_DOUBLE_EQ(p.layers[l].param_bytes, params[l]) << l;
    EXPECT_DOUBLE_EQ(p.layers[l].output_bytes_per_sample, out[l]) << l;
    EXPECT_DOUBLE_EQ(p.layers[l].saved_bytes_per_sample, out[l]) << l;
    EXPECT_EQ(p.layers[l].kind, "linear");
  }
  EXPECT_TRUE(p.edges.empty());  // no metadata, no skips: a chain
  EXPECT_NEAR(p.layers[1].optimizer_step_s, 28.8 * us, 1e-12);
  EXPECT_NE(p.notes.find("estimated from recorded input shapes"), std::string::npos);
  EXPECT_FALSE(r.traces[0].bytes_from_metadata);
}

// The default, --loss last: what runs after the head's range and before the first backward op
// (cpu-skip: cross_entropy_loss 15, ones_like 3; gpu-two: mse_loss's kernel 3), and the backward
// ops of its operators (NllLossBackward0 5, LogSoftmaxBackward0 4; MseLossBackward0 2), join the
// last layer; the skip's add, which runs before the head, stays unattributed.
TEST(TraceImport, TheLossGoesToTheLastLayerByDefault) {
  const ImportResult r = import_one(fixture("cpu-skip.trace.json"), "c.json", ImportOptions{});
  const LayerTiming& head = r.profile.layers[2].timings[0];
  EXPECT_NEAR(head.forward_s, (19 + 18) * us, 1e-12);                     // per step 36/38/37
  EXPECT_NEAR(head.backward_s, (31 + 9) * us, 1e-12);                     // per step 39/41/40
  EXPECT_NEAR(r.profile.layers[1].timings[0].forward_s, 36 * us, 1e-12);  // unchanged
  const TraceReport& t = r.traces[0];
  EXPECT_EQ(t.backward_attributed, 3 * 16);  // all but the add's
  EXPECT_NEAR(t.loss_s, 18 * us, 1e-12);
  EXPECT_NEAR(t.unattributed_s, 99 * us, 1e-12);  // 113, 99, 95 per step
  EXPECT_NEAR(t.unattributed_share, 99.0 / 400, 1e-9);
  EXPECT_EQ(part(t, "aten::cross_entropy_loss"), -1);
  EXPECT_EQ(part(t, "NllLossBackward0"), -1);
  EXPECT_NEAR(part(t, "aten::add"), 5 * us, 1e-12);
  EXPECT_NEAR(part(t, "AddBackward0"), 3 * us, 1e-12);
  EXPECT_NE(r.profile.notes.find("the loss (forward and backward): in the last layer's times"),
            std::string::npos)
      << r.profile.notes;
  const ImportResult g = import_one(fixture("gpu-two.trace.json"), "g.json", ImportOptions{});
  EXPECT_NEAR(g.profile.layers[1].timings[0].forward_s, (25 + 3) * us, 1e-12);
  EXPECT_NEAR(g.profile.layers[1].timings[0].backward_s, (31 + 2) * us, 1e-12);
  EXPECT_NEAR(g.traces[0].unattributed_s, 4 * us, 1e-12);  // the kernel with no launch record
}

// A node's own event ("TBackward0" inside "evaluate_function: TBackward0") that whole-microsecond
// timestamps put at its wrapper's end, outside it, is still the node's, not a forward operator
// whose sequence number would take the node away from its layer.
TEST(TraceImport, NodeEventsAtTheirWrappersEndStayBackward) {
  Json doc = fixture("cpu-skip.trace.json");
  std::map<double, double> wrapper_end;  // start -> end of "evaluate_function: TBackward0"
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == "autograd::engine::evaluate_function: TBackward0")
      wrapper_end[e["ts"].get<double>()] = e["ts"].get<double>() + e["dur"].get<double>();
  }
  int moved = 0;
  for (auto& e : doc["traceEvents"]) {
    if (e.value("name", "") != "TBackward0") continue;
    const auto it = wrapper_end.find(e["ts"].get<double>());
    ASSERT_NE(it, wrapper_end.end());
    e["ts"] = it->second;
    e["dur"] = 0;
    ++moved;
  }
  ASSERT_EQ(moved, 4 * 3);  // three layers' TBackward0 in each of the four steps
  const ImportResult r = import_one(doc, "moved.json");
  EXPECT_EQ(r.traces[0].backward_attributed, 3 * 14);
  EXPECT_NEAR(r.profile.layers[2].timings[0].backward_s, 31 * us, 1e-12);
}

// A trace of the user's own code recorded with with_stack=True (torch 2.x) has no pipetwin ranges
// but module ranges: "nn.Module: <Class>_<k>" python_function events. Here cpu-skip's layer ranges
// become such ranges under one for the model itself (cat and args as torch 2.x writes them): the
// model's children are the layers, with the same times as the pipetwin ranges give.
TEST(TraceImport, ModuleRangesOfWithStackTracesAreTheLayers) {
  Json doc = fixture("cpu-skip.trace.json");
  doc.erase("pipetwin");
  const std::map<std::string, std::string> module = {{"pipetwin.layer:embed", "Linear_0"},
                                                     {"pipetwin.layer:block", "Sequential_0"},
                                                     {"pipetwin.layer:head", "Linear_1"}};
  Json roots = Json::array();
  for (auto& e : doc["traceEvents"]) {
    const auto it = module.find(e.value("name", ""));
    if (it == module.end()) continue;
    e["name"] = "nn.Module: " + it->second;
    e["cat"] = "python_function";
    e["args"] = {{"Python id", 7}, {"Python parent id", 3}, {"Python thread", 0}};
    if (it->second == "Linear_0") {  // the model's own range, from its first layer's start
      Json root = e;
      root["name"] = "nn.Module: SkipNet_0";
      root["ts"] = e["ts"].get<double>() - 1;
      roots.push_back(root);
    }
  }
  // Each root ends where its step's head range ends.
  std::vector<double> head_ends;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == "nn.Module: Linear_1")
      head_ends.push_back(e["ts"].get<double>() + e["dur"].get<double>());
  }
  std::sort(head_ends.begin(), head_ends.end());
  ASSERT_EQ(roots.size(), head_ends.size());
  for (size_t k = 0; k < roots.size(); ++k) {
    roots[k]["dur"] = head_ends[k] + 1 - roots[k]["ts"].get<double>();
    doc["traceEvents"].push_back(roots[k]);
  }
  const ImportResult r = import_one(doc, "stack.json");
  const char* names[] = {"Linear_0", "Sequential_0", "Linear_1"};
  const double fwd[] = {28, 36, 19}, bwd[] = {40, 62, 31};
  ASSERT_EQ(r.profile.num_layers(), 3);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(r.profile.layers[l].name, names[l]);
    EXPECT_NEAR(r.profile.layers[l].timings[0].forward_s, fwd[l] * us, 1e-12) << names[l];
    EXPECT_NEAR(r.profile.layers[l].timings[0].backward_s, bwd[l] * us, 1e-12) << names[l];
  }
  ImportOptions depth2 = loss_apart();
  depth2.layers = LayerSelection::parse("depth=2");
  EXPECT_THAT(test::input_error([&] { import_one(doc, "stack.json", depth2); }),
              ::testing::HasSubstr("--layers depth=2: no \"nn.Module: \" range is nested that "
                                   "deep (the deepest is 1)"));
}

// gpu-two, per measured step (device time, us): l0's kernel 10/12; l1's 20 by correlation + 5 by
// External id; the loss 3; backward: MseLoss 2, l1 30 + AccumulateGrad 1, l0 15/17; optimizer 8;
// one kernel with no launch record 4. Steps 98 and 102, unattributed 9 of each.
TEST(TraceImport, GpuTraceCountsKernelTimeThroughCorrelationIds) {
  const ImportResult r = import_one(fixture("gpu-two.trace.json"), "gpu-two.trace.json");
  const Profile& p = r.profile;
  EXPECT_EQ(p.device, "h100-sxm");  // from deviceProperties' "NVIDIA H100 80GB HBM3"
  ASSERT_EQ(p.num_layers(), 2);
  EXPECT_NEAR(p.layers[0].timings[0].forward_s, 11 * us, 1e-12);
  EXPECT_NEAR(p.layers[1].timings[0].forward_s, 25 * us, 1e-12);
  EXPECT_NEAR(p.layers[0].timings[0].backward_s, 16 * us, 1e-12);
  EXPECT_NEAR(p.layers[1].timings[0].backward_s, 31 * us, 1e-12);
  EXPECT_NEAR(p.layers[0].optimizer_step_s, 2 * us, 1e-12);
  EXPECT_NEAR(p.layers[1].optimizer_step_s, 6 * us, 1e-12);
  EXPECT_EQ(p.layers[0].timings[0].micro_batch, 2);
  const TraceReport& t = r.traces[0];
  EXPECT_TRUE(t.device_time);
  EXPECT_NEAR(t.step_s, 100 * us, 1e-12);
  EXPECT_NEAR(t.unattributed_s, 9 * us, 1e-12);
  EXPECT_NEAR(t.unattributed_share, (9.0 / 98 + 9.0 / 102) / 2, 1e-12);
  EXPECT_NEAR(part(t, "(device work with no launch record)"), 4 * us, 1e-12);
  EXPECT_NEAR(part(t, "aten::mse_loss"), 3 * us, 1e-12);
  EXPECT_NEAR(part(t, "MseLossBackward0"), 2 * us, 1e-12);
  ImportOptions o = loss_apart();
  o.device = "a100-80gb";  // --device wins over the trace's name
  EXPECT_EQ(import_one(fixture("gpu-two.trace.json"), "g.json", o).profile.device, "a100-80gb");
}

// Every event of `doc` named `from` renamed `to`.
void rename(Json& doc, const std::string& from, const std::string& to) {
  for (auto& e : doc["traceEvents"]) {
    if (e.contains("name") && e["name"] == from) e["name"] = to;
  }
}

TEST(TraceImport, LayersByExplicitNamesAndPlainRanges) {
  ImportOptions o = loss_apart();
  o.layers = LayerSelection::parse("embed,head");
  const ImportResult two = import_one(fixture("cpu-skip.trace.json"), "a.json", o);
  ASSERT_EQ(two.profile.num_layers(), 2);
  EXPECT_EQ(two.profile.layers[1].name, "head");
  EXPECT_NEAR(two.profile.layers[1].timings[0].forward_s, 19 * us, 1e-12);
  // block's forward and backward are now nobody's: per step 140 + 36 + 60, 126 + 36 + 64 and
  // 122 + 40 + 62 us unattributed, median 226.
  EXPECT_NEAR(two.traces[0].unattributed_s, 226 * us, 1e-12);
  EXPECT_TRUE(two.profile.edges.empty());  // head's skip from embed is now its predecessor's edge

  Json plain = fixture("cpu-skip.trace.json");  // the user's own record_function names
  for (const char* n : {"embed", "block", "head"})
    rename(plain, std::string("pipetwin.layer:") + n, n);
  o.layers = LayerSelection::parse("embed,block,head");
  const Profile p = import_one(plain, "b.json", o).profile;
  ASSERT_EQ(p.num_layers(), 3);
  EXPECT_NEAR(p.layers[0].timings[0].backward_s, 40 * us, 1e-12);
  EXPECT_NEAR(p.layers[1].timings[0].forward_s, 36 * us, 1e-12);
  EXPECT_EQ(LayerSelection::parse("pipetwin.layer:a,b").names[0], "a");
  EXPECT_EQ(LayerSelection::parse("depth=2").depth, 2);
  EXPECT_EQ(LayerSelection::parse("").to_string(), "children");
}

// A copy of cpu-skip recorded at another micro-batch size, its times scaled by `k`.
Json scaled(double k, int micro_batch) {
  Json doc = fixture("cpu-skip.trace.json");
  doc["pipetwin"]["micro_batch"] = micro_batch;
  for (auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") e["dur"] = e["dur"].get<double>() * k;
    if (e.contains("ts")) e["ts"] = 1.7e12 + (e["ts"].get<double>() - 1.7e12) * k;
    if (e.contains("args") && e["args"].contains("Input Dims")) {
      for (auto& d : e["args"]["Input Dims"]) {
        if (!d.empty() && d[0] == 4) d[0] = micro_batch;
      }
    }
  }
  return doc;
}

TEST(TraceImport, OneTimingRowPerTraceInMicroBatchOrder) {
  const std::vector<KinetoTrace> traces = {parse_kineto_trace(scaled(2, 8), "b8.json"),
                                           parse_kineto_trace(scaled(1, 4), "b4.json")};
  const ImportResult r = import_traces(traces, loss_apart());
  const LayerProfile& block = r.profile.layers[1];
  ASSERT_EQ(block.timings.size(), 2u);
  EXPECT_EQ(block.timings[0].micro_batch, 4);
  EXPECT_EQ(block.timings[1].micro_batch, 8);
  EXPECT_NEAR(block.timings[0].forward_s, 36 * us, 1e-12);
  EXPECT_NEAR(block.timings[1].forward_s, 72 * us, 1e-12);
  EXPECT_NEAR(block.timings[1].backward_s, 124 * us, 1e-12);
  // The optimizer step is the median over the traces: (28.8 + 57.6) / 2.
  EXPECT_NEAR(block.optimizer_step_s, 43.2 * us, 1e-12);
  ASSERT_EQ(r.traces.size(), 2u);
  EXPECT_EQ(r.traces[0].origin, "b4.json");
  EXPECT_NEAR(r.traces[1].unattributed_share, 0.315, 1e-9);
  EXPECT_NE(r.profile.notes.find("at b=8"), std::string::npos);
}

TEST(TraceImport, PerLayerOptimizerRangesWinOverTheSplit) {
  Json doc = fixture("cpu-skip.trace.json");
  Json added = Json::array();
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "pipetwin.optimizer") continue;
    const double ts = e["ts"].get<double>();
    for (const auto& [layer, at, dur] :
         {std::tuple{"embed", 2.0, 10.0}, {"block", 13.0, 20.0}, {"head", 34.0, 5.0}}) {
      Json r = e;
      r["name"] = std::string("pipetwin.optimizer:") + layer;
      r["ts"] = ts + at;
      r["dur"] = dur;
      added.push_back(r);
      Json op = r;  // the range's operator (torch 2.x: _foreach_add_ over the layer's parameters)
      op["name"] = "aten::_foreach_add_";
      op["cat"] = "cpu_op";
      added.push_back(op);
    }
  }
  for (auto& e : added) doc["traceEvents"].push_back(e);
  const ImportResult r = import_one(doc, "opt.json");
  EXPECT_NEAR(r.profile.layers[0].optimizer_step_s, 10 * us, 1e-12);
  EXPECT_NEAR(r.profile.layers[1].optimizer_step_s, 20 * us, 1e-12);
  EXPECT_NEAR(r.profile.layers[2].optimizer_step_s, 5 * us, 1e-12);
  // The rest of the optimizer range (50/52/54 - 35) is reported, not dropped.
  EXPECT_NEAR(part(r.traces[0], "pipetwin.optimizer (outside per-layer ranges)"), 17 * us, 1e-12);
  EXPECT_NEAR(r.traces[0].unattributed_s, 143 * us, 1e-12);
  EXPECT_NE(r.profile.notes.find("per-layer ranges"), std::string::npos);
  // Ranges of layers not selected do not split: the parameter bytes do (52 us x 160 / 232).
  ImportOptions o = loss_apart();
  o.layers = LayerSelection::parse("embed,head");
  const ImportResult two = import_one(doc, "opt.json", o);
  EXPECT_NEAR(two.profile.layers[0].optimizer_step_s, 52 * us * 160 / 232, 1e-12);
  EXPECT_NE(two.profile.notes.find("its per-layer ranges name other layers"), std::string::npos);
}

// On a CPU trace a range costs the operators it holds, through ranges nested in it: a
// record_function range around all of block's operators leaves block's forward as it was (36 us),
// and the recording helper's page-fault count is reported and noted where it is high.
TEST(TraceImport, CpuRangesCountTheirOperatorsThroughNestedRanges) {
  Json doc = fixture("cpu-skip.trace.json");
  Json inner = Json::array();
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "pipetwin.layer:block") continue;
    Json r = e;  // same start and length: nested in the layer's range (it comes later in the file)
    r["name"] = "the user's own range";
    inner.push_back(r);
  }
  ASSERT_EQ(inner.size(), 4u);
  for (auto& e : inner) doc["traceEvents"].push_back(e);
  doc["pipetwin"]["page_faults_per_step"] = 1200;
  doc["pipetwin"]["unprofiled_step_s"] = 350e-6;
  const ImportResult r = import_one(doc, "nested.json");
  EXPECT_NEAR(r.profile.layers[1].timings[0].forward_s, 36 * us, 1e-12);
  EXPECT_NEAR(r.traces[0].unattributed_s, 126 * us, 1e-12);
  EXPECT_DOUBLE_EQ(r.traces[0].page_faults_per_step, 1200);
  EXPECT_DOUBLE_EQ(r.traces[0].unprofiled_step_s, 350e-6);
  EXPECT_NE(
      r.profile.notes.find("Page faults per profiled step: 1200 at b=4 (the times read high)"),
      std::string::npos)
      << r.profile.notes;
  const ImportResult plain = import_one(fixture("cpu-skip.trace.json"), "plain.json");
  EXPECT_DOUBLE_EQ(plain.traces[0].page_faults_per_step, -1);  // not recorded
  EXPECT_EQ(plain.profile.notes.find("Page faults"), std::string::npos);
  doc["pipetwin"]["page_faults_per_step"] = -3;
  EXPECT_THAT(test::input_error([&] { import_one(doc, "nested.json"); }),
              ::testing::HasSubstr("page_faults_per_step"));
}

TEST(TraceImport, LegacyArrayFormatAndCatalogNames) {
  // The legacy profiler's bare array is read (here with the sequence numbers kept).
  Json doc = fixture("cpu-skip.trace.json");
  const ImportResult r = import_one(doc["traceEvents"], "legacy.json");
  EXPECT_NEAR(r.profile.layers[2].timings[0].backward_s, 31 * us, 1e-12);
  EXPECT_EQ(catalog_device_for("NVIDIA H200"), "h200-sxm");
  EXPECT_EQ(catalog_device_for("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(catalog_device_for("NVIDIA L4"), "l4");
  EXPECT_EQ(catalog_device_for("Some GPU"), "");
  EXPECT_DOUBLE_EQ(element_bytes("c10::BFloat16"), 2);
  EXPECT_DOUBLE_EQ(element_bytes("Scalar"), 0);
}

}  // namespace
}  // namespace pipetwin::trace_import
