// core/profile.hpp: the "pipetwin.profile" v1 format — round trip, defaults, and one error per
// malformed field, naming the file and the field.
#include "core/profile.hpp"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A valid three-layer profile document; tests break one field at a time.
Json valid_doc() {
  return Json::parse(R"({
    "format": "pipetwin.profile", "version": 1,
    "model": "mlp:tiny", "device": "cpu-core", "dtype": "float32", "source": "measured",
    "input_bytes_per_sample": 64,
    "layers": [
      {"name": "in", "kind": "linear", "output_bytes_per_sample": 128, "param_bytes": 1000,
       "timings": [{"micro_batch": 1, "forward_s": 0.001, "backward_s": 0.002},
                   {"micro_batch": 4, "forward_s": 0.003, "backward_s": 0.006}]},
      {"name": "mid", "output_bytes_per_sample": 256, "param_bytes": 2000,
       "saved_bytes_per_sample": 512, "optimizer_bytes": 4000, "optimizer_step_s": 0.0001,
       "timings": [{"micro_batch": 2, "forward_s": 0.004, "backward_s": 0.008,
                    "recompute_s": 0.005}]},
      {"name": "out", "output_bytes_per_sample": 8, "param_bytes": 0,
       "timings": [{"micro_batch": 1, "forward_s": 0, "backward_s": 0}]}
    ]
  })");
}

std::string error_of(const Json& doc) {
  return input_error([&] { profile_from_json(JsonView(doc, "p.json")); });
}

Profile full_profile() {
  Profile p;
  p.model = "uniform:layers=3";
  p.device = "h100-sxm";
  p.dtype = "bfloat16";
  p.source = "analytic";
  p.notes = "hand-made";
  p.input_bytes_per_sample = 3072.5;
  for (int i = 0; i < 3; ++i) {
    LayerProfile l;
    l.name = "block" + std::to_string(i);
    l.kind = i == 1 ? "attention" : "mlp";
    l.timings = {{1, 0.1 + i, 0.2 + i, 0.15 + i, 1.0},
                 {8, 0.7 + i, 1.3 + i, 0.75 + i, 1.25 + i, i == 0 ? 0 : 1.5 + i}};
    if (i != 1) {  // cold-start figures on two layers, one per cold pause
      l.timings[0].cold_forward_s = {0.01 * i, 0.02};
      l.timings[0].cold_backward_s = {0.03, 0.05 + i};
    }
    l.output_bytes_per_sample = 1e6 / 3 + i;
    l.saved_bytes_per_sample = 2e6 + i;
    l.backward_bytes_per_sample = i == 1 ? 3e6 : 0;  // measured on one layer only
    l.forward_workspace_bytes_per_sample = i == 0 ? 5e5 + 1.0 / 3 : 0;
    l.backward_workspace_bytes_per_sample = i == 1 ? 7e5 : 0;
    l.param_bytes = 4096.0 * (i + 1);
    l.optimizer_bytes = 8192.0 * (i + 1);
    l.optimizer_step_s = 1e-5 * (i + 1);
    l.optimizer_new_version_s = i == 2 ? 0 : 1.5e-5 * (i + 1);  // not measured on one layer
    p.layers.push_back(l);
  }
  p.edges = {{0, 1, 10}, {1, 2, 20.25}, {0, 2, 5}};
  p.core_slowdown = {1.0, 1.27};
  p.cold_pauses_s = {0.001, 0.016};
  return p;
}

void expect_same(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.notes, b.notes);
  EXPECT_EQ(a.input_bytes_per_sample, b.input_bytes_per_sample);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const auto& x = a.layers[i];
    const auto& y = b.layers[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    ASSERT_EQ(x.timings.size(), y.timings.size());
    for (size_t j = 0; j < x.timings.size(); ++j) {
      EXPECT_EQ(x.timings[j].micro_batch, y.timings[j].micro_batch);
      EXPECT_EQ(x.timings[j].forward_s, y.timings[j].forward_s);
      EXPECT_EQ(x.timings[j].backward_s, y.timings[j].backward_s);
      EXPECT_EQ(x.timings[j].recompute_s, y.timings[j].recompute_s);
      EXPECT_EQ(x.timings[j].contention, y.timings[j].contention);
      EXPECT_EQ(x.timings[j].contention_backward, y.timings[j].contention_backward);
      EXPECT_EQ(x.timings[j].cold_forward_s, y.timings[j].cold_forward_s);
      EXPECT_EQ(x.timings[j].cold_backward_s, y.timings[j].cold_backward_s);
    }
    EXPECT_EQ(x.output_bytes_per_sample, y.output_bytes_per_sample);
    EXPECT_EQ(x.saved_bytes_per_sample, y.saved_bytes_per_sample);
    EXPECT_EQ(x.backward_bytes_per_sample, y.backward_bytes_per_sample);
    EXPECT_EQ(x.forward_workspace_bytes_per_sample, y.forward_workspace_bytes_per_sample);
    EXPECT_EQ(x.backward_workspace_bytes_per_sample, y.backward_workspace_bytes_per_sample);
    EXPECT_EQ(x.param_bytes, y.param_bytes);
    EXPECT_EQ(x.optimizer_bytes, y.optimizer_bytes);
    EXPECT_EQ(x.optimizer_step_s, y.optimizer_step_s);
    EXPECT_EQ(x.optimizer_new_version_s, y.optimizer_new_version_s);
  }
  EXPECT_EQ(a.core_slowdown, b.core_slowdown);
  EXPECT_EQ(a.cold_pauses_s, b.cold_pauses_s);
  ASSERT_EQ(a.edges.size(), b.edges.size());
  for (size_t i = 0; i < a.edges.size(); ++i) {
    EXPECT_EQ(a.edges[i].from, b.edges[i].from);
    EXPECT_EQ(a.edges[i].to, b.edges[i].to);
    EXPECT_EQ(a.edges[i].bytes_per_sample, b.edges[i].bytes_per_sample);
  }
}

TEST(Profile, JsonRoundTripKeepsEveryField) {
  const Profile p = full_profile();
  const Json doc = profile_to_json(p);
  expect_same(profile_from_json(JsonView(doc, "mem")), p);
}

TEST(Profile, FileRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("profile.json");
  const Profile p = full_profile();
  save_profile(p, path);
  expect_same(load_profile(path), p);
  // Saving what was loaded gives the same bytes: the format is stable.
  const std::string first = test::read_text(path);
  save_profile(load_profile(path), path);
  EXPECT_EQ(test::read_text(path), first);
}

TEST(Profile, DefaultsOfOptionalFields) {
  Json doc = valid_doc();
  doc.erase("dtype");
  doc.erase("source");
  doc.erase("input_bytes_per_sample");
  const Profile p = profile_from_json(JsonView(doc, "p.json"));
  EXPECT_EQ(p.dtype, "float32");
  EXPECT_EQ(p.source, "measured");
  EXPECT_EQ(p.input_bytes_per_sample, 0);
  EXPECT_EQ(p.notes, "");
  ASSERT_EQ(p.num_layers(), 3);
  const auto& in = p.layers[0];
  EXPECT_EQ(in.kind, "linear");
  EXPECT_EQ(p.layers[1].kind, "layer");
  // recompute defaults to forward, saved activations to the output, optimizer terms to 0.
  EXPECT_EQ(in.timings[1].recompute_s, 0.003);
  EXPECT_EQ(in.saved_bytes_per_sample, 128);
  EXPECT_EQ(in.optimizer_bytes, 0);
  EXPECT_EQ(in.optimizer_step_s, 0);
  EXPECT_EQ(in.backward_bytes_per_sample, 0);  // not measured
  EXPECT_EQ(in.forward_workspace_bytes_per_sample, 0);
  EXPECT_EQ(in.backward_workspace_bytes_per_sample, 0);
  EXPECT_EQ(p.layers[1].timings[0].recompute_s, 0.005);
  EXPECT_EQ(p.layers[1].saved_bytes_per_sample, 512);
  EXPECT_TRUE(p.edges.empty());
}

TEST(Profile, EffectiveEdgesOfAChainCarryEachLayersOutput) {
  const Profile p = profile_from_json(JsonView(valid_doc(), "p.json"));
  const auto edges = p.effective_edges();
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_EQ(edges[0].from, 0);
  EXPECT_EQ(edges[0].to, 1);
  EXPECT_EQ(edges[0].bytes_per_sample, 128);
  EXPECT_EQ(edges[1].from, 1);
  EXPECT_EQ(edges[1].to, 2);
  EXPECT_EQ(edges[1].bytes_per_sample, 256);
}

TEST(Profile, EffectiveEdgesAreTheExplicitOnesWhenGiven) {
  const Profile p = full_profile();
  const auto edges = p.effective_edges();
  ASSERT_EQ(edges.size(), 3u);
  EXPECT_EQ(edges[2].from, 0);
  EXPECT_EQ(edges[2].to, 2);
  EXPECT_EQ(edges[2].bytes_per_sample, 5);
  Profile one;
  one.layers.resize(1);
  EXPECT_TRUE(one.effective_edges().empty());
}

TEST(ProfileErrors, MissingOrEmptyLayers) {
  Json doc = valid_doc();
  doc.erase("layers");
  EXPECT_EQ(error_of(doc), "p.json: layers: missing required field");
  doc["layers"] = Json::array();
  EXPECT_EQ(error_of(doc), "p.json: layers: a profile needs at least one layer");
  doc["layers"] = "three";
  EXPECT_EQ(error_of(doc), "p.json: layers: expected an array, got a string");
}

TEST(ProfileErrors, MissingRequiredFieldsAreNamed) {
  for (const char* key : {"model", "device"}) {
    Json doc = valid_doc();
    doc.erase(key);
    EXPECT_EQ(error_of(doc), std::string("p.json: ") + key + ": missing required field");
  }
  for (const char* key : {"name", "timings", "output_bytes_per_sample", "param_bytes"}) {
    Json doc = valid_doc();
    doc["layers"][1].erase(key);
    EXPECT_EQ(error_of(doc), std::string("p.json: layers[1].") + key + ": missing required field");
  }
  for (const char* key : {"micro_batch", "forward_s", "backward_s"}) {
    Json doc = valid_doc();
    doc["layers"][0]["timings"][1].erase(key);
    EXPECT_EQ(error_of(doc),
              std::string("p.json: layers[0].timings[1].") + key + ": missing required field");
  }
}

TEST(ProfileErrors, NegativeTimesAndSizes) {
  for (const char* key : {"forward_s", "backward_s", "recompute_s"}) {
    Json doc = valid_doc();
    doc["layers"][1]["timings"][0][key] = -0.5;
    EXPECT_EQ(error_of(doc), std::string("p.json: layers[1].timings[0].") + key +
                                 ": expected a non-negative number, got -0.5");
  }
  for (const char* key :
       {"output_bytes_per_sample", "saved_bytes_per_sample", "backward_bytes_per_sample",
        "forward_workspace_bytes_per_sample", "backward_workspace_bytes_per_sample", "param_bytes",
        "optimizer_bytes", "optimizer_step_s", "optimizer_new_version_s"}) {
    Json doc = valid_doc();
    doc["layers"][2][key] = -1;
    EXPECT_EQ(error_of(doc),
              std::string("p.json: layers[2].") + key + ": expected a non-negative number, got -1");
  }
  Json doc = valid_doc();
  doc["input_bytes_per_sample"] = -8;
  EXPECT_EQ(error_of(doc),
            "p.json: input_bytes_per_sample: expected a non-negative number, got -8");
}

TEST(ProfileErrors, ContentionAndCoreSlowdown) {
  Json doc = valid_doc();
  doc["layers"][1]["timings"][0]["contention"] = 0.8;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[1].timings[0].contention: must be at least 1 (0.8 given)");
  doc = valid_doc();
  doc["layers"][0]["timings"][1]["contention_backward"] = 0.9;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[1].contention_backward: must be at least 1 (0.9 given)");
  doc = valid_doc();
  doc["core_slowdown"] = Json::array({1.0, 0.0});
  EXPECT_THAT(error_of(doc), StartsWith("p.json: core_slowdown[1]: expected a positive number"));
}

TEST(ProfileErrors, ColdStarts) {
  Json doc = valid_doc();
  doc["cold_pauses_s"] = Json::array({0.004, 0.001});
  EXPECT_EQ(error_of(doc),
            "p.json: cold_pauses_s[1]: cold pauses must increase (0.001 after 0.004)");
  doc = valid_doc();
  doc["cold_pauses_s"] = Json::array({0.0});
  EXPECT_THAT(error_of(doc), StartsWith("p.json: cold_pauses_s[0]: expected a positive number"));
  doc = valid_doc();
  doc["cold_pauses_s"] = Json::array({0.001, 0.004});
  doc["layers"][1]["timings"][0]["cold_backward_s"] = Json::array({0.001});
  EXPECT_EQ(error_of(doc),
            "p.json: layers[1].timings[0].cold_backward_s: needs one figure per cold_pauses_s "
            "entry (1 given, 2 expected)");
  doc["layers"][1]["timings"][0]["cold_backward_s"] = Json::array({0.001, -0.5});
  EXPECT_THAT(error_of(doc), StartsWith("p.json: layers[1].timings[0].cold_backward_s[1]: "
                                        "expected a non-negative number"));
  doc = valid_doc();  // figures without the pauses they were measured at
  doc["layers"][0]["timings"][0]["cold_forward_s"] = Json::array({0.001});
  EXPECT_THAT(error_of(doc), HasSubstr("cold_forward_s: needs one figure per cold_pauses_s"));
}

TEST(ProfileErrors, MicroBatchSizes) {
  Json doc = valid_doc();
  doc["layers"][0]["timings"][1]["micro_batch"] = 1;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[1].micro_batch: micro-batch size 1 "
            "profiled twice");
  doc = valid_doc();
  doc["layers"][0]["timings"][0]["micro_batch"] = 0;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[0].micro_batch: must be at least 1 (0 given)");
  doc["layers"][0]["timings"][0]["micro_batch"] = 1.5;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[0].micro_batch: expected an integer, got 1.5");
  doc = valid_doc();
  doc["layers"][0]["timings"][0]["micro_batch"] = 4294967297LL;  // 2^32 + 1 must not wrap to 1
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[0].micro_batch: must be at most 2147483647 "
            "(4294967297 given)");
  doc = valid_doc();
  doc["layers"][2]["timings"] = Json::array();
  EXPECT_EQ(error_of(doc), "p.json: layers[2].timings: needs at least one micro-batch size");
}

TEST(ProfileErrors, LayerNames) {
  Json doc = valid_doc();
  doc["layers"][2]["name"] = "in";
  EXPECT_EQ(error_of(doc), "p.json: layers[2].name: duplicate layer name \"in\"");
  doc["layers"][2]["name"] = "";
  EXPECT_EQ(error_of(doc), "p.json: layers[2].name: must not be empty");
}

TEST(ProfileErrors, UnknownFieldsAtEveryLevel) {
  Json doc = valid_doc();
  doc["colour"] = "red";
  EXPECT_THAT(error_of(doc), StartsWith("p.json: colour: unknown field (known: format, version, "));
  doc = valid_doc();
  doc["layers"][1]["flops"] = 3;
  EXPECT_THAT(error_of(doc), StartsWith("p.json: layers[1].flops: unknown field (known: name, "));
  doc = valid_doc();
  doc["layers"][0]["timings"][0]["memory"] = 3;
  EXPECT_EQ(error_of(doc),
            "p.json: layers[0].timings[0].memory: unknown field (known: "
            "micro_batch, forward_s, backward_s, recompute_s, backward_weight_s, contention, "
            "contention_backward, "
            "cold_forward_s, cold_backward_s)");
  doc = valid_doc();
  doc["edges"] = {{{"from", 0}, {"to", 1}, {"bytes_per_sample", 1}, {"dtype", "f"}}};
  EXPECT_EQ(error_of(doc),
            "p.json: edges[0].dtype: unknown field (known: from, to, bytes_per_sample)");
}

TEST(ProfileErrors, EdgeIndices) {
  Json doc = valid_doc();
  doc["edges"] = {{{"from", 0}, {"to", 1}, {"bytes_per_sample", 1}},
                  {{"from", 1}, {"to", 3}, {"bytes_per_sample", 1}}};
  EXPECT_EQ(error_of(doc), "p.json: edges[1].to: layer index 3 out of range 0..2");
  doc["edges"][1]["to"] = 2;
  doc["edges"][1]["from"] = -1;
  EXPECT_EQ(error_of(doc), "p.json: edges[1].from: layer index -1 out of range 0..2");
  doc["edges"][1]["from"] = 2;
  EXPECT_EQ(error_of(doc), "p.json: edges[1]: an edge cannot connect a layer to itself");
  doc["edges"][1]["from"] = 1;
  doc["edges"][1]["bytes_per_sample"] = -4;
  EXPECT_EQ(error_of(doc),
            "p.json: edges[1].bytes_per_sample: expected a non-negative number, got -4");
  doc["edges"][1].erase("bytes_per_sample");
  EXPECT_EQ(error_of(doc), "p.json: edges[1].bytes_per_sample: missing required field");
}

TEST(ProfileErrors, FormatAndVersion) {
  Json doc = valid_doc();
  doc["format"] = "pipetwin.plan";
  EXPECT_EQ(error_of(doc), "p.json: format: expected \"pipetwin.profile\", got \"pipetwin.plan\"");
  doc = valid_doc();
  doc["version"] = 2;
  EXPECT_EQ(error_of(doc), "p.json: version: unsupported version 2 (this pipetwin reads 1..1)");
  doc.erase("version");
  EXPECT_EQ(error_of(doc), "p.json: version: missing required field");
}

TEST(ProfileErrors, SourceMustBeKnown) {
  Json doc = valid_doc();
  doc["source"] = "guessed";
  EXPECT_EQ(error_of(doc),
            "p.json: source: expected \"measured\", \"analytic\" or \"synthetic\", "
            "got \"guessed\"");
}

TEST(ProfileErrors, LoadProfileNamesTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("broken.json");
  Json doc = valid_doc();
  doc["layers"][1]["timings"][0]["backward_s"] = "slow";
  test::write_text(path, doc.dump(2));
  EXPECT_EQ(
      input_error([&] { load_profile(path); }),
      path + ": layers[1].timings[0].backward_s: expected a non-negative number, got \"slow\"");
  test::write_text(path, "{\"format\": ");
  EXPECT_THAT(input_error([&] { load_profile(path); }),
              ::testing::AllOf(StartsWith(path + ":1:"), HasSubstr("not valid JSON")));
}

}  // namespace
}  // namespace pipetwin
