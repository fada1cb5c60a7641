// import-trace of traces recorded without pipetwin's helper (profiles/trace_import/plain.hpp,
// backward_order.hpp): torch 2.x's module ranges (tests/data/traces/make_torch2_fixture.py writes
// them as torch 2.x does, its durations chosen by hand), and the legacy profiler's export (no
// categories, no args) made from the hand-made cpu-skip fixture (make_fixtures.py), whose figures
// trace_import_test.cpp works out. Real recordings: trace_import_recipe_test.cpp.
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/trace_import/backward_order.hpp"
#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"

namespace pipetwin::trace_import {
namespace {

using ::testing::HasSubstr;

constexpr double us = 1e-6;

Json fixture(const std::string& name) {
  return load_json_file(test::source_dir() + "/tests/data/traces/" + name);
}

ImportResult import_doc(const Json& doc, const std::string& layers = "",
                        std::vector<int> micro_batches = {}, bool loss_to_last = true) {
  ImportOptions o;
  o.layers = LayerSelection::parse(layers);
  o.micro_batches = std::move(micro_batches);
  o.loss_to_last_layer = loss_to_last;
  return import_traces({parse_kineto_trace(doc, "plain.json")}, o);
}

std::string import_error(const Json& doc, const std::string& layers = "",
                         std::vector<int> micro_batches = {}) {
  return test::input_error([&] { (void)import_doc(doc, layers, micro_batches); });
}

double part(const TraceReport& r, const std::string& name) {
  for (const auto& [n, v] : r.unattributed_parts) {
    if (n == name) return v;
  }
  return -1;
}

// torch2-modules / torch2-steps: nn.Sequential(Linear(4, 8), ReLU, Linear(8, 8), ReLU,
// Linear(8, 2)) at micro-batch 4; per measured step (us):
//   forward   aten::linear / aten::relu: Linear_0 20/22/21 -> 21, ReLU_0 4/4/5 -> 4,
//             Linear_1 30/32/31 -> 31, ReLU_1 5/5/4 -> 5, Linear_2 12/13/12 + the loss
//             (cross_entropy_loss 10/11/10 + ones_like 3/3/4) = 25/27/26 -> 26
//   backward  Linear_0 Addmm 22/24/23 + T 2 + AccumulateGrad 2 x 1 -> 27; ReLU_0 4/4/5 -> 4;
//             Linear_1 40/42/44 + 4 -> 46; ReLU_1 5/6/5 -> 5; Linear_2 14/15/14 + 4 + NllLoss
//             4/4/5 + LogSoftmax 3 = 25/26/26 -> 26
//   optimizer aten::_foreach_add_ 16/18/17 -> 17 us, split by the parameter bytes the shapes give
//             (160 : 0 : 288 : 0 : 72)
//   step      400 us from one optimizer range's end to the next (torch2-steps: the
//             ProfilerStep#<n> ranges, 398 us); unattributed 400 - (84 + 104 + 16) = 196,
//             400 - (90 + 110 + 18) = 182, 400 - (87 + 111 + 17) = 185 -> 185 (398: 183), all of it
//             Python between the operators (zero_grad holds none: set_to_none).
void expect_torch2_profile(const ImportResult& r, double step_us, double unattributed_us) {
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 5);
  const char* names[] = {"Linear_0", "ReLU_0", "Linear_1", "ReLU_1", "Linear_2"};
  const char* kinds[] = {"linear", "relu", "linear", "relu", "linear"};
  const double fwd[] = {21, 4, 31, 5, 26}, bwd[] = {27, 4, 46, 5, 26};
  const double params[] = {160, 0, 288, 0, 72}, out[] = {32, 32, 32, 32, 8};
  for (size_t l = 0; l < 5; ++l) {
    const LayerProfile& x = p.layers[l];
    EXPECT_EQ(x.name, names[l]);
    EXPECT_EQ(x.kind, kinds[l]);
    ASSERT_EQ(x.timings.size(), 1u);
    EXPECT_EQ(x.timings[0].micro_batch, 4);  // the leading dimension of Linear_0's input
    EXPECT_NEAR(x.timings[0].forward_s, fwd[l] * us, 1e-9) << names[l];
    EXPECT_NEAR(x.timings[0].backward_s, bwd[l] * us, 1e-9) << names[l];
    EXPECT_NEAR(x.optimizer_step_s, 17 * us * params[l] / 520, 1e-12) << names[l];
    EXPECT_DOUBLE_EQ(x.param_bytes, params[l]) << names[l];
    EXPECT_DOUBLE_EQ(x.output_bytes_per_sample, out[l]) << names[l];
  }
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 16);
  EXPECT_EQ(p.optimizer, "sgd");  // from "Optimizer.step#SGD.step"
  const TraceReport& t = r.traces[0];
  EXPECT_EQ(t.measured_steps, 3);
  EXPECT_EQ(t.all_steps, 4);
  EXPECT_EQ(t.backward_ops, 3 * 16);
  EXPECT_EQ(t.backward_attributed, 3 * 16);
  EXPECT_NEAR(t.step_s, step_us * us, 1e-9);
  EXPECT_NEAR(t.unattributed_s, unattributed_us * us, 1e-9);
  // Every unattributed microsecond is between operators: none of another step's events is
  // counted in this one's, though a ProfilerStep range opens inside the previous step's frames.
  EXPECT_NEAR(part(t, "(between operators: Python, the profiler)"), unattributed_us * us, 1e-9);
  EXPECT_EQ(t.unattributed_parts.size(), 1u);
  EXPECT_THAT(p.notes, HasSubstr("layers: the model's child modules, from the nn.Module ranges"));
  EXPECT_THAT(p.notes, HasSubstr("backward: autograd ops by sequence number"));
  const Json j = profile_to_json(p);
  EXPECT_NO_THROW(profile_from_json(JsonView(j, "imported")));
}

TEST(TraceImportPlain, TorchTwoModuleRangesStepsFromTheOptimizer) {
  const ImportResult r = import_doc(fixture("torch2-modules.trace.json"));
  expect_torch2_profile(r, 400, 185);
  EXPECT_THAT(r.profile.notes,
              HasSubstr("steps: from the end of one \"Optimizer.step#SGD.step\" range to the end "
                        "of the next"));
  EXPECT_THAT(r.profile.notes, HasSubstr("optimizer step: the \"Optimizer.step#SGD.step\" ranges"));
  // --layers N states how many there must be.
  EXPECT_EQ(import_doc(fixture("torch2-modules.trace.json"), "5").profile.num_layers(), 5);
  EXPECT_THAT(import_error(fixture("torch2-modules.trace.json"), "4"),
              HasSubstr("plain.json: --layers 4: the trace's layer ranges give 5 layers "
                        "(Linear_0, ReLU_0, Linear_1, ReLU_1, Linear_2)"));
}

// A ProfilerStep#<n> range opens inside the Python frame of the prof.step() that closes the one
// before, so the next step's events nest under this one's frames: with the loss left unattributed
// (--loss unattributed), each step names its own loss, not the next step's too. Per step: the
// loss's cross_entropy_loss 10/11/10 -> 10, ones_like 3/3/4 -> 3, NllLossBackward0 4/4/5 -> 4,
// LogSoftmaxBackward0 3; unattributed 398 - (71 + 97 + 16) = 214, 398 - (76 + 103 + 18) = 201,
// 398 - (73 + 103 + 17) = 205 -> 205.
TEST(TraceImportPlain, TorchTwoProfilerStepRanges) {
  const ImportResult r = import_doc(fixture("torch2-steps.trace.json"));
  expect_torch2_profile(r, 398, 183);
  EXPECT_THAT(r.profile.notes, HasSubstr("steps: torch.profiler's ProfilerStep#<n> ranges"));
  const TraceReport t = import_doc(fixture("torch2-steps.trace.json"), "", {}, false).traces[0];
  EXPECT_NEAR(t.unattributed_s, 205 * us, 1e-9);
  EXPECT_NEAR(part(t, "aten::cross_entropy_loss"), 10 * us, 1e-9);
  EXPECT_NEAR(part(t, "aten::ones_like"), 3 * us, 1e-9);
  EXPECT_NEAR(part(t, "NllLossBackward0"), 4 * us, 1e-9);
  EXPECT_NEAR(part(t, "LogSoftmaxBackward0"), 3 * us, 1e-9);
  EXPECT_NEAR(part(t, "(between operators: Python, the profiler)"), 183 * us, 1e-9);
}

// Whole-microsecond timestamps put a last child of no duration at its parent's end (aten::fill_
// in aten::ones_like, Debian's torch 1.13): it is inside the parent.
TEST(TraceImportPlain, ZeroDurationEventAtItsParentsEndIsInside) {
  const Json doc = Json::parse(R"([
      {"ph": "X", "name": "aten::ones_like", "ts": 10, "dur": 5, "tid": 1},
      {"ph": "X", "name": "aten::empty_like", "ts": 11, "dur": 3, "tid": 1},
      {"ph": "X", "name": "aten::fill_", "ts": 15, "dur": 0, "tid": 1},
      {"ph": "X", "name": "aten::add", "ts": 16, "dur": 2, "tid": 1}])");
  const KinetoTrace t = parse_kineto_trace(doc, "t.json");
  std::map<std::string, std::string> parent;
  for (const auto& e : t.events)
    parent[e.name] = e.parent >= 0 ? t.events[size_t(e.parent)].name : "";
  EXPECT_EQ(parent["aten::empty_like"], "aten::ones_like");
  EXPECT_EQ(parent["aten::fill_"], "aten::ones_like");
  EXPECT_EQ(parent["aten::add"], "");
}

// The module ranges' depths come from the Python call tree ("Python id", "Python parent id"):
// the model and the loss module are roots of it, the model's children one below.
TEST(TraceImportPlain, ModuleDepthFollowsThePythonCallTree) {
  const KinetoTrace t = parse_kineto_trace(fixture("torch2-modules.trace.json"), "t.json");
  std::map<std::string, int> depth;
  for (const auto& e : t.events) {
    if (e.module_depth > 0) depth[e.name] = e.module_depth;
  }
  EXPECT_EQ(depth["nn.Module: Sequential_0"], 1);
  EXPECT_EQ(depth["nn.Module: CrossEntropyLoss_0"], 1);
  EXPECT_EQ(depth["nn.Module: Linear_2"], 2);
  EXPECT_EQ(depth["nn.Module: ReLU_1"], 2);
  // Parent ids that loop are read without end; ids given twice are no tree.
  const Json loop = Json::parse(R"({"traceEvents": [
      {"ph": "X", "cat": "python_function", "name": "nn.Module: A_0", "ts": 1, "dur": 9,
       "args": {"Python id": 1, "Python parent id": 2}},
      {"ph": "X", "cat": "python_function", "name": "nn.Module: B_0", "ts": 2, "dur": 5,
       "args": {"Python id": 2, "Python parent id": 1}}]})");
  for (const auto& e : parse_kineto_trace(loop, "loop.json").events) EXPECT_GE(e.module_depth, 1);
  Json twice = loop;
  twice["traceEvents"][1]["args"]["Python id"] = 1;
  for (const auto& e : parse_kineto_trace(twice, "twice.json").events) EXPECT_EQ(e.module_depth, 0);
}

// cpu-skip without its step ranges: each step ends where its optimizer range ends; the layers'
// figures are those of the step ranges (trace_import_test.cpp).
TEST(TraceImportPlain, StepsFromOptimizerRangesKeepTheLayerTimes) {
  Json doc = fixture("cpu-skip.trace.json");
  Json kept = Json::array();
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "").rfind("pipetwin.step:", 0) != 0) kept.push_back(e);
  }
  doc["traceEvents"] = kept;
  const ImportResult r = import_doc(doc, "", {}, false);
  const double fwd[] = {28, 36, 19}, bwd[] = {40, 62, 31};
  ASSERT_EQ(r.profile.num_layers(), 3);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_NEAR(r.profile.layers[l].timings[0].forward_s, fwd[l] * us, 1e-12);
    EXPECT_NEAR(r.profile.layers[l].timings[0].backward_s, bwd[l] * us, 1e-12);
  }
  EXPECT_EQ(r.traces[0].measured_steps, 3);
  EXPECT_THAT(r.profile.notes, HasSubstr("steps: from the end of one"));
  // The helper's "pipetwin.optimizer" ranges stand: no optimizer note.
  EXPECT_THAT(r.profile.notes, ::testing::Not(HasSubstr("optimizer step: the \"Optimizer")));
}

// cpu-skip without sequence numbers: the nodes matched by order go to the same layers.
TEST(TraceImportPlain, BackwardByOrderEqualsBackwardBySequenceNumber) {
  Json doc = fixture("cpu-skip.trace.json");
  for (auto& e : doc["traceEvents"]) {
    if (!e.contains("args")) continue;
    e["args"].erase("Sequence number");
    e["args"].erase("Fwd thread id");
  }
  for (bool loss_to_last : {false, true}) {
    const ImportResult by_order = import_doc(doc, "", {}, loss_to_last);
    const ImportResult by_number = import_doc(fixture("cpu-skip.trace.json"), "", {}, loss_to_last);
    for (size_t l = 0; l < 3; ++l) {
      EXPECT_DOUBLE_EQ(by_order.profile.layers[l].timings[0].backward_s,
                       by_number.profile.layers[l].timings[0].backward_s)
          << l;
    }
    EXPECT_EQ(by_order.traces[0].backward_attributed, by_number.traces[0].backward_attributed);
    EXPECT_THAT(by_order.profile.notes,
                HasSubstr("backward: autograd nodes matched by name and order"));
  }
}

TEST(TraceImportPlain, NodeAndOperatorNamesMatch) {
  EXPECT_EQ(node_key("AddmmBackward0"), operator_key("aten::addmm"));
  EXPECT_EQ(node_key("NllLossBackward0"), operator_key("aten::nll_loss_forward"));
  EXPECT_EQ(node_key("LogSoftmaxBackward0"), operator_key("aten::_log_softmax"));
  EXPECT_EQ(node_key("MaxPool2DWithIndicesBackward0"),
            operator_key("aten::max_pool2d_with_indices"));
  EXPECT_EQ(node_key("AddBackward1"), operator_key("aten::add_"));
  EXPECT_EQ(node_key("torch::autograd::AccumulateGrad"), "accumulategrad");
  EXPECT_NE(node_key("TBackward0"), operator_key("aten::transpose"));
}

// cpu-skip as the legacy profiler exports it (plain_recipe.py's trace on Debian's torch 1.13): a
// bare array of names, times and threads, no categories, no args; no pipetwin ranges, no metadata.
Json legacy_export() {
  const Json doc = fixture("cpu-skip.trace.json");
  Json out = Json::array();
  for (const auto& e : doc["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (e.value("ph", "") != "X" || name.rfind("pipetwin.", 0) == 0 ||
        e.value("cat", "") == "Trace")
      continue;
    out.push_back({{"name", name},
                   {"ph", "X"},
                   {"ts", e["ts"]},
                   {"dur", e["dur"]},
                   {"tid", e["tid"]},
                   {"pid", "CPU functions"},
                   {"args", Json::object()}});
  }
  return out;
}

// --layers 6: each step's first six forward operators, after the zero_grad range (cpu-skip per
// measured step, us): aten::linear 22/26/24 -> 24 (embed's range less its ReLU and gaps),
// aten::relu 4, aten::linear 32/32/36 -> 32, aten::relu 4, aten::add 5, aten::linear 18/20/19 +
// the loss 18 -> 37. Backward by order: embed's Addmm + T + AccumulateGrad 36/36/40 -> 36, ReLU 4,
// block's 56/60/58 -> 58, ReLU 4, AddBackward0 3, head's 30/32/31 + the loss's 9 -> 40. The
// optimizer (aten::add_ 6 x 0.5 = 3 us) split by AccumulateGrad time (3 : 0 : 3 : 0 : 0 : 3).
TEST(TraceImportPlain, LegacyExportLayersByCount) {
  const ImportResult r = import_doc(legacy_export(), "6", {4});
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 6);
  const char* names[] = {"linear_0", "relu_0", "linear_1", "relu_1", "add_0", "linear_2"};
  const double fwd[] = {24, 4, 32, 4, 5, 37}, bwd[] = {36, 4, 58, 4, 3, 40};
  const double opt[] = {1, 0, 1, 0, 0, 1};
  for (size_t l = 0; l < 6; ++l) {
    EXPECT_EQ(p.layers[l].name, names[l]);
    EXPECT_EQ(p.layers[l].kind, std::string(names[l]).substr(0, std::string(names[l]).find('_')));
    EXPECT_NEAR(p.layers[l].timings[0].forward_s, fwd[l] * us, 1e-12) << names[l];
    EXPECT_NEAR(p.layers[l].timings[0].backward_s, bwd[l] * us, 1e-12) << names[l];
    EXPECT_NEAR(p.layers[l].optimizer_step_s, opt[l] * us, 1e-12) << names[l];
    EXPECT_DOUBLE_EQ(p.layers[l].param_bytes, 0);
  }
  EXPECT_EQ(p.optimizer, "sgd");
  EXPECT_EQ(r.traces[0].backward_attributed, r.traces[0].backward_ops);
  EXPECT_THAT(p.notes, HasSubstr("layers: the first 6 forward operators of each step"));
  EXPECT_THAT(p.notes, HasSubstr("bytes: none recorded"));
  EXPECT_THAT(p.notes, HasSubstr("split over layers by their AccumulateGrad time"));
  EXPECT_THAT(import_error(legacy_export(), "9", {4}),
              HasSubstr("plain.json: --layers 9: step 2 runs 8 forward operators before its "
                        "backward (aten::linear, aten::relu, aten::linear, aten::relu, aten::add, "
                        "aten::linear, ...), fewer than 9"));
  EXPECT_THAT(import_error(legacy_export(), "", {4}),
              HasSubstr("plain.json: no \"pipetwin.layer:<name>\" or \"nn.Module: \" range"));
  Json differs = legacy_export();  // the third step's ReLU is another operator
  int relu = 0;
  for (auto& e : differs) {
    if (e["name"] == "aten::relu" && ++relu == 5) e["name"] = "aten::gelu";
  }
  EXPECT_THAT(import_error(differs, "6", {4}),
              HasSubstr("--layers 6: forward operator 2 is aten::gelu in step 3 but aten::relu in "
                        "step 2: the steps run different operators"));
}

// The metadata python/pipetwin_trace.py's annotate() adds: the layers are its children, found by
// the forward's operators, with the figures of the helper's own layer ranges.
TEST(TraceImportPlain, LegacyExportLayersFromMetadata) {
  Json doc = {{"traceEvents", legacy_export()},
              {"pipetwin", fixture("cpu-skip.trace.json")["pipetwin"]}};
  doc["pipetwin"]["forward_ops"] = Json::parse(
      R"([["aten::linear", "embed"], ["aten::relu", "embed"], ["aten::linear", "block"],
          ["aten::relu", "block"], ["aten::add", ""], ["aten::linear", "head"]])");
  const ImportResult r = import_doc(doc, "", {}, false);
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 3);
  const char* names[] = {"embed", "block", "head"};
  const double fwd[] = {28, 36, 19}, bwd[] = {40, 62, 31}, params[] = {160, 288, 72};
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(p.layers[l].name, names[l]);
    EXPECT_NEAR(p.layers[l].timings[0].forward_s, fwd[l] * us, 1e-12) << names[l];
    EXPECT_NEAR(p.layers[l].timings[0].backward_s, bwd[l] * us, 1e-12) << names[l];
    EXPECT_DOUBLE_EQ(p.layers[l].param_bytes, params[l]);
  }
  EXPECT_EQ(p.layers[0].timings[0].micro_batch, 4);  // the metadata's
  EXPECT_EQ(p.edges.size(), 3u);                     // head's skip from embed
  EXPECT_THAT(p.notes, HasSubstr("layers: the model's children in the trace's pipetwin metadata"));
  EXPECT_THAT(p.notes, HasSubstr("bytes: the trace's pipetwin metadata"));

  Json other = doc;  // a forward the trace does not run
  other["pipetwin"]["forward_ops"][1][0] = "aten::gelu";
  EXPECT_THAT(import_error(other),
              HasSubstr("plain.json: pipetwin.forward_ops: the model's forward (6 operators: "
                        "aten::linear, aten::gelu, aten::linear, aten::relu, aten::add, "
                        "aten::linear) is not one run among the forward operators of step 2"));
  other = doc;
  other["pipetwin"]["forward_ops"][0] = {"aten::linear"};
  EXPECT_THAT(import_error(other),
              HasSubstr("pipetwin.forward_ops[0]: expected [operator, layer]"));
  other = doc;
  other["pipetwin"]["forward_ops"][0][1] = "stem";
  EXPECT_THAT(import_error(other),
              HasSubstr("pipetwin.forward_ops[0][1]: \"stem\" is not one of the layers"));
}

TEST(TraceImportPlain, LayerCountFlag) {
  EXPECT_EQ(LayerSelection::parse("5").mode, LayerSelection::Mode::kCount);
  EXPECT_EQ(LayerSelection::parse("5").count, 5);
  EXPECT_EQ(LayerSelection::parse("5").to_string(), "5");
  EXPECT_EQ(LayerSelection::parse("pipetwin.layer:5").names[0], "5");
  EXPECT_THAT(test::input_error([] { LayerSelection::parse("0"); }),
              HasSubstr("--layers: a count of layers must be a whole number from 1 to 99999 "
                        "(\"0\" given)"));
}

}  // namespace
}  // namespace pipetwin::trace_import
