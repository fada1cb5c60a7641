// Checkpoints (exec/train/checkpoint.hpp; issues 4 and 7): resuming from the last checkpoint
// reproduces, bit for bit, the weights of an uninterrupted run with the same seed; a failed
// write (a full disk) leaves the previous checkpoint readable; loading refuses damaged or
// mismatched checkpoints with one-line errors naming the file and the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "exec/runtime/stage.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/trainer.hpp"
#include "exec_test_util.hpp"
#include "models/zoo.hpp"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;
using testing::exec_plan;
using testing::ExecSpec;
using ::testing::HasSubstr;

struct ResumeCase {
  std::string name, model, schedule, data, optimizer;
  int stages, chunks, dp, steps_per_epoch, checkpoint_every;  // 0: every epoch
  bool three_one = false;  // PipeDream's 3-1 (testing::three_one_plan) instead of `stages`
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << c.name;
}

class Checkpoints : public test::TempDirTest {
 protected:
  void TearDown() override { ::unsetenv("PIPETWIN_FAULT"); }

  static Plan plan_of(const ResumeCase& c) {
    if (c.three_one) return testing::three_one_plan(c.schedule, c.chunks);
    return exec_plan({.model = c.model,
                      .schedule = c.schedule,
                      .stages = c.stages,
                      .chunks = c.chunks,
                      .dp = c.dp});
  }
  exec::TrainOptions options(const ResumeCase& c, const std::string& sub) const {
    exec::TrainOptions o;
    o.exec = testing::float64_options(0);
    o.exec.float64 = false;
    o.exec.data = c.data;
    o.exec.optimizer.kind = c.optimizer;
    o.exec.optimizer.lr = c.optimizer == "adam" ? 1e-3 : 0.05;
    o.steps_per_epoch = c.steps_per_epoch;
    o.epochs = 100;
    o.lr_decay = 0.5;
    o.lr_decay_every = 1;
    o.log = (dir_ / (sub + ".jsonl")).string();
    o.checkpoint_dir = (dir_ / sub).string();
    o.checkpoint_every_steps = c.checkpoint_every;
    o.checkpoint_every_epoch = c.checkpoint_every == 0;
    return o;
  }
  static std::vector<at::Tensor> flat(const exec::TrainResult& r) {
    std::vector<at::Tensor> out;
    for (const auto& [key, tensors] : r.parameters)
      out.insert(out.end(), tensors.begin(), tensors.end());
    return out;
  }
};

class ResumeIsBitForBit : public Checkpoints, public ::testing::WithParamInterface<ResumeCase> {};

// Run 6 steps; run 3, checkpoint, and continue in a new session from the checkpoint to 6: the
// same weights, bit for bit, and the same log.
TEST_P(ResumeIsBitForBit, SixStepsEqualThreePlusThree) {
  const ResumeCase c = GetParam();
  const Plan plan = plan_of(c);
  const int half = c.checkpoint_every > 0 ? c.checkpoint_every : c.steps_per_epoch;
  exec::TrainOptions whole = options(c, "whole");
  whole.max_steps = 2 * half;
  const exec::TrainResult a = exec::Trainer(plan, whole).run();

  exec::TrainOptions first = options(c, "split");
  first.max_steps = half;
  const exec::TrainResult b = exec::Trainer(plan, first).run();
  EXPECT_EQ(b.last_checkpoint, half);
  EXPECT_FALSE(testing::all_equal(flat(b), flat(a)));  // training moved the weights on

  exec::TrainOptions second = options(c, "split");
  second.max_steps = 2 * half;
  second.resume = true;
  const exec::TrainResult r = exec::Trainer(plan, second).run();
  EXPECT_EQ(r.resumed_from, half);
  EXPECT_EQ(r.steps, 2 * half);
  EXPECT_TRUE(testing::all_equal(flat(r), flat(a))) << c.name;
  // The log went through the checkpoint: the same epochs with the same losses.
  ASSERT_EQ(r.epochs.size(), a.epochs.size());
  for (size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_EQ(r.epochs[e].train_loss, a.epochs[e].train_loss) << e;
    EXPECT_EQ(r.epochs[e].eval_loss, a.epochs[e].eval_loss) << e;
    EXPECT_EQ(r.epochs[e].lr, a.epochs[e].lr) << e;
  }
  // Only the last checkpoint's files are left.
  const auto m = exec::read_manifest(second.checkpoint_dir);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->step, 2 * half);
  int files = 0;
  for (const auto& f : fs::directory_iterator(second.checkpoint_dir))
    files += f.path().extension() == ".pt";
  EXPECT_EQ(files, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Runs, ResumeIsBitForBit,
    ::testing::Values(
        // digits: the checkpoint lands inside an epoch (44 steps), so the data order and the
        // sampler position must come back.
        ResumeCase{"mlp_digits_gpipe_momentum", "mlp", "gpipe", "digits", "sgd", 2, 4, 1, 0, 3},
        // dropout keyed by global micro-batches, Adam's moments and step count, epochs of 2
        // steps: the checkpoint falls between epochs with evaluation and a learning-rate decay.
        ResumeCase{"vit_dropout_1f1b_adam", "vit:test,dropout=0.2", "1f1b", "synthetic", "adam", 3,
                   2, 1, 2, 2},
        // two replicas in one process: both replicas' state.
        ResumeCase{"mlp_dp2_gpipe", "mlp:layers=4,width=32,input=16", "gpipe", "synthetic", "sgd",
                   2, 2, 2, 5, 3},
        // asynchronous: checkpoints at epoch ends.
        ResumeCase{"mlp_pipedream", "mlp:layers=4,width=32,input=16", "pipedream", "synthetic",
                   "sgd", 3, 2, 1, 3, 0},
        // stage 0 on three devices: every copy's state comes back (else the next steps differ).
        ResumeCase{"mlp_three_one_1f1b", "mlp:layers=4,width=32,input=16", "1f1b", "synthetic",
                   "adam", 2, 3, 1, 3, 2, true}),
    [](const auto& info) { return info.param.name; });

// A full disk while checkpointing (the file-size limit drops; writes fail with EFBIG): the run
// stops with a one-line error naming the step and the file, the previous checkpoint is still the
// one named and loads, and resuming from it reproduces the uninterrupted run.
TEST_F(Checkpoints, AFullDiskLeavesThePreviousCheckpoint) {
  const ResumeCase c{"", "mlp:layers=4,width=32,input=16", "1f1b", "synthetic", "sgd", 2, 2, 1, 8,
                     2};
  const Plan plan = plan_of(c);
  exec::TrainOptions whole = options(c, "whole");
  whole.max_steps = 6;
  const exec::TrainResult a = exec::Trainer(plan, whole).run();

  exec::TrainOptions o = options(c, "full");
  o.max_steps = 6;
  ::setenv("PIPETWIN_FAULT", "diskfull@checkpoint=4", 1);
  try {
    exec::Trainer(plan, o).run();
    FAIL() << "the checkpoint write did not fail";
  } catch (const RunFailure& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpoint at step 4 (the one of step 2 stays) failed"));
    EXPECT_THAT(e.what(), HasSubstr("step-00000004.rank0.pt"));
    EXPECT_THAT(e.what(), HasSubstr("File too large"));
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  ::unsetenv("PIPETWIN_FAULT");
  const auto m = exec::read_manifest(o.checkpoint_dir);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->step, 2);
  for (const auto& f : fs::directory_iterator(o.checkpoint_dir)) {
    const std::string name = f.path().filename().string();
    EXPECT_TRUE(name == "checkpoint.json" || name == "step-00000002.rank0.pt") << name;
  }
  EXPECT_NO_THROW(exec::read_rank_file(o.checkpoint_dir, *m, 0));
  o.resume = true;
  const exec::TrainResult r = exec::Trainer(plan, o).run();
  EXPECT_EQ(r.resumed_from, 2);
  EXPECT_TRUE(testing::all_equal(flat(r), flat(a)));
}

class BrokenCheckpoints : public Checkpoints {
 protected:
  void SetUp() override {
    Checkpoints::SetUp();
    c_ = ResumeCase{"", "mlp:layers=4,width=32,input=16", "gpipe", "synthetic", "sgd", 2, 2, 1, 4,
                    2};
    plan_ = plan_of(c_);
    o_ = options(c_, "ck");
    o_.max_steps = 2;
    exec::Trainer(plan_, o_).run();
    o_.resume = true;
    o_.max_steps = 4;
    m_ = *exec::read_manifest(o_.checkpoint_dir);
    rank_file_ = (fs::path(o_.checkpoint_dir) / m_.files[0].file).string();
    manifest_ = (fs::path(o_.checkpoint_dir) / exec::kManifestName).string();
  }
  std::string resume_error(const Plan& plan, const exec::TrainOptions& o) {
    try {
      exec::Trainer(plan, o).run();
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      return e.what();
    }
    return "(no error)";
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  ResumeCase c_;
  Plan plan_;
  exec::TrainOptions o_;
  exec::Manifest m_;
  std::string rank_file_, manifest_;
};

TEST_F(BrokenCheckpoints, AFlippedByteIsCaughtByTheHash) {
  std::string bytes = read(rank_file_);
  bytes[bytes.size() / 2] ^= 0x40;
  write(rank_file_, bytes);
  const std::string e = resume_error(plan_, o_);
  EXPECT_THAT(e, HasSubstr(rank_file_ + ": contents changed"));
  EXPECT_THAT(e, HasSubstr("files[0].fnv1a64"));
}

TEST_F(BrokenCheckpoints, ATruncatedFileIsCaughtBySize) {
  const std::string bytes = read(rank_file_);
  write(rank_file_, bytes.substr(0, bytes.size() - 10));
  EXPECT_THAT(resume_error(plan_, o_), HasSubstr("files[0].bytes says"));
}

TEST_F(BrokenCheckpoints, ManifestErrorsNameTheField) {
  const std::string good = read(manifest_);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    write(manifest_, text.replace(at, from.size(), to));
    return resume_error(plan_, o_);
  };
  EXPECT_THAT(with("\"version\": 1", "\"version\": 9"),
              HasSubstr("checkpoint.json: version: unsupported version 9"));
  EXPECT_THAT(with("\"world\": 1", "\"world\": 2"), HasSubstr("files: 1 files for a world of 2"));
  EXPECT_THAT(with(".rank0.pt", ".rank0.pt/../x"), HasSubstr("files[0].file"));
  EXPECT_THAT(with("\"step\": 2", "\"step\": -2"), HasSubstr("checkpoint.json: step: must not"));
  write(manifest_, good.substr(0, good.size() / 2));
  EXPECT_THAT(resume_error(plan_, o_), HasSubstr("checkpoint.json:"));
}

TEST_F(BrokenCheckpoints, AnotherPlanOrOtherOptionsAreRefused) {
  ExecSpec other;
  other.stages = 2;
  other.chunks = 4;  // another M
  EXPECT_THAT(resume_error(exec_plan(other), o_), HasSubstr("checkpoint.json: plan: \""));
  exec::TrainOptions seed = o_;
  seed.exec.seed = 8;
  EXPECT_THAT(resume_error(plan_, seed), HasSubstr("progress.seed: 7, but this run has --seed 8"));
  exec::TrainOptions lr = o_;
  lr.exec.optimizer.lr = 0.1;
  EXPECT_THAT(resume_error(plan_, lr), HasSubstr("progress.optimizer.lr: 0.05, but this run"));
  exec::TrainOptions none = o_;
  none.checkpoint_dir = (dir_ / "empty").string();
  EXPECT_THAT(resume_error(plan_, none), HasSubstr("no checkpoint to resume"));
  // A fresh run into a folder with a checkpoint would overwrite it: refused.
  exec::TrainOptions fresh = o_;
  fresh.resume = false;
  EXPECT_THAT(resume_error(plan_, fresh), HasSubstr("pass --resume"));
}

// restore_stage finds tensors by layer name and checks their shape.
TEST_F(BrokenCheckpoints, TensorsAreMatchedByNameAndShape) {
  const exec::RankState st = exec::read_rank_file(o_.checkpoint_dir, m_, 0);
  ASSERT_EQ(st.stages.size(), 2u);
  EXPECT_EQ(st.stages[0].tensors[0].name, "fc0.linear.weight");
  EXPECT_EQ(st.stages[0].tensors[0].role, "parameter");
  EXPECT_EQ(st.stages[0].tensors[1].role, "momentum");
  EXPECT_EQ(st.stages[0].optimizer_steps, 2);
  EXPECT_EQ(st.data_order.defined(), false);  // synthetic data has no order
  models::LayeredModel model = models::build_model(plan_.model, at::kFloat, 7);
  exec::StageSpec spec;
  spec.layers = st.stages[0].layers;
  auto factory = [&] {
    std::vector<torch::nn::AnyModule> out;
    for (int l : spec.layers) out.push_back(model.layers[static_cast<size_t>(l)].module);
    return out;
  };
  exec::StageRuntime rt(spec, factory, o_.exec.optimizer, nullptr);
  exec::StageState wrong = st.stages[0];
  wrong.tensors[0].value = wrong.tensors[0].value.narrow(0, 0, 3).clone();
  try {
    exec::restore_stage(wrong, rt, model, "ck.pt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("ck.pt: stage 0: parameter \"fc0.linear.weight\" is Float [3, 16]"));
  }
  exec::StageState missing = st.stages[0];
  missing.tensors.erase(missing.tensors.begin() + 2);  // fc0.linear.bias
  EXPECT_THROW(exec::restore_stage(missing, rt, model, "ck.pt"), InputError);
  exec::restore_stage(st.stages[0], rt, model, "ck.pt");
  EXPECT_TRUE(at::equal(rt.parameters()[0], st.stages[0].tensors[0].value));
}

}  // namespace
}  // namespace pipetwin
