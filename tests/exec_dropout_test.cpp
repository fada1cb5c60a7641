// The executor with dropout on (models/dropout.hpp) against single-process training, in float64,
// for every schedule: a stage draws each micro-batch's masks from the device generator seeded by
// (micro-batch, site), in its forward and again in its recompute, so checkpointed recompute,
// split backwards, virtual stages, asynchronous schedules (PipeDream's weight stashing) and data
// parallelism all train as the reference trainer does (exec/runtime/reference.hpp), which runs
// the same micro-batches under the same keys on one thread.
#include <gtest/gtest.h>

#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "exec/runtime/reference.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;
using testing::max_relative_error;

constexpr int kSteps = 2;
// ViT with dropout 0.2 on the embedding, on every attention's probabilities and on every
// sub-layer's output; six layers.
const char* kVit = "vit:test,dropout=0.2";

struct DropoutCase {
  std::string schedule;
  int devices = 2;
  int v = 1;  // model chunks per device (interleaved-1f1b, zbv, dualpipev)
  Checkpoint checkpoint = Checkpoint::kNone;
  int dp = 1;
  std::string model = kVit;
};

void PrintTo(const DropoutCase& c, std::ostream* os) {
  *os << fmt::format("{} D={} v={} dp={} checkpoint {} {}", c.schedule, c.devices, c.v, c.dp,
                     checkpoint_name(c.checkpoint), c.model);
}

Plan dropout_plan(const DropoutCase& c, const std::string& model) {
  Plan p = exec_plan(ExecSpec{.model = model,
                              .schedule = c.schedule,
                              .stages = c.devices * c.v,
                              .chunks = 4,
                              .micro_batch = 2,
                              .dp = c.dp,
                              .checkpoint = c.checkpoint});
  const std::vector<int> device =
      virtual_stage_layout(stage_layout_of(c.schedule), c.devices, c.v, c.schedule);
  for (size_t s = 0; s < p.stages.size(); ++s) p.stages[s].device = device[s];
  p.validate("dropout plan");
  return p;
}

std::vector<at::Tensor> reference_parameters(const Plan& plan, const exec::ExecOptions& o) {
  const PlanContext ctx(plan, o.iterations);
  const exec::ReferenceResult ref =
      exec::reference_training(plan, make_schedule(plan.schedule, ctx.shape), o);
  std::vector<at::Tensor> out;
  for (const auto& st : ref.stage_parameters) out.insert(out.end(), st.begin(), st.end());
  return out;
}

class ExecDropoutEqualsSingleProcess : public ::testing::TestWithParam<DropoutCase> {};

TEST_P(ExecDropoutEqualsSingleProcess, SameWeightsAfterSeveralSteps) {
  const DropoutCase c = GetParam();
  const Plan plan = dropout_plan(c, c.model);
  const exec::ExecOptions o = float64_options(kSteps);  // the liveness check on
  exec::ExecResult r;
  try {
    r = exec::execute_plan(plan, o);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const std::vector<at::Tensor> expected = reference_parameters(plan, o);
  for (int replica = 0; replica < c.dp; ++replica) {
    EXPECT_LT(
        max_relative_error(testing::executor_parameters(r, plan.num_stages(), replica), expected),
        1e-9)
        << "replica " << replica;
  }
  // Dropout is on: the same training without it ends elsewhere.
  const std::string plain = c.model.substr(0, c.model.find(",dropout"));
  EXPECT_GT(max_relative_error(expected, reference_parameters(dropout_plan(c, plain), o)), 1e-6);
}

std::string case_name(const ::testing::TestParamInfo<DropoutCase>& i) {
  const DropoutCase& c = i.param;
  std::string name =
      fmt::format("{}_D{}_v{}_dp{}_{}_{}", c.schedule, c.devices, c.v, c.dp,
                  checkpoint_name(c.checkpoint), c.model.substr(0, c.model.find(':')));
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExecDropoutEqualsSingleProcess,
    ::testing::Values(
        DropoutCase{"naive"}, DropoutCase{"gpipe"},
        // Checkpointing: the recompute draws the forward's masks again.
        DropoutCase{"gpipe", 2, 1, Checkpoint::kExceptLast},
        DropoutCase{"gpipe", 3, 1, Checkpoint::kAlways}, DropoutCase{"1f1b", 3},
        DropoutCase{"1f1b", 2, 1, Checkpoint::kAlways},
        // Asynchronous: weight stashing (PipeDream), delayed gradients, recomputing ones.
        DropoutCase{"pipedream", 3}, DropoutCase{"ddg", 2}, DropoutCase{"feature-replay", 2},
        DropoutCase{"ftpipe-async", 3},
        // Virtual stages and split backwards.
        DropoutCase{"interleaved-1f1b", 2, 2}, DropoutCase{"zb-h1", 2}, DropoutCase{"zb-h2", 3},
        DropoutCase{"zbv", 2, 2}, DropoutCase{"dualpipev", 2, 2},
        DropoutCase{"zb-h1", 2, 1, Checkpoint::kAlways},
        // Data parallelism: each replica draws its own masks, as the reference's replicas do.
        DropoutCase{"gpipe", 2, 1, Checkpoint::kNone, 2},
        // BERT (post-norm, dropout after the embedding's norm and in the pooler) and GPT-2
        // (causal attention).
        DropoutCase{"1f1b", 2, 1, Checkpoint::kExceptLast, 1,
                    "bert:tiny,layers=2,hidden=32,heads=2,seq=8,vocab=64,dropout=0.2"},
        DropoutCase{"pipedream", 2, 1, Checkpoint::kNone, 1,
                    "gpt2:tiny,layers=2,dim=32,heads=2,vocab=64,ctx=16,seq=8,dropout=0.2"}),
    case_name);

}  // namespace
}  // namespace pipetwin
