// import-trace on bad input: every broken, truncated, unrelated or inconsistent trace is refused
// with one line that names the file and what is wrong or missing (core/error.hpp).
#include <gtest/gtest.h>

#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"

namespace pipetwin::trace_import {
namespace {

using test::input_error;

Json fixture() {
  return load_json_file(test::source_dir() + "/tests/data/traces/cpu-skip.trace.json");
}

// The error of importing `text` as the trace file "bad.json".
std::string text_error(const std::string& text, ImportOptions o = {}) {
  return input_error([&] {
    const Json doc = parse_json_text(text, "bad.json");
    (void)import_traces({parse_kineto_trace(doc, "bad.json")}, o);
  });
}

std::string doc_error(const Json& doc, ImportOptions o = {}) {
  return input_error([&] { (void)import_traces({parse_kineto_trace(doc, "bad.json")}, o); });
}

// One line, naming the file (or the flag), saying `want`.
void expect_error(const std::string& message, const std::string& want,
                  const std::string& prefix = "bad.json: ") {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
  EXPECT_NE(message.find(want), std::string::npos) << message << "\n  wanted: " << want;
}

TEST(TraceImportErrors, NotATraceFile) {
  expect_error(text_error("this is not JSON"), "bad.json:1:", "bad.json:");
  const std::string whole = fixture().dump();
  expect_error(text_error(whole.substr(0, whole.size() / 2)), "not valid JSON", "bad.json:");
  expect_error(text_error("\"hello\""), "expected a Chrome trace");
  expect_error(text_error(R"({"format": "pipetwin.profile", "version": 1, "layers": []})"),
               "traceEvents: missing required field: not a PyTorch profiler");
  expect_error(text_error(R"({"traceEvents": {}})"), "traceEvents: expected an array of events");
  expect_error(text_error(R"({"traceEvents": []})"), "traceEvents: no events");
  expect_error(text_error(R"({"traceEvents": [{"ph": "M", "name": "process_name"}]})"),
               "none of the 1 events is a complete");
  expect_error(text_error(R"({"traceEvents": [], "pipetwin": 3})"),
               "pipetwin: expected an object, got 3");
}

TEST(TraceImportErrors, BadEvents) {
  expect_error(text_error(R"({"traceEvents": [5]})"),
               "traceEvents[0]: expected an event object, got 5");
  expect_error(text_error(R"({"traceEvents": [{"name": "a", "ts": 1, "dur": 1}]})"),
               "traceEvents[0].ph: missing required field");
  expect_error(text_error(R"([{"ph": "X", "name": "a", "dur": 1}])"),
               "[0].ts: missing required field");
  expect_error(text_error(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -3}]})"),
               "traceEvents[0].dur: expected a non-negative number, got -3");
  expect_error(text_error(R"({"traceEvents": [{"ph": "X", "name": 7, "ts": 1, "dur": 3}]})"),
               "traceEvents[0].name: expected a string, got 7");
  expect_error(
      text_error(
          R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 3, "args": {"Sequence number": "abc"}}]})"),
      "traceEvents[0].args.Sequence number: expected an integer, got \"abc\"");
  expect_error(
      text_error(
          R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 3, "args": {"Input Dims": 4}}]})"),
      "traceEvents[0].args.Input Dims: expected an array of shapes, got 4");
}

// Every event of `doc` whose name starts with `prefix` removed.
Json without(Json doc, const std::string& prefix) {
  Json kept = Json::array();
  for (const auto& e : doc["traceEvents"]) {
    if (!e.contains("name") || e["name"].get<std::string>().rfind(prefix, 0) != 0)
      kept.push_back(e);
  }
  doc["traceEvents"] = kept;
  return doc;
}

TEST(TraceImportErrors, MissingStructure) {
  // Without step ranges the optimizer's ranges end the steps (plain.hpp); without those too:
  expect_error(doc_error(without(without(fixture(), "pipetwin.step:"), "Optimizer.step#")),
               "no training step: no \"pipetwin.step:<i>\", \"ProfilerStep#<n>\" or "
               "\"Optimizer.step#...\" range: call prof.step() after each step");
  Json one = fixture();
  for (const char* s : {"pipetwin.step:1", "pipetwin.step:2", "pipetwin.step:3"})
    one = without(one, s);
  expect_error(doc_error(one), "only 1 \"pipetwin.step:\" range; at least 2 are needed");
  Json one_optimizer = without(fixture(), "pipetwin.step:");
  Json kept = Json::array();
  int optimizers = 0;
  for (const auto& e : one_optimizer["traceEvents"]) {
    if (e.value("name", "") != "Optimizer.step#SGD.step" || optimizers++ == 0) kept.push_back(e);
  }
  one_optimizer["traceEvents"] = kept;
  expect_error(doc_error(one_optimizer),
               "only 1 training step (\"Optimizer.step#SGD.step\" ranges with backward ops "
               "between them); at least 2 are needed");
  expect_error(doc_error(without(fixture(), "pipetwin.layer:")),
               "no \"pipetwin.layer:<name>\" or \"nn.Module: \" range and no pipetwin metadata "
               "that names the layers: give --layers N");
  expect_error(doc_error(without(fixture(), "autograd::engine::evaluate_function")),
               "no autograd backward op");
  // The legacy profiler's export: no args at all, hence no shapes (and no sequence numbers: the
  // backward is matched by order, trace_import_plain_test.cpp).
  Json legacy = fixture()["traceEvents"];
  for (auto& e : legacy) e["args"] = Json::object();
  expect_error(doc_error(legacy),
               "no micro-batch size: no \"pipetwin\" metadata and no recorded input shape of "
               "layer \"embed\" (the trace records no shapes at all: the legacy profiler's "
               "export writes none); give --micro-batch");
  Json partial = fixture();  // block runs in the first two measured steps only
  bool seen = false;
  for (auto& e : partial["traceEvents"]) {
    if (e["name"] == "pipetwin.layer:block" && e["ts"].get<double>() > 1.7e12 + 3000)
      e["name"] = "something else", seen = true;
  }
  ASSERT_TRUE(seen);
  expect_error(doc_error(partial), "layer \"block\" runs in 2 of the 3 measured steps");
}

TEST(TraceImportErrors, LayerSelection) {
  ImportOptions o;
  o.layers = LayerSelection::parse("embed,fc9");
  expect_error(doc_error(fixture(), o),
               "--layers: no range named \"fc9\" or \"pipetwin.layer:fc9\"");
  o.layers = LayerSelection::parse("depth=2");
  expect_error(doc_error(fixture(), o), "--layers depth=2: no \"pipetwin.layer:\" range is nested");
  expect_error(input_error([] { LayerSelection::parse("depth=0"); }),
               "--layers: depth must be a whole number of at least 1 (\"0\" given)", "--layers");
  expect_error(input_error([] { LayerSelection::parse("a,,b"); }),
               "--layers: empty layer name in \"a,,b\"", "--layers");
  expect_error(input_error([] { LayerSelection::parse("a,b,a"); }), "layer \"a\" named twice",
               "--layers");
  // Nested selected ranges would count time twice.
  Json nested = fixture();
  for (auto& e : nested["traceEvents"]) {
    if (e["name"] == "aten::linear") e["name"] = "inner";
  }
  o.layers = LayerSelection::parse("embed,inner");
  expect_error(doc_error(nested, o), "layer \"inner\" runs inside layer \"embed\"");
}

TEST(TraceImportErrors, MicroBatchesAndTracesDisagree) {
  ImportOptions o;
  o.micro_batches = {8};
  expect_error(doc_error(fixture(), o),
               "pipetwin.micro_batch: the trace was recorded at micro-batch size 4, but "
               "--micro-batch gives 8 for it");
  o.micro_batches = {4, 8};
  expect_error(doc_error(fixture(), o), "--micro-batch: 2 sizes for 1 trace files",
               "--micro-batch");
  const Json doc = fixture();
  expect_error(input_error([&] {
                 (void)import_traces(
                     {parse_kineto_trace(doc, "a.json"), parse_kineto_trace(doc, "bad.json")}, {});
               }),
               "micro-batch size 4 already given by a.json");
  Json other = fixture();
  other["pipetwin"]["micro_batch"] = 8;
  for (auto& e : other["traceEvents"]) {
    if (e["name"] == "pipetwin.layer:block") e["name"] = "pipetwin.layer:middle";
  }
  expect_error(input_error([&] {
                 (void)import_traces(
                     {parse_kineto_trace(doc, "a.json"), parse_kineto_trace(other, "bad.json")},
                     {});
               }),
               "layer 1 is \"middle\", but in a.json it is \"block\"");
  Json bare = fixture();  // no metadata and no shapes: nothing says the micro-batch size
  bare.erase("pipetwin");
  for (auto& e : bare["traceEvents"]) {
    if (e.contains("args")) e["args"].erase("Input Dims");
  }
  expect_error(doc_error(bare), "no micro-batch size: no \"pipetwin\" metadata");
}

TEST(TraceImportErrors, BadMetadata) {
  Json doc = fixture();
  doc["pipetwin"]["layers"][1]["param_bytes"] = "x";
  expect_error(doc_error(doc),
               "pipetwin.layers[1].param_bytes: expected a non-negative number, got \"x\"");
  doc = fixture();
  doc["pipetwin"]["layers"][2]["skip_from"] = {"stem"};
  expect_error(doc_error(doc),
               "pipetwin.layers[2].skip_from[0]: \"stem\" is not one of the layers");
  doc = fixture();
  doc["pipetwin"]["layers"][0]["skip_from"] = {"head"};
  expect_error(doc_error(doc), "a skip must come from an earlier layer");
  doc = fixture();
  doc["pipetwin"]["micro_batch"] = 0;
  expect_error(doc_error(doc), "pipetwin.micro_batch: must be at least 1 (0 given)");
  doc = fixture();
  doc["pipetwin"]["dtype"] = "float8";
  expect_error(doc_error(doc), "pipetwin.dtype: unknown dtype \"float8\"");
  Json gpu = load_json_file(test::source_dir() + "/tests/data/traces/gpu-two.trace.json");
  gpu["deviceProperties"][0]["name"] = "Mystery Accelerator";
  expect_error(doc_error(gpu),
               "a GPU trace of \"Mystery Accelerator\", which names no catalog "
               "device; give --device");
}

}  // namespace
}  // namespace pipetwin::trace_import
