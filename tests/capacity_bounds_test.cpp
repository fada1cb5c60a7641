// The capacity search's lower bounds (studies/capacity_bounds.hpp): their closed forms on
// hand-computed models, and that no bound ever exceeds what it bounds — the simulated iteration and
// the memory walk — on random models, layouts and clusters (a bound above its plan would let the
// search skip the plan it should have chosen).
#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "capacity_test_util.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "studies/capacity_bounds.hpp"
#include "studies/capacity_screen.hpp"
#include "studies/capacity_space.hpp"
#include "studies/sweep/evaluate.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using test::TempDir;
using test_capacity::Catalogue;

constexpr double kMs = 1e-3;

// One layer of f = 1, b = 2, r = 1 ms a sample and a 0.5 ms optimizer step on one device: every
// action runs one after another, so the iteration is M x (f + b) x micro-batch + R x r x
// micro-batch + the step (R: recomputes per mini-batch, M, M - 1 or none) — the bound exactly.
TEST(CapacityBounds, OneDeviceIsItsWorkExactly) {
  TempDir dir;
  const Catalogue cat(dir);
  const Cluster cluster = load_cluster("slow1", cat.catalog);
  const Profile profile = test::synthetic("uniform:layers=1,fwd_ms=1,bwd_ms=2,opt_ms=0.5");
  const LayoutBounds bounds(profile, cluster, 1.0, 8);
  for (const auto& [ck, recomputed] :
       {std::pair{Checkpoint::kNone, 0}, {Checkpoint::kExceptLast, 3}, {Checkpoint::kAlways, 4}}) {
    const LayoutShape shape{1, 1, 1, 4, ck, false};  // M = 4 of 2 samples
    const double expected = (4 * 3 * 2 + recomputed * 1 * 2 + 0.5) * kMs;
    EXPECT_NEAR(bounds.time_s(shape), expected, 1e-12) << checkpoint_name(ck);
    PlanRequest r;
    r.profile = profile;
    r.cluster = cluster;
    r.batch_size = 8;
    r.chunks = 4;
    r.schedule = "1f1b";
    r.checkpoint = ck;
    const Evaluation e = evaluate_plan(make_plan(r), 0, false);
    ASSERT_TRUE(e.ok()) << e.error;
    EXPECT_NEAR(e.iteration_time_s, expected, 1e-12) << checkpoint_name(ck);
  }
  EXPECT_EQ(bounds.time_s({1, 1, 1, 4, Checkpoint::kNone, true}), 0);  // asynchronous: none
}

// Four alike layers of f = 1, b = 2 ms a sample and a 0.5 ms step over K = 3 devices, M = 4
// micro-batches of 2 samples: a layer's work is 4 x 3 x 2 + 0.5 = 24.5 ms; the least fullest
// contiguous stage holds two layers, 49 ms, above the mean 4 x 24.5 / 3 ms. With v = 2 or an
// asynchronous schedule there is no such bound (0).
TEST(CapacityBounds, ContiguousStagesBoundTheBusiestDevice) {
  TempDir dir;
  const Catalogue cat(dir);
  const Cluster cluster = load_cluster("quad", cat.catalog);
  const Profile profile = test::synthetic("uniform:layers=4,fwd_ms=1,bwd_ms=2,opt_ms=0.5");
  const LayoutBounds bounds(profile, cluster, 1.0, 8);
  const LayoutShape shape{3, 1, 1, 4, Checkpoint::kNone, false};
  EXPECT_NEAR(bounds.split_time_s(shape), 49 * kMs, 1e-6 * 49 * kMs);
  EXPECT_LT(bounds.time_s(shape), 49 * kMs * (1 - 1e-3));
  EXPECT_EQ(bounds.split_time_s({2, 1, 2, 4, Checkpoint::kNone, false}), 0);
  EXPECT_EQ(bounds.split_time_s({3, 1, 1, 4, Checkpoint::kNone, true}), 0);
}

// Four layers of 1 MiB of parameters and optimizer state each (s_l = 2 + 1 = 3 MiB) saving 1 MiB
// a sample. Over K = 2 devices at micro-batch 2: (4 x 3 + 4 x 2) / 2 = 10 MiB; over the two stream
// sets of one GPU, one memory: 20 MiB. Saved-set counts {2, 1} (1F1B's first and last stage of
// two): the split (2, 2) needs max(2 x 3 + 2 x 2 x 2, 2 x 3 + 2 x 2) = 14 MiB, (1, 3) max(7, 15),
// (3, 1) max(21, 7): 14 MiB.
TEST(CapacityBounds, MemoryClosedForms) {
  TempDir dir;
  const Catalogue cat(dir);
  const Profile profile = test::synthetic(
      "uniform:layers=4,fwd_ms=1,param_kb=1024,optimizer_kb=1024,saved_kb=1024,act_kb=1");
  const LayoutShape shape{2, 1, 1, 4, Checkpoint::kNone, false};  // micro-batch 8 / 4 = 2
  constexpr double kMiB = 1024.0 * 1024;
  const LayoutBounds pair(profile, load_cluster("pair", cat.catalog), 1.0, 8);
  EXPECT_NEAR(pair.memory_bytes(shape), 10 * kMiB, 1);
  const LayoutBounds streams(profile, load_cluster("streams", cat.catalog), 1.0, 8);
  EXPECT_NEAR(streams.memory_bytes(shape), 20 * kMiB, 1);
  EXPECT_NEAR(pair.split_memory_bytes(shape, {2, 1}), 14 * kMiB, 1e-5 * 14 * kMiB);
  EXPECT_NEAR(pair.split_memory_bytes(shape, {1, 1, 1, 1}), 3 * kMiB + 2 * kMiB,
              1e-5 * 5 * kMiB);  // a layer a stage
}

// A random model: 2..6 layers of random speed, per-sample overhead, activations and parameters
// sized so that some layouts of the 1 GiB test devices fit and some do not.
std::string random_model(std::mt19937& rng) {
  std::uniform_int_distribution<int> layers(2, 6);
  std::uniform_real_distribution<double> u(0, 1);
  const int L = layers(rng);
  auto list = [&](double lo, double hi) {
    std::string out;
    for (int l = 0; l < L; ++l)
      out += fmt::format("{}{:.3f}", l ? "/" : "", lo + (hi - lo) * u(rng));
    return out;
  };
  return fmt::format(
      "uniform:layers={},fwd_ms={},overhead_ms={},act_kb={},saved_kb={},param_kb={},"
      "optimizer_kb={},opt_ms={}",
      L, list(0.2, 2), list(0, 1), list(100, 20000), list(1000, 40000), list(0, 150000),
      list(0, 150000), list(0, 0.5));
}

// For random models, every layout of the default space that plans (memory-aware, as capacity
// plans it) on pair, quad and the stream sets: the bounds before and after partitioning stay at or
// below the simulated iteration, the memory bounds at or below the fullest memory's tensors.
TEST(CapacityBounds, NeverAboveWhatTheyBound) {
  TempDir dir;
  const Catalogue cat(dir);
  std::mt19937 rng(20261128);
  const std::vector<std::string> schedules = default_capacity_schedules();
  const std::vector<std::string> partitioners = {"optimal", "balance-time"};
  PartitionScreen screen;
  int checked = 0, split_checked = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const std::string model = random_model(rng);
    for (const std::string name : {"pair", "quad", "streams"}) {
      const Cluster cluster = load_cluster(name, cat.catalog);
      const Profile profile = test::synthetic(model);
      const LayoutBounds bounds(profile, cluster, 1.0, 8);
      const SpaceRequest space{cluster.num_devices(),
                               profile.num_layers(),
                               8,
                               &schedules,
                               &partitioners,
                               {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}};
      const std::vector<Layout> layouts = capacity_layouts(space);
      // A sample of the space, to keep the test short.
      for (size_t i = trial; i < layouts.size(); i += 7) {
        const Layout& x = layouts[i];
        PlanRequest r;
        r.profile = profile;
        r.cluster = cluster;
        r.stages = x.stages;
        r.dp = x.dp;
        r.schedule = *x.schedule;
        r.virtual_stages = x.virtual_stages;
        r.partitioner = *x.partitioner;
        r.checkpoint = x.checkpoint;
        r.batch_size = 8;
        r.chunks = x.chunks;
        r.allow_oom = true;  // the bounds hold for a plan that does not fit too
        Plan plan;
        try {
          plan = make_plan(r);
        } catch (const InputError&) {
          continue;
        }
        const PlanContext ctx(plan, 0);
        const SimResult sim = simulate_plan(ctx);
        const double t = evaluate_plan(plan, 0, true).iteration_time_s;
        const std::string what = fmt::format("{} on {}: {}", model, name, plan_summary(plan));
        const LayoutShape shape{x.stages, x.dp, x.virtual_stages, x.chunks, x.checkpoint, false};
        EXPECT_LE(bounds.time_s(shape), t * (1 + 1e-9)) << what;
        EXPECT_LE(plan_time_bound(ctx), t * (1 + 1e-9)) << what;
        // Contiguous stages, one per device: at or below the plan's own busiest device.
        EXPECT_LE(bounds.split_time_s(shape), plan_time_bound(ctx) * (1 + 1e-12)) << what;
        if (x.virtual_stages == 1 && bounds.split_time_s(shape) > 0) ++split_checked;
        double fullest = 0;
        for (const MemoryPool& p : memory_pools(cluster, ctx.placement, sim.memory))
          fullest = std::max(fullest, p.tensor_bytes);
        EXPECT_LE(bounds.memory_bytes(shape), fullest * (1 + 1e-9)) << what;
        EXPECT_LE(bounds.split_memory_bytes(shape, screen.saved_sets(x)), fullest * (1 + 1e-9))
            << what;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(split_checked, 50);
}

}  // namespace
}  // namespace pipetwin::sim
