// core/framework_memory.hpp: PyTorch's caching-allocator rounding of given sizes, the reserved and
// process bytes against their closed forms, the shipped hardware/frameworks.json, a memory walk
// raised by the overhead, and one-line errors naming file and field.
#include "core/framework_memory.hpp"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/schedule/generators.hpp"
#include "sim_test_util.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

constexpr double kMiB = 1024.0 * 1024.0;

const FrameworkCatalog& shipped() {
  static const FrameworkCatalog c = FrameworkCatalog::load_dir(test::source_dir() + "/hardware");
  return c;
}

TEST(AllocatorRules, RoundsBlocksTo512Bytes) {
  const AllocatorRules a;  // PyTorch's constants
  EXPECT_EQ(a.block_bytes(0), 512);
  EXPECT_EQ(a.block_bytes(1), 512);
  EXPECT_EQ(a.block_bytes(512), 512);
  EXPECT_EQ(a.block_bytes(513), 1024);
  EXPECT_EQ(a.block_bytes(1000 * 1000), 1000448);  // 1954 x 512 + 512
}

TEST(AllocatorRules, SegmentsBySize) {
  const AllocatorRules a;
  // Up to 1 MiB: the small pool's 2 MiB segments.
  EXPECT_EQ(a.segment_bytes(4), 2 * kMiB);
  EXPECT_EQ(a.segment_bytes(kMiB), 2 * kMiB);
  // Above 1 MiB and below 10 MiB: a 20 MiB segment.
  EXPECT_EQ(a.segment_bytes(kMiB + 1), 20 * kMiB);
  EXPECT_EQ(a.segment_bytes(8.125 * kMiB), 20 * kMiB);  // cuBLAS's default workspace
  EXPECT_EQ(a.segment_bytes(10 * kMiB - 512), 20 * kMiB);
  // From 10 MiB: the block rounded up to 2 MiB.
  EXPECT_EQ(a.segment_bytes(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(a.segment_bytes(10 * kMiB + 1), 12 * kMiB);
  EXPECT_EQ(a.segment_bytes(604 * 1000 * 1000), 578 * kMiB);  // 576.0 MiB + a bit
}

FrameworkMemory sample(bool cublas_in_allocator) {
  FrameworkMemory fw;
  fw.device = "gpu";
  fw.context = {300 * kMiB, "test"};
  fw.stack.cublas_workspace = {8.125 * kMiB, "test"};
  fw.stack.cublas_workspace_in_allocator = cublas_in_allocator;
  fw.stack.cudnn_workspace = {0, "test"};
  fw.stack.fragmentation = {0.2, "test"};
  return fw;
}

TEST(FrameworkMemory, ReservedAndProcessBytesAreTheClosedForms) {
  const double a = 1000 * kMiB;
  // cuBLAS outside the allocator (PyTorch < 1.11): reserved = a / (1 - f); the workspace and the
  // context count for the process only.
  const FrameworkMemory old = sample(false);
  EXPECT_DOUBLE_EQ(old.reserved_bytes(a), a / 0.8);
  EXPECT_DOUBLE_EQ(old.process_bytes(a), a / 0.8 + 300 * kMiB + 8.125 * kMiB);
  // Inside (PyTorch 1.11+): its 20 MiB segment is reserved.
  const FrameworkMemory now = sample(true);
  EXPECT_DOUBLE_EQ(now.reserved_bytes(a), a / 0.8 + 20 * kMiB);
  EXPECT_DOUBLE_EQ(now.process_bytes(a), a / 0.8 + 20 * kMiB + 300 * kMiB);
  EXPECT_DOUBLE_EQ(measured_bytes(now, MemoryMeasure::kAllocated, a), a);
  EXPECT_DOUBLE_EQ(measured_bytes(now, MemoryMeasure::kReserved, a), now.reserved_bytes(a));
  EXPECT_DOUBLE_EQ(measured_bytes(now, MemoryMeasure::kProcess, a), now.process_bytes(a));
}

TEST(FrameworkMemory, ReserveGivesWayWhenTheTensorsFillWhatCanBeReserved) {
  const FrameworkMemory fw = sample(true);  // 20 MiB of cuBLAS workspace in the allocator
  const double ws = 20 * kMiB, room = 1000 * kMiB;
  // Far from the limit: the fragmentation reserve in full.
  EXPECT_DOUBLE_EQ(fw.reserved_bytes(400 * kMiB, room), fw.reserved_bytes(400 * kMiB));
  // 900 MiB of tensors would reserve 1145 MiB: the allocator frees its cache and stops at 1000.
  EXPECT_DOUBLE_EQ(fw.reserved_bytes(900 * kMiB, room), room);
  EXPECT_TRUE(fw.fits_after_release(900 * kMiB, room));
  // Tensors and workspace exactly fill it; one byte more does not fit, and is what it needs.
  EXPECT_TRUE(fw.fits_after_release(room - ws, room));
  EXPECT_FALSE(fw.fits_after_release(room - ws + 1, room));
  EXPECT_DOUBLE_EQ(fw.reserved_bytes(room, room), room + ws);
}

TEST(FrameworkMemory, AllocatableBytesInvertProcessBytes) {
  for (const bool in : {false, true}) {
    const FrameworkMemory fw = sample(in);
    EXPECT_DOUBLE_EQ(fw.fixed_bytes(), fw.process_bytes(0));
    EXPECT_NEAR(fw.allocatable_bytes(fw.process_bytes(1000 * kMiB)), 1000 * kMiB, 1e-3);
    EXPECT_EQ(fw.allocatable_bytes(fw.fixed_bytes() / 2), 0);  // the context alone fills it
  }
}

TEST(FrameworkCatalog, ShippedStacksOfThePapersGpus) {
  const FrameworkCatalog& c = shipped();
  for (const char* d : {"tesla-p40", "rtx-2080-ti", "quadro-rtx-5000", "h100-sxm"}) {
    const FrameworkMemory* fw = c.for_device(d);
    ASSERT_NE(fw, nullptr) << d;
    EXPECT_GT(fw->context.value, 0) << d;
    EXPECT_FALSE(fw->context.source.empty()) << d;
    EXPECT_EQ(fw->stack.allocator.min_block, 512);
    EXPECT_EQ(fw->stack.allocator.segment_bytes(kMiB), 2 * kMiB);
  }
  EXPECT_EQ(c.for_device("cpu-core"), nullptr);  // CPU devices: no framework memory
  // PyTorch 1.x: cuBLAS's own 8.125 MiB workspace outside the allocator; 2.x on Hopper: 32 MiB
  // drawn through it.
  const FrameworkMemory& p40 = *c.for_device("tesla-p40");
  EXPECT_EQ(p40.stack.name, "pytorch-1.x-cuda10");
  EXPECT_FALSE(p40.stack.cublas_workspace_in_allocator);
  EXPECT_EQ(p40.outside_workspace_bytes(), 8.125 * kMiB);
  const FrameworkMemory& h100 = *c.for_device("h100-sxm");
  EXPECT_TRUE(h100.stack.cublas_workspace_in_allocator);
  EXPECT_EQ(h100.allocator_workspace_bytes(), 32 * kMiB);
}

TEST(FrameworkMemory, RaisesEveryPeakOfAWalk) {
  testing::PlanSpec s;
  s.model = "uniform:layers=4,act_kb=64,saved_kb=256,param_kb=512";
  s.schedule = "gpipe";
  s.stages = 2;
  s.chunks = 4;
  const PlanContext ctx(testing::synthetic_plan(s), 1);
  const CompiledSchedule cs(make_schedule("gpipe", ctx.shape), "gpipe");
  const MemoryWalk plain = walk_memory(cs, ctx.stages);
  const FrameworkMemory fw = sample(false);
  MemoryWalk raised = plain;
  apply_framework_memory(raised, fw, MemoryMeasure::kProcess);
  for (size_t d = 0; d < plain.devices.size(); ++d) {
    EXPECT_DOUBLE_EQ(raised.devices[d].peak_bytes, fw.process_bytes(plain.devices[d].peak_bytes));
    EXPECT_DOUBLE_EQ(raised.devices[d].peak_bytes - plain.devices[d].peak_bytes / 0.8,
                     300 * kMiB + 8.125 * kMiB);
  }
  for (size_t i = 0; i < plain.after_action.size(); ++i)
    EXPECT_DOUBLE_EQ(raised.after_action[i], fw.process_bytes(plain.after_action[i]));
}

Json minimal_doc() {
  return Json::parse(R"({"format": "pipetwin.frameworks", "version": 1,
    "allocators": [{"name": "a", "min_block_bytes": {"value": 512, "source": "s"},
      "small_size_bytes": {"value": 1048576, "source": "s"},
      "small_segment_bytes": {"value": 2097152, "source": "s"},
      "large_segment_bytes": {"value": 20971520, "source": "s"},
      "min_large_alloc_bytes": {"value": 10485760, "source": "s"},
      "round_large_bytes": {"value": 2097152, "source": "s"}, "source": "s"}],
    "stacks": [{"name": "st", "allocator": "a",
      "cublas_workspace_bytes": {"value": 0, "source": "s"},
      "cublas_workspace_in_allocator": {"value": false, "source": "s"},
      "cudnn_workspace_bytes": {"value": 0, "source": "s"},
      "fragmentation": {"value": 0.1, "source": "s"}}],
    "devices": [{"device": "g", "stack": "st", "context_bytes": {"value": 1, "source": "s"},
      "source": "s"}]})");
}

std::string error_of(const Json& doc) {
  return test::input_error([&] { framework_catalog_from_json(JsonView(doc, "fw.json")); });
}

TEST(FrameworkCatalog, BadFieldsNameFileAndField) {
  EXPECT_NE(framework_catalog_from_json(JsonView(minimal_doc(), "fw.json")).for_device("g"),
            nullptr);
  Json doc = minimal_doc();
  doc["stacks"][0]["fragmentation"]["value"] = 1.0;
  EXPECT_THAT(error_of(doc), HasSubstr("fw.json: stacks[0].fragmentation.value: must be below 1"));
  doc = minimal_doc();
  doc["devices"][0]["context_bytes"].erase("source");
  EXPECT_THAT(error_of(doc), HasSubstr("fw.json: devices[0].context_bytes.source"));
  doc = minimal_doc();
  doc["devices"][0]["context_bytes"]["source"] = "";
  EXPECT_THAT(error_of(doc), HasSubstr("devices[0].context_bytes.source: give where"));
  doc = minimal_doc();
  doc["devices"][0]["stack"] = "nope";
  EXPECT_THAT(error_of(doc), HasSubstr("fw.json: devices[0].stack: unknown stack \"nope\""));
  doc = minimal_doc();
  doc["allocators"][0]["min_block_bytes"]["value"] = 0;
  EXPECT_THAT(error_of(doc), HasSubstr("allocators[0].min_block_bytes.value: must be positive"));
  doc = minimal_doc();
  doc["stacks"][0]["cublas_workspace_bytes"]["value"] = -1;
  EXPECT_THAT(error_of(doc), HasSubstr("fw.json: stacks[0].cublas_workspace_bytes.value"));
  doc = minimal_doc();
  doc["devices"].push_back(doc["devices"][0]);
  EXPECT_THAT(error_of(doc), HasSubstr("devices[1].device: duplicate device \"g\""));
}

TEST(FrameworkCatalog, NoFileNoFrameworkMemory) {
  const test::TempDir dir;
  EXPECT_TRUE(FrameworkCatalog::load_dir(dir.path().string()).devices().empty());
}

}  // namespace
}  // namespace pipetwin
