// models/torchscript.hpp: a user's TorchScript module as a LayeredModel. The modules are saved at
// test time by tests/data/torchscript_fixtures.py with Debian's python3-torch 1.13 (the tests that
// need them skip, saying so, where it is missing): the built model has the module's children as
// layers, the file's weights and Python's outputs; a module pipetwin cannot cut is a one-line
// error naming the file and the child.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "core/error.hpp"
#include "models/torchscript_spec.hpp"
#include "models/zoo.hpp"
#include "torchscript_test_util.hpp"

namespace pipetwin::models {
namespace {

using ::testing::ElementsAre;
using testing::fixture_model;
using ::testing::HasSubstr;
using testing::python_tensors;
using testing::torchscript_fixtures;

std::vector<std::string> names(const LayeredModel& m) {
  std::vector<std::string> out;
  for (const auto& l : m.layers) out.push_back(l.name);
  return out;
}

// The message of the InputError building `name` throws; it is one line.
std::string build_error(const std::string& name) {
  const std::string e = test::input_error([&] { build_model(name, at::kFloat, 0); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  return e;
}

TEST(TorchScriptName, FoldsTheProfileFlagsIntoTheName) {
  TorchScriptFlags f;
  EXPECT_EQ(torchscript_model_name("torchscript:m.pt", f), "torchscript:m.pt");
  f.input_shape = "4,16";
  f.loss = "mse";
  f.vocab = 0;
  EXPECT_EQ(torchscript_model_name("torchscript:m.pt", f),
            "torchscript:m.pt,input_shape=4/16,loss=mse");
  TorchScriptFlags tokens;
  tokens.input_dtype = "int64";
  tokens.vocab = 100;
  tokens.target_shape = "8";
  EXPECT_EQ(torchscript_model_name("torchscript:dir/m.pt", tokens),
            "torchscript:dir/m.pt,input_dtype=int64,target_shape=8,vocab=100");
}

TEST(TorchScriptName, RefusesBadFlags) {
  TorchScriptFlags f;
  f.input_shape = "16";
  EXPECT_THAT(test::input_error([&] { torchscript_model_name("mlp", f); }),
              HasSubstr("describe a torchscript:FILE.pt model, not \"mlp\""));
  EXPECT_THAT(
      test::input_error([&] { torchscript_model_name("torchscript:m.pt,input_shape=8", f); }),
      HasSubstr("--input-shape: the model name already sets input_shape=\"8\""));
  f.input_shape = "4,x";
  EXPECT_THAT(test::input_error([&] { torchscript_model_name("torchscript:m.pt", f); }),
              HasSubstr("--input-shape: expected positive integers D1,D2,... (one sample), got "
                        "\"4,x\""));
  TorchScriptFlags d;
  d.input_dtype = "int8";
  EXPECT_THAT(test::input_error([&] { torchscript_model_name("torchscript:m.pt", d); }),
              HasSubstr("--input-dtype: expected float32, float64"));
  TorchScriptFlags l;
  l.loss = "nll";
  EXPECT_THAT(test::input_error([&] { torchscript_model_name("torchscript:m.pt", l); }),
              HasSubstr("--loss: expected cross_entropy or mse, got \"nll\""));
}

TEST(TorchScriptName, RefusesBadNames) {
  EXPECT_THAT(build_error("torchscript:/no/such/file.pt"),
              HasSubstr("/no/such/file.pt: no such file (a module saved with torch.jit.save)"));
  EXPECT_THAT(build_error("torchscript"), HasSubstr("with one file name"));
  EXPECT_THAT(build_error("torchscript:a.pt,b.pt"), HasSubstr("got 2 bare words"));
  EXPECT_THAT(build_error("torchscript:a.pt,inputs=3"), HasSubstr("inputs"));
  EXPECT_THAT(build_error("torchscript:a.pt,input_shape=4/0"),
              HasSubstr("model option input_shape: expected positive integers"));
}

TEST(TorchScriptModel, IsTheSequentialsChildrenWithTheFilesWeights) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  LayeredModel m = build_model(fixture_model("mlp32.pt"), at::kFloat, 1);
  EXPECT_THAT(names(m), ElementsAre("fc0", "fc1", "fc2", "fc3", "fc4", "head"));
  EXPECT_EQ(m.layers[0].kind, "linear");
  EXPECT_EQ(m.task, Task::kClassification);
  EXPECT_EQ(m.sample.input_shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(m.sample.classes, 5);
  EXPECT_TRUE(m.sample.target_shape.empty());
  EXPECT_FALSE(m.has_skips());
  // Python's parameter names, under the layers.
  EXPECT_EQ(m.layers[0].impl().named_parameters().keys(),
            (std::vector<std::string>{"0.weight", "0.bias"}));
  // Python's output for Python's batch.
  const auto out = python_tensors(torchscript_fixtures() + "/outputs.pt");
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::allclose(m.forward(out[0]), out[1], 1e-6, 1e-7));
  // The weights are the file's: another seed builds the same ones; clone() copies them.
  const LayeredModel other = build_model(fixture_model("mlp32.pt"), at::kFloat, 2);
  const LayeredModel copy = m.clone();
  const auto a = m.parameters(), b = other.parameters(), c = copy.parameters();
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], b[i])) << i;
    EXPECT_TRUE(at::equal(a[i], c[i])) << i;
    EXPECT_NE(a[i].data_ptr(), c[i].data_ptr()) << i;
  }
  EXPECT_EQ(parameter_count(fixture_model("mlp32.pt")), m.num_parameters());
}

TEST(TorchScriptModel, ExpandsALayersModuleListAndKeepsTokenInputs) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  LayeredModel m = build_model(fixture_model("tfm64.pt"), at::kDouble, 0);
  EXPECT_THAT(names(m), ElementsAre("embed", "layers.0", "layers.1", "layers.2", "head"));
  EXPECT_EQ(m.layers[1].kind, "transformerencoderlayer");
  EXPECT_TRUE(m.sample.token_input);
  EXPECT_EQ(m.sample.vocab, 32);
  EXPECT_EQ(m.sample.classes, 32);
  EXPECT_EQ(m.sample.target_shape, (std::vector<int64_t>{8}));  // a label per token
  const auto out = python_tensors(torchscript_fixtures() + "/outputs.pt");
  m.train(false);
  at::NoGradGuard no_grad;
  const at::Tensor y = m.forward(out[6]);
  EXPECT_EQ(y.scalar_type(), at::kDouble);
  EXPECT_TRUE(at::allclose(y, out[7], 1e-10, 1e-12));
  // Synthetic data as the metadata says; the loss per sample is the mean over its positions.
  const at::Tensor x = m.synthetic_input(3, 5), t = m.synthetic_target(3, 5);
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{3, 8}));
  EXPECT_LT(x.max().item<int64_t>(), 32);
  const at::Tensor logits = m.forward(x);
  const at::Tensor per_sample = m.per_sample_loss(logits, t);
  ASSERT_EQ(per_sample.sizes().vec(), (std::vector<int64_t>{3}));
  const at::Tensor logp = at::log_softmax(logits, -1);
  for (int64_t b = 0; b < 3; ++b) {
    double sum = 0;
    for (int64_t s = 0; s < 8; ++s) sum -= logp[b][s][t[b][s].item<int64_t>()].item<double>();
    EXPECT_NEAR(per_sample[b].item<double>(), sum / 8, 1e-12);
  }
}

TEST(TorchScriptModel, ConvertsToTheRunsDtypeAndReadsSkipsAndMse) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const LayeredModel f32 = build_model(fixture_model("mlp64.pt"), at::kFloat, 0);
  for (const auto& p : f32.parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
  EXPECT_EQ(f32.synthetic_input(2, 0).scalar_type(), at::kFloat);
  const LayeredModel skip = build_model(fixture_model("skip64.pt"), at::kDouble, 0);
  EXPECT_THAT(names(skip), ElementsAre("fc0", "fc1", "fc2", "head"));
  EXPECT_EQ(skip.layers[3].skip_from, 0);
  EXPECT_TRUE(skip.has_skips());
  const LayeredModel reg = build_model(fixture_model("reg64.pt"), at::kDouble, 0);
  EXPECT_EQ(reg.task, Task::kRegression);
  EXPECT_EQ(reg.sample.target_shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(reg.synthetic_target(2, 0).scalar_type(), at::kDouble);
}

TEST(TorchScriptModel, AModuleWithoutMetadataTakesItsInputFromTheName) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const std::string plain = fixture_model("mlp32_plain.pt");
  EXPECT_THAT(build_error(plain), HasSubstr("mlp32_plain.pt: no input shape: pass --input-shape"));
  const LayeredModel m = build_model(plain + ",input_shape=16", at::kFloat, 0);
  EXPECT_EQ(m.name, plain + ",input_shape=16");
  EXPECT_EQ(m.sample.classes, 5);  // from the output
  EXPECT_EQ(m.layers[5].kind, "linear");
  const LayeredModel mse = build_model(plain + ",input_shape=16,loss=mse", at::kFloat, 0);
  EXPECT_EQ(mse.sample.target_shape, (std::vector<int64_t>{5}));  // the output's, for mse
  EXPECT_THAT(build_error(plain + ",input_shape=16,classes=7"),
              HasSubstr("classes 7, but the output [2, 5] has 5 in its last dimension"));
  EXPECT_THAT(build_error(plain + ",input_shape=12"),
              HasSubstr("mlp32_plain.pt: the module's forward fails on a [2, 12] Float input"));
  EXPECT_THAT(build_error(plain + ",input_shape=16,input_dtype=int64"),
              HasSubstr("int64 inputs are token ids: give the vocabulary size (--vocab N)"));
}

TEST(TorchScriptModel, RefusesModulesItCannotCutNamingTheChild) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  auto error = [](const std::string& file) {
    return build_error(fixture_model(file) + ",input_shape=16");
  };
  EXPECT_THAT(error("two_inputs.pt"),
              HasSubstr("two_inputs.pt: child 3 (\"head\") takes two tensors (x, skip) and no "
                        "skip edge feeds the second: declare it with save_for_pipetwin"));
  EXPECT_THAT(error("tuple_out.pt"),
              HasSubstr("tuple_out.pt: child 1 (\"pair\") returns (Tensor, Tensor); "
                        "pipetwin needs one tensor from each layer"));
  EXPECT_THAT(error("reshape.pt"),
              HasSubstr("reshape.pt: child 1 (\"fc1\") fails on its input [2, 16] (RuntimeError: "
                        "mat1 and mat2 shapes cannot be multiplied (2x16 and 4x5)): its forward "
                        "must be its children in order"));
  EXPECT_THAT(error("shared.pt"),
              HasSubstr("shared.pt: children share a parameter (fc1.weight is fc0.weight)"));
  EXPECT_THAT(error("own_param.pt"),
              HasSubstr("own_param.pt: the module holds scale outside its children"));
}

TEST(TorchScriptModel, ValidatesTheMetadataFieldByField) {
  SKIP_WITHOUT_TORCHSCRIPT_FIXTURES();
  const test::TempDir dir;
  const std::string pt = dir.file("m.pt");
  std::filesystem::copy_file(torchscript_fixtures() + "/mlp32.pt", pt);
  const std::string meta = test::read_text(torchscript_fixtures() + "/mlp32.pt.json");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = meta;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    test::write_text(pt + ".json", text);
    return build_error("torchscript:" + pt);
  };
  EXPECT_THAT(with("\"input_shape\": [\n    16\n  ]", "\"input_shape\": [\n    0\n  ]"),
              HasSubstr("m.pt.json: input_shape[0]: expected a positive integer"));
  EXPECT_THAT(with("\"loss\": \"cross_entropy\"", "\"loss\": \"hinge\""),
              HasSubstr("m.pt.json: loss: expected cross_entropy or mse, got \"hinge\""));
  EXPECT_THAT(with("\"name\": \"fc1\"", "\"name\": \"block1\""),
              HasSubstr("m.pt.json: layers: lists [fc0, block1, fc2, fc3, fc4, head], but"));
  EXPECT_THAT(with("\"format\": \"pipetwin.torchscript\"", "\"format\": \"pipetwin.plan\""),
              HasSubstr("m.pt.json: format"));
  EXPECT_THAT(with("\"skip_from\": null\n    }\n  ]", "\"skip_from\": \"head\"\n    }\n  ]"),
              HasSubstr("m.pt.json: layers[5].skip_from: \"head\" is not an earlier layer"));
  // The name's options win over the metadata.
  test::write_text(pt + ".json", meta);
  EXPECT_EQ(build_model("torchscript:" + pt + ",loss=mse", at::kFloat, 0).task, Task::kRegression);
}

}  // namespace
}  // namespace pipetwin::models
