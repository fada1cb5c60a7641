// import-trace of real traces recorded as PyTorch's documentation shows it, without pipetwin's
// helper: tests/data/traces/plain_recipe.py runs the recipe (torch.profiler around the training
// loop, prof.step() after each step, record_shapes, with_stack, with_modules) on a 5-child
// nn.Sequential with the PyTorch of /usr/bin/python3 (Debian's python3-torch 1.13, built without
// Kineto: its export has names and times only). The trace must import as 5 layers and `plan` must
// take the profile. Skipped when that Python cannot import torch; the CLI parts run the pipetwin
// binary of this build (skipped when it is not built).
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"
#include "trace_import_real_util.hpp"

namespace pipetwin::trace_import {
namespace {

using ::testing::HasSubstr;

// Runs plain_recipe.py into dir/name with `flags`; the trace's path.
std::string record_recipe(const test::TempDir& dir, const std::string& name,
                          const std::string& flags = "") {
  const std::string out = dir.file(name);
  const std::string cmd =
      fmt::format("OPENBLAS_NUM_THREADS=1 {} {}/tests/data/traces/plain_recipe.py {} {} >{} 2>&1",
                  kPython, test::source_dir(), out, flags, dir.file("record.log"));
  EXPECT_EQ(run(cmd), 0) << test::read_text(dir.file("record.log"));
  return out;
}

ImportResult import_file(const std::string& path, const std::string& layers = "",
                         std::vector<int> micro_batches = {}) {
  ImportOptions o;
  o.layers = LayerSelection::parse(layers);
  o.micro_batches = std::move(micro_batches);
  return import_traces({load_kineto_trace(path)}, o);
}

// Every layer has time forward and backward, and every backward op went to a layer.
void expect_layers_measured(const ImportResult& r) {
  for (const auto& l : r.profile.layers) {
    EXPECT_GT(l.timings[0].forward_s, 0) << l.name;
    EXPECT_GT(l.timings[0].backward_s, 0) << l.name;
  }
  const TraceReport& t = r.traces[0];
  EXPECT_GT(t.backward_ops, 0);
  EXPECT_EQ(t.backward_attributed, t.backward_ops);
  EXPECT_GT(t.unattributed_share, 0);
  EXPECT_LT(t.unattributed_share, 0.6) << t.origin;
}

// `pipetwin import-trace ARGS -o profile` and `pipetwin plan` of the profile both succeed.
void expect_cli_imports_and_plans(const test::TempDir& dir, const std::string& args) {
  if (!std::filesystem::exists(binary())) GTEST_SKIP() << binary() << " is not built";
  const std::string profile = dir.file("recipe.profile.json");
  const std::string log = dir.file("cli.log");
  ASSERT_EQ(run(fmt::format("{} import-trace {} -o {} >{} 2>&1", binary(), args, profile, log)), 0)
      << test::read_text(log);
  EXPECT_THAT(test::read_text(log), HasSubstr("(5 layers, 1 micro-batch size)"));
  ASSERT_EQ(
      run(fmt::format("{} plan --profile {} --cluster local-cpu-2 -K 2 --schedule 1f1b -B 128 "
                      "-M 4 -o {} >{} 2>&1",
                      binary(), profile, dir.file("recipe.plan.json"), log)),
      0)
      << test::read_text(log);
  EXPECT_THAT(test::read_text(log), HasSubstr("K=2 stages"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("recipe.plan.json")));
}

// No schedule: steps from the optimizer's ranges; no shapes and no layer ranges in the export:
// --layers 5 and --micro-batch 32. The same events written with their sequence numbers (as
// python/pipetwin_trace.py writes a legacy profiler's events) give the same backward per layer:
// the order-matched nodes are the numbered ones.
TEST(TraceImportRecipe, DocumentationRecipeImportsAsFiveLayersAndPlans) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  test::TempDir dir;
  const std::string trace =
      record_recipe(dir, "recipe.json", "--sequence-numbers " + dir.file("numbered.json"));
  const ImportResult r = import_file(trace, "5", {32});
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 5);
  const char* names[] = {"linear_0", "relu_0", "linear_1", "relu_1", "linear_2"};
  for (int l = 0; l < 5; ++l) EXPECT_EQ(p.layers[size_t(l)].name, names[l]);
  EXPECT_EQ(p.layers[0].kind, "linear");
  EXPECT_EQ(p.layers[1].kind, "relu");
  EXPECT_EQ(p.optimizer, "sgd");
  expect_layers_measured(r);
  EXPECT_EQ(r.traces[0].measured_steps, 7);  // 8 optimizer steps, the first warm-up
  EXPECT_THAT(p.notes, HasSubstr("steps: from the end of one \"Optimizer.step#SGD.step\" range"));
  EXPECT_THAT(p.notes, HasSubstr("backward: autograd nodes matched by name and order"));
  const ImportResult numbered = import_file(dir.file("numbered.json"), "5", {32});
  EXPECT_THAT(numbered.profile.notes, HasSubstr("backward: autograd ops by sequence number"));
  for (size_t l = 0; l < 5; ++l) {
    EXPECT_DOUBLE_EQ(numbered.profile.layers[l].timings[0].forward_s,
                     p.layers[l].timings[0].forward_s)
        << names[l];
    EXPECT_DOUBLE_EQ(numbered.profile.layers[l].timings[0].backward_s,
                     p.layers[l].timings[0].backward_s)
        << names[l];
  }
  // Without --layers the trace says nothing of its layers: one line, naming the way out.
  EXPECT_THAT(test::input_error([&] { (void)import_file(trace); }),
              HasSubstr("recipe.json: no \"pipetwin.layer:<name>\" or \"nn.Module: \" range and no "
                        "pipetwin metadata that names the layers: give --layers N"));
  expect_cli_imports_and_plans(dir, trace + " --layers 5 --micro-batch 32");
}

// With a schedule: the ProfilerStep#<n> ranges are the steps (active=5: the first warm-up).
TEST(TraceImportRecipe, ScheduledRecipeStepsAreTheProfilerStepRanges) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  test::TempDir dir;
  const ImportResult r = import_file(record_recipe(dir, "scheduled.json", "--schedule"), "5", {32});
  ASSERT_EQ(r.profile.num_layers(), 5);
  expect_layers_measured(r);
  EXPECT_EQ(r.traces[0].all_steps, 5);
  EXPECT_THAT(r.profile.notes, HasSubstr("steps: torch.profiler's ProfilerStep#<n> ranges"));
}

// With python/pipetwin_trace.py's annotate(): the layers are the Sequential's children "0".."4",
// with exact bytes and the micro-batch size, no flags needed.
TEST(TraceImportRecipe, AnnotatedRecipeTakesTheChildrenAndTheirBytes) {
  if (!torch_importable()) GTEST_SKIP() << kPython << " cannot import torch (python3-torch)";
  test::TempDir dir;
  const std::string trace = record_recipe(dir, "annotated.json", "--annotate");
  const ImportResult r = import_file(trace);
  const Profile& p = r.profile;
  ASSERT_EQ(p.num_layers(), 5);
  const double params[] = {4.0 * (64 * 256 + 256), 0, 4.0 * (256 * 256 + 256), 0,
                           4.0 * (256 * 10 + 10)};
  for (int l = 0; l < 5; ++l) {
    const LayerProfile& x = p.layers[size_t(l)];
    EXPECT_EQ(x.name, std::to_string(l));
    EXPECT_EQ(x.kind, l % 2 ? "relu" : "linear");
    EXPECT_EQ(x.timings[0].micro_batch, 32);
    EXPECT_DOUBLE_EQ(x.param_bytes, params[l]);
    EXPECT_DOUBLE_EQ(x.output_bytes_per_sample, l < 4 ? 1024 : 40);
  }
  EXPECT_DOUBLE_EQ(p.input_bytes_per_sample, 256);
  expect_layers_measured(r);
  EXPECT_THAT(p.notes, HasSubstr("layers: the model's children in the trace's pipetwin metadata"));
  expect_cli_imports_and_plans(dir, trace);
}

}  // namespace
}  // namespace pipetwin::trace_import
