// Capacity planning (studies/capacity.hpp): ranking by time and by cost on a hand-checkable
// catalog, the GPU count search, the checkpoint modes and memory-aware partitions that make a model
// fit, the leanest plan when nothing fits, the budget, and broken price catalogs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "capacity_test_util.hpp"
#include "studies/capacity.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using test::input_error;
using test::TempDir;
using test::write_text;
using test_capacity::Catalogue;

constexpr double kGiB = 1024.0 * 1024 * 1024;

// One layer on one device: an iteration is batch x (f + b) / speed = 8 x 3 ms / speed whatever
// the schedule and M. 1000 steps: 24 s / speed; cost = hours x 1 GPU x price:
//   slow1  24 s  x $2/h  = $0.0133     fast2  12 s x $5/h = $0.0167     fast4  6 s x $12/h = $0.02
TEST(Capacity, RanksByTimeAndByCost) {
  TempDir dir;
  const Catalogue cat(dir);
  const CapacityReport r =
      plan_capacity(cat.request("uniform:layers=1,fwd_ms=1,bwd_ms=2", {"slow1", "fast2", "fast4"}));
  ASSERT_EQ(r.clusters.size(), 3u);
  const double seconds[] = {24, 12, 6}, prices[] = {2, 5, 12};
  for (size_t i = 0; i < 3; ++i) {
    const ClusterCapacity& c = r.clusters[i];
    EXPECT_TRUE(c.fits);
    EXPECT_EQ(c.fastest.gpus, 1);
    EXPECT_NEAR(c.fastest.iteration_time_s, seconds[i] / 1000, 1e-12) << c.cluster;
    EXPECT_NEAR(c.fastest.epoch_time_s, seconds[i], 1e-9);
    EXPECT_NEAR(c.fastest.total_time_s, seconds[i], 1e-9);
    EXPECT_NEAR(c.cheapest.cost, seconds[i] / 3600 * prices[i], 1e-12);
  }
  EXPECT_EQ(r.by_time, (std::vector<size_t>{2, 1, 0}));  // fast4, fast2, slow1
  EXPECT_EQ(r.by_cost, (std::vector<size_t>{0, 1, 2}));  // slow1, fast2, fast4
}

// A framework file (core/framework.hpp) reaches every plan capacity simulates, and the bounds
// stay lower bounds under it: on one device, compute_scale 2 doubles the 24 ms / speed of
// RanksByTimeAndByCost and iteration_s adds 5 ms to the (otherwise free) optimizer step.
TEST(Capacity, AppliesTheFrameworkToEveryPlan) {
  TempDir dir;
  const Catalogue cat(dir);
  CapacityRequest q = cat.request("uniform:layers=1,fwd_ms=1,bwd_ms=2", {"slow1", "fast4"});
  q.framework.name = "test";
  q.framework.compute_scale = 2;
  q.framework.iteration_s = 0.005;
  const CapacityReport r = plan_capacity(q);
  const double seconds[] = {0.048 + 0.005, 0.012 + 0.005};
  for (size_t i = 0; i < 2; ++i) {
    const ClusterCapacity& c = r.clusters.at(i);
    ASSERT_TRUE(c.fastest.found) << c.cluster;
    EXPECT_NEAR(c.fastest.iteration_time_s, seconds[i], 1e-12) << c.cluster;
    EXPECT_EQ(c.fastest.plan.framework.compute_scale, 2);
    EXPECT_EQ(c.fastest.plan.framework.iteration_s, 0.005);
  }
}

// Two layers, two devices: one GPU takes 8 x 2 x 3 ms = 48 ms; dp = 2 halves the compute (24 ms)
// and adds an all-reduce; K = 2 pays (M + 1) stage slots plus 1 ms per transfer. Fastest: dp = 2
// on both GPUs; cheapest: one GPU (48 ms x 1 < (24 ms + all-reduce) x 2).
// (GPipe and 1F1B only: a zero-bubble schedule beats them all, below.)
TEST(Capacity, SearchesGpuCountPipelineAndDataParallelism) {
  TempDir dir;
  const Catalogue cat(dir);
  CapacityRequest q = cat.request("uniform:layers=2,fwd_ms=1,bwd_ms=2,param_kb=1024", {"pair"});
  q.schedules = {"gpipe", "1f1b"};
  const CapacityReport r = plan_capacity(q);
  const ClusterCapacity& c = r.clusters.at(0);
  ASSERT_TRUE(c.fastest.found);
  EXPECT_EQ(c.fastest.gpus, 2);
  EXPECT_EQ(c.fastest.plan.dp, 2);
  EXPECT_EQ(c.fastest.plan.num_stages(), 1);
  EXPECT_GT(c.fastest.iteration_time_s, 0.024);
  EXPECT_LT(c.fastest.iteration_time_s, 0.048);
  EXPECT_EQ(c.cheapest.gpus, 1);
  EXPECT_NEAR(c.cheapest.iteration_time_s, 0.048, 1e-12);
  EXPECT_LT(c.cheapest.cost, c.fastest.cost);
  // K x dp <= 2 and dp | 8: (1,1), (1,2), (2,1) x two schedules x the two default partitioners
  // (optimal, balance-time) x three checkpoint modes x the M from K dividing the replica batch
  // (1, 2, 4, 8; 1, 2, 4; 2, 4, 8): (4 + 3 + 3) x 12 layouts, each skipped by a bound, refused or
  // simulated.
  EXPECT_EQ(default_capacity_partitioners(), (std::vector<std::string>{"optimal", "balance-time"}));
  const SearchCounts& n = c.search;
  EXPECT_EQ(n.layouts, 120);
  EXPECT_EQ(n.memory_bound + n.time_bound + n.no_fit + n.refused + n.simulated, n.layouts);
  EXPECT_GT(n.simulated, 0);
  EXPECT_LT(n.simulated, n.layouts / 2);  // the bounds skip most
}

// The default search includes the zero-bubble and virtual-stage schedules. On the pair above,
// ZB-H2 over K = 2 hides the pipeline's bubble and the 1 ms transfers behind the weight halves
// of the backward: 4 micro-batches of 2 x 3 ms, 24 ms, one GPU's 48 ms halved, faster than dp = 2
// (24 ms plus the all-reduce). Asked for zbv alone, a 4-layer model runs two chunks on each GPU.
TEST(Capacity, SearchesTheZeroBubbleAndVirtualStageSchedules) {
  TempDir dir;
  const Catalogue cat(dir);
  EXPECT_EQ(default_capacity_schedules(),
            (std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv",
                                      "dualpipev"}));
  const CapacityReport r =
      plan_capacity(cat.request("uniform:layers=2,fwd_ms=1,bwd_ms=2,param_kb=1024", {"pair"}));
  const ClusterCapacity& c = r.clusters.at(0);
  ASSERT_TRUE(c.fastest.found);
  EXPECT_EQ(c.fastest.plan.schedule, "zb-h2");
  EXPECT_EQ(c.fastest.plan.num_stages(), 2);
  EXPECT_EQ(c.fastest.plan.dp, 1);
  EXPECT_NEAR(c.fastest.iteration_time_s, 0.024, 1e-9);

  CapacityRequest q = cat.request("uniform:layers=4,fwd_ms=1,bwd_ms=2,param_kb=1024", {"pair"});
  q.schedules = {"zbv"};
  const CapacityReport only_zbv = plan_capacity(q);
  const ClusterCapacity& v = only_zbv.clusters.at(0);
  ASSERT_TRUE(v.fastest.found) << v.note;
  EXPECT_EQ(v.fastest.plan.schedule, "zbv");
  EXPECT_EQ(v.fastest.plan.num_stages(), 4);
  EXPECT_EQ(v.fastest.plan.devices_per_replica(), 2);
  EXPECT_GE(v.fastest.plan.chunks, 3);  // M >= 2K - 1
}

// Stream sets of one GPU are one GPU: the cluster counts one, every plan on it is charged for one
// (hours x 1 x price), whether it uses one stream set or both.
TEST(Capacity, StreamSetsOfOneGpuArePricedAsOneGpu) {
  TempDir dir;
  const Catalogue cat(dir);
  const CapacityReport r =
      plan_capacity(cat.request("uniform:layers=2,fwd_ms=1,bwd_ms=2,param_kb=1024", {"streams"}));
  const ClusterCapacity& c = r.clusters.at(0);
  EXPECT_EQ(c.devices, 1);
  for (const CapacityChoice* choice : {&c.fastest, &c.cheapest}) {
    ASSERT_TRUE(choice->found);
    EXPECT_EQ(choice->gpus, 1);
    EXPECT_NEAR(choice->cost, choice->total_time_s / 3600 * 2, 1e-12);
  }
}

// 1 GiB of parameters per layer: parameters + gradients = 2 GiB per layer, 4 GiB in all, on
// 1 GiB devices, and during a backward one layer's parameter gradients before they are added
// into the gradients (1 GiB, core/memory.hpp). One device: 4 GiB over; two stages on the pair:
// 2 GiB over each.
TEST(Capacity, NamesTheDeviceThatRunsOutAndByHowMuch) {
  TempDir dir;
  const Catalogue cat(dir);
  const CapacityReport r = plan_capacity(
      cat.request("uniform:layers=2,fwd_ms=1,bwd_ms=2,param_kb=1048576", {"slow1", "pair"}));
  for (const auto& c : r.clusters) {
    EXPECT_FALSE(c.fits) << c.cluster;
    EXPECT_FALSE(c.fastest.found);
    EXPECT_EQ(c.oom_device, "device 0 (test-gpu #0)");
    EXPECT_DOUBLE_EQ(c.capacity_bytes, 1 * kGiB);
  }
  EXPECT_DOUBLE_EQ(r.clusters[0].over_bytes, 4 * kGiB);
  EXPECT_DOUBLE_EQ(r.clusters[0].need_bytes, 5 * kGiB);
  EXPECT_DOUBLE_EQ(r.clusters[1].over_bytes, 2 * kGiB);
  EXPECT_NE(r.clusters[0].note.find("does not fit: the leanest plan tried (K=1 dp=1 M=8 "),
            std::string::npos)
      << r.clusters[0].note;
  EXPECT_NE(r.clusters[0].note.find(
                "needs 5.00 GiB on device 0 (test-gpu #0), it has 1.00 GiB (over by 4.00 GiB)"),
            std::string::npos)
      << r.clusters[0].note;
  // The leanest of the pair is a pipeline over both devices, checkpointed.
  ASSERT_TRUE(r.clusters[1].has_leanest);
  EXPECT_EQ(r.clusters[1].leanest.devices_per_replica(), 2);
  EXPECT_EQ(r.clusters[1].leanest.checkpoint, Checkpoint::kAlways);
  EXPECT_TRUE(r.by_time.empty());
  EXPECT_TRUE(r.by_cost.empty());
}

TEST(Capacity, BudgetLimitsTheFastestPlan) {
  TempDir dir;
  const Catalogue cat(dir);
  CapacityRequest q =
      cat.request("uniform:layers=1,fwd_ms=1,bwd_ms=2", {"slow1", "fast2", "fast4"});
  q.budget = 0.015;
  const CapacityReport r = plan_capacity(q);
  EXPECT_EQ(r.by_time, std::vector<size_t>{0});
  EXPECT_EQ(r.by_cost.size(), 3u);
  EXPECT_NE(r.clusters[2].note.find("no plan within the budget 0.01"), std::string::npos);
}

TEST(Capacity, BrokenCataloguesAndRequestsAreOneLineErrors) {
  TempDir dir;
  const Catalogue cat(dir);
  const std::string path = dir.file("p.json");
  auto prices_error = [&](const std::string& entries) {
    write_text(path, R"({"format": "pipetwin.prices", "version": 1, "prices": [)" + entries + "]}");
    return input_error([&] { load_prices(path, cat.catalog); });
  };
  EXPECT_NE(prices_error(R"({"cluster": "slow1", "price_per_gpu_hour": -1})")
                .find("p.json: prices[0].price_per_gpu_hour: expected a positive number"),
            std::string::npos);
  EXPECT_NE(prices_error(R"({"cluster": "moon", "price_per_gpu_hour": 1})")
                .find("p.json: prices[0].cluster: unknown cluster \"moon\""),
            std::string::npos);
  EXPECT_NE(
      prices_error(
          R"({"cluster": "slow1", "price_per_gpu_hour": 1}, {"cluster": "slow1", "price_per_gpu_hour": 2})")
          .find("prices[1].cluster: cluster \"slow1\" priced twice"),
      std::string::npos);
  EXPECT_NE(prices_error(R"({"cluster": "slow1", "price": 1})")
                .find("p.json: prices[0].price: unknown field"),
            std::string::npos);
  CapacityRequest q = cat.request("uniform:layers=1", {"slow1"});
  q.prices.per_gpu_hour.erase("slow1");
  EXPECT_NE(
      input_error([&] { plan_capacity(q); }).find("--clusters: cluster \"slow1\" has no price"),
      std::string::npos);
  q = cat.request("uniform:layers=1", {"slow1"});
  q.batch = 0;
  EXPECT_NE(input_error([&] { plan_capacity(q); }).find("--batch must be positive (0 given)"),
            std::string::npos);
  q = cat.request("uniform:layers=1", {"slow1"});
  q.schedules = {"zigzag"};
  EXPECT_NE(input_error([&] { plan_capacity(q); }).find("unknown schedule \"zigzag\""),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin::sim
