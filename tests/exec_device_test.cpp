// exec/platform/device.hpp: the CPU device the executor and profiler time and count with, the
// choice of device and its errors, the catalog names of GPUs; and, where this build has CUDA and a
// GPU is visible, the CUDA path against single-process CPU training (skipped elsewhere, as on CI).
#include "exec/platform/device.hpp"

#include <thread>

#include <ATen/ATen.h>
#include <gmock/gmock.h>

#include "core/error.hpp"
#include "exec/platform/cuda_device.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "exec/platform/tensor_io.hpp"
#include "exec/profile/profiler.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;
using ::testing::HasSubstr;
using testing::max_relative_error;

TEST(CpuDevice, MarksMeasureHostTimeFromTheCommonZero) {
  const auto device = exec::make_device("cpu", 3);
  EXPECT_FALSE(device->is_cuda());
  EXPECT_EQ(device->describe(), "cpu");
  const auto t0 = std::chrono::steady_clock::now();
  const auto zero = device->start_mark(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto a = device->mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto b = device->mark();
  EXPECT_GE(device->seconds(*zero, *a), 0.020);
  EXPECT_GE(device->seconds(*a, *b), 0.030);
  EXPECT_LT(device->seconds(*a, *b), 1.0);
  EXPECT_NEAR(device->seconds(*zero, *b), device->seconds(*zero, *a) + device->seconds(*a, *b),
              1e-9);
  // Two devices of one process given the same host reading share their zero exactly.
  const auto other = exec::make_device("cpu", 4);
  const auto zero2 = other->start_mark(t0);
  EXPECT_DOUBLE_EQ(other->seconds(*zero2, *b), device->seconds(*zero, *b));
}

TEST(CpuDevice, FromHostCopiesAndCountsUnderItsSlot) {
  exec::MemoryTracker::install();
  const int slot = 7;
  const auto device = exec::make_device("cpu", slot);
  const at::Tensor host = at::ones({256, 256}, at::kFloat);  // 256 KiB
  device->reset_peak();
  const int64_t before = device->live_bytes();
  at::Tensor copy;
  {
    exec::MemoryTracker::ScopedDevice attribute(slot);
    copy = device->from_host(host);
  }
  EXPECT_NE(copy.data_ptr(), host.data_ptr());
  EXPECT_TRUE(copy.equal(host));
  EXPECT_EQ(device->live_bytes() - before, 256 * 256 * 4);
  copy.reset();
  EXPECT_EQ(device->live_bytes(), before);
  EXPECT_GE(device->peak_bytes() - before, 256 * 256 * 4);
  EXPECT_GT(device->capacity_bytes(), int64_t{1} << 28);
}

TEST(MakeDevice, NamesTheBadValue) {
  for (const std::string bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cud", "CPU"}) {
    try {
      exec::make_device(bad, 0);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--device: \"" + bad + "\" is not a device")) << bad;
    }
  }
}

TEST(MakeDevice, CudaWithoutCudaSaysSo) {
  if (exec::built_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_EQ(exec::resolve_device("auto"), "cpu");
  EXPECT_EQ(exec::resolve_device("cuda:1"), "cuda:1");
  try {
    exec::make_device("cuda:0", 0);
    ADD_FAILURE() << "cuda:0 accepted without CUDA";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("LibTorch without CUDA"));
  }
  // The executor refuses it before building anything.
  exec::ExecOptions o = float64_options(1);
  o.device = "cuda";
  EXPECT_THROW(exec::execute_plan(exec_plan(ExecSpec{}), o), InputError);
}

TEST(CatalogNameForGpu, MatchesTheShippedEntries) {
  const int64_t GiB = int64_t{1} << 30;
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA H100 80GB HBM3", 80 * GiB), "h100-sxm");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA H200", 141 * GiB), "h200-sxm");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA A100-SXM4-40GB", 40 * GiB), "a100-40gb");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA A100-SXM4-80GB", 80 * GiB), "a100-80gb");
  EXPECT_EQ(exec::catalog_name_for_gpu("Tesla V100-SXM2-16GB", 16 * GiB), "v100-16gb");
  EXPECT_EQ(exec::catalog_name_for_gpu("Tesla V100-SXM2-32GB", 32 * GiB), "v100-32gb");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA GeForce RTX 4090", 24 * GiB), "rtx-4090");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA L4", 24 * GiB), "l4");
  EXPECT_EQ(exec::catalog_name_for_gpu("Quadro RTX 5000", 16 * GiB), "quadro-rtx-5000");
  EXPECT_EQ(exec::catalog_name_for_gpu("NVIDIA GeForce GTX 1080", 8 * GiB), "");
  // Every name it returns is in the shipped catalog.
  for (const char* n : {"h100-sxm", "h200-sxm", "a100-40gb", "a100-80gb", "v100-16gb", "v100-32gb",
                        "rtx-4090", "l4", "quadro-rtx-5000", "rtx-2080-ti", "tesla-p40"}) {
    EXPECT_NE(testing::shipped_catalog().find_device(n), nullptr) << n;
  }
}

class DeviceCli : public test::TempDirTest {};

TEST_F(DeviceCli, BadDeviceIsOneLineAndWritesNothing) {
  const std::string plan = testing::write_plan(exec_plan(ExecSpec{}), dir_);
  const auto run = testing::sh(fmt::format("{}/pipetwin run --plan {} --device cuda:x --metrics {}",
                                           PIPETWIN_BINARY_DIR, plan, (dir_ / "m.json").string()));
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--device: \"cuda:x\" is not a device"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "m.json"));
  const auto prof = testing::sh(
      fmt::format("{}/pipetwin profile --model mlp:layers=2,width=8,input=4 --device cuda:x -o {}",
                  PIPETWIN_BINARY_DIR, (dir_ / "p.json").string()));
  EXPECT_EQ(prof.status, 2) << prof.output;
  EXPECT_THAT(prof.output, HasSubstr("--device: \"cuda:x\" is not a device"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "p.json"));
}

// ---- the CUDA path: runs only where this build has CUDA and a GPU is visible ----------------

bool have_gpu() {
  return exec::built_with_cuda() && exec::cuda_device_count() > 0;
}

struct CudaCase {
  std::string schedule;
  int stages, chunks, dp;
  Checkpoint checkpoint;
};

class CudaEqualsCpu : public ::testing::TestWithParam<CudaCase> {};

TEST_P(CudaEqualsCpu, SameWeightsAsSingleProcessCpuTraining) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA in this build or no GPU visible";
  const CudaCase c = GetParam();
  const ExecSpec s{.schedule = c.schedule,
                   .stages = c.stages,
                   .chunks = c.chunks,
                   .dp = c.dp,
                   .checkpoint = c.checkpoint};
  const Plan plan = exec_plan(s);
  const int iterations = 3;
  exec::ExecOptions o = float64_options(iterations);
  o.device = "cuda";  // every schedule device a stream set of the GPU(s)
  const exec::ExecResult r = exec::execute_plan(plan, o);
  // Single-process training on the CPU at the weight versions the schedule declares (plain
  // synchronous SGD for the synchronous schedules).
  const PlanContext ctx(plan, iterations);
  const exec::ReferenceResult ref = exec::reference_training(
      plan, make_schedule(plan.schedule, ctx.shape), float64_options(iterations));
  std::vector<at::Tensor> expected;
  for (const auto& st : ref.stage_parameters) expected.insert(expected.end(), st.begin(), st.end());
  EXPECT_LT(max_relative_error(testing::executor_parameters(r, s.stages), expected), 1e-9);
  for (const auto& e : r.timeline.events) EXPECT_LE(e.start_s, e.end_s);
  for (double peak : r.timeline.peak_memory_bytes) EXPECT_GT(peak, 0);
  EXPECT_THAT(r.timeline.device_names.front(), HasSubstr("(cuda:"));
}

// Every schedule, K = 2..4 stream sets of the GPU, checkpointing, data parallelism.
INSTANTIATE_TEST_SUITE_P(Schedules, CudaEqualsCpu,
                         ::testing::Values(CudaCase{"naive", 2, 2, 1, Checkpoint::kNone},
                                           CudaCase{"gpipe", 2, 4, 1, Checkpoint::kNone},
                                           CudaCase{"gpipe", 3, 4, 1, Checkpoint::kExceptLast},
                                           CudaCase{"gpipe", 4, 4, 1, Checkpoint::kAlways},
                                           CudaCase{"1f1b", 2, 4, 1, Checkpoint::kNone},
                                           CudaCase{"1f1b", 4, 8, 1, Checkpoint::kNone},
                                           CudaCase{"gpipe", 2, 2, 2, Checkpoint::kNone},
                                           CudaCase{"pipedream", 3, 2, 1, Checkpoint::kNone},
                                           CudaCase{"ddg", 3, 2, 1, Checkpoint::kNone},
                                           CudaCase{"feature-replay", 3, 2, 1, Checkpoint::kNone},
                                           CudaCase{"ftpipe-async", 3, 2, 1, Checkpoint::kNone}),
                         [](const ::testing::TestParamInfo<CudaCase>& i) {
                           std::string name = fmt::format(
                               "{}_K{}_M{}_dp{}_checkpoint{}", i.param.schedule, i.param.stages,
                               i.param.chunks, i.param.dp, static_cast<int>(i.param.checkpoint));
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// float32 on the GPU against float32 on the CPU: other kernels, other rounding, same training.
TEST(CudaFloat32, CloseToCpuTraining) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA in this build or no GPU visible";
  const Plan plan = exec_plan(ExecSpec{.schedule = "1f1b", .stages = 2, .chunks = 4});
  exec::ExecOptions o = float64_options(3);
  o.float64 = false;
  const exec::ExecResult cpu = exec::execute_plan(plan, o);
  o.device = "cuda";
  const exec::ExecResult gpu = exec::execute_plan(plan, o);
  EXPECT_LT(max_relative_error(testing::executor_parameters(gpu, 2),
                               testing::executor_parameters(cpu, 2)),
            1e-4);
}

// Dropout on the GPU (models/dropout.hpp): the masks come from the GPU's Philox stream seeded per
// (micro-batch, site), so two stream sets with checkpointed recompute, and a 1F1B pipeline, train
// as one stage on the GPU does (their masks are the GPU's, not the CPU's: no CPU reference here).
TEST(CudaDropout, PipelinesEqualOneStageOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA in this build or no GPU visible";
  const std::string model = "vit:test,dropout=0.2";
  exec::ExecOptions o = float64_options(3);
  o.device = "cuda";
  const auto run = [&](const std::string& schedule, int stages, Checkpoint ck) {
    const ExecSpec s{
        .model = model, .schedule = schedule, .stages = stages, .chunks = 4, .checkpoint = ck};
    return testing::executor_parameters(exec::execute_plan(exec_plan(s), o), stages);
  };
  const auto one = run("gpipe", 1, Checkpoint::kNone);
  EXPECT_LT(max_relative_error(run("gpipe", 2, Checkpoint::kAlways), one), 1e-9);
  EXPECT_LT(max_relative_error(run("1f1b", 3, Checkpoint::kNone), one), 1e-9);
  // Dropout is on: the same training without it ends elsewhere.
  o.device = "cpu";
  const auto plain = testing::executor_parameters(
      exec::execute_plan(exec_plan(ExecSpec{.model = "vit:test", .stages = 1}), o), 1);
  EXPECT_GT(max_relative_error(one, plain), 1e-6);
}

// Two processes sharing the one GPU (the one-GPU machine's case): Gloo between them, GPU tensors
// staged through host memory (exec/platform/c10d_transport.cpp); the weights of single-process
// training.
TEST_F(DeviceCli, TwoProcessesShareOneGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA in this build or no GPU visible";
  const Plan plan = exec_plan(ExecSpec{.schedule = "1f1b", .stages = 2, .chunks = 2});
  const auto o = testing::sh(fmt::format(
      "{}/pipetwin run --plan {} --nproc 2 --device cuda --iterations 3 --float64 --seed 7 "
      "--optimizer sgd --lr 0.05 --momentum 0.9 --no-pin --timeout 60 -q --save-parameters {}",
      PIPETWIN_BINARY_DIR, testing::write_plan(plan, dir_), (dir_ / "weights").string()));
  ASSERT_EQ(o.status, 0) << o.output;
  std::vector<at::Tensor> got;
  for (int s = 0; s < 2; ++s) {
    for (auto& t :
         exec::load_tensors((dir_ / "weights" / fmt::format("replica0_stage{}.pt", s)).string()))
      got.push_back(t);
  }
  EXPECT_LT(max_relative_error(got, testing::plain_training(plan, float64_options(3), 3)), 1e-9);
}

TEST(CudaProfile, TimesEveryLayerOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA in this build or no GPU visible";
  exec::ProfileOptions o;
  o.micro_batches = {2, 4};
  o.repeats = 3;
  o.warmup = 1;
  o.torch_device = "cuda:0";
  o.device = "";  // the GPU's catalog entry
  const Profile p = exec::profile_model("mlp:layers=4,width=32,input=16", o);
  EXPECT_FALSE(p.device.empty());
  EXPECT_THAT(p.notes, HasSubstr("CUDA events"));
  for (const auto& l : p.layers) {
    ASSERT_EQ(l.timings.size(), 2u);
    EXPECT_GT(l.timings[0].forward_s, 0);
    EXPECT_GT(l.timings[0].backward_s, 0);
    EXPECT_GT(l.output_bytes_per_sample, 0);
  }
}

}  // namespace
}  // namespace pipetwin
