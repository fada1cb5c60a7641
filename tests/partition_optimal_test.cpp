// core/partition/optimal.cpp and pipedream_dp.cpp: both dynamic programs against brute force on
// small random instances, PipeDream's replication in closed form, memory limits and errors.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A random model: per-layer forward time, parameters and output; chain edges plus skip edges
// (probability `skip` per pair i -> j > i + 1), each carrying its producer's output.
Profile random_profile(std::mt19937& rng, int L, double skip) {
  std::uniform_real_distribution<double> ms(0.2, 5), kb(1, 4096), coin(0, 1);
  Profile p = test::synthetic(fmt::format("uniform:layers={}", L));
  for (auto& layer : p.layers) {
    const double f = ms(rng);
    for (auto& t : layer.timings) {
      t.forward_s = f * 1e-3 * t.micro_batch;
      t.backward_s = 2 * t.forward_s;
      t.recompute_s = t.forward_s;
    }
    layer.param_bytes = kb(rng) * 1024;
    layer.output_bytes_per_sample = layer.saved_bytes_per_sample = kb(rng) * 1024;
  }
  for (int i = 0; i + 1 < L; ++i) {
    for (int j = i + 1; j < L; ++j) {
      if (j == i + 1 || coin(rng) < skip) {
        p.edges.push_back({i, j, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
      }
    }
  }
  return p;
}

// Every composition of L into K positive parts.
void compositions(int L, int K, std::vector<int>& prefix, const std::function<void()>& visit) {
  if (K == 1) {
    prefix.push_back(L);
    visit();
    prefix.pop_back();
    return;
  }
  for (int first = 1; first <= L - K + 1; ++first) {
    prefix.push_back(first);
    compositions(L - first, K - 1, prefix, visit);
    prefix.pop_back();
  }
}

bool fits(const PartitionRequest& r, const Partition& p) {
  for (double need : device_memory_bytes(r, p)) {
    if (r.memory_limit_bytes > 0 && need > r.memory_limit_bytes) return false;
  }
  return true;
}

// The smallest bottleneck_time over all contiguous splits that fit (+inf: none).
double brute_force_optimal(const PartitionRequest& r) {
  double best = kInf;
  std::vector<int> sizes;
  compositions(r.cost->num_layers(), r.num_stages, sizes, [&] {
    const Partition p = contiguous_partition(sizes);
    if (fits(r, p)) best = std::min(best, bottleneck_time(r, p));
  });
  return best;
}

void check_optimal_against_brute_force(const Cluster& cluster, double skip, unsigned seed) {
  std::mt19937 rng(seed);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int L = std::uniform_int_distribution<int>(1, 10)(rng);
    const CostModel cm(random_profile(rng, L, skip), cluster);
    PartitionRequest r;
    r.cost = &cm;
    r.num_stages = std::uniform_int_distribution<int>(1, std::min(L, 4))(rng);
    r.micro_batch = std::uniform_int_distribution<int>(1, 8)(rng);
    r.in_flight = std::uniform_int_distribution<int>(1, 4)(rng);
    const double total = stage_memory_bytes(r, contiguous_partition({L}).stages[0]);
    if (trial % 3 != 0) {
      r.memory_limit_bytes = total / r.num_stages * std::uniform_real_distribution<>(0.8, 2)(rng);
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " L=" << L << " K=" << r.num_stages);
    const double expected = brute_force_optimal(r);
    if (expected == kInf) {
      ++infeasible;
      EXPECT_THAT(input_error([&] { make_partitioner("optimal")->partition(r); }),
                  ::testing::HasSubstr("partitioner optimal: no split into"));
      continue;
    }
    ++feasible;
    const Partition p = make_partitioner("optimal")->partition(r);
    ASSERT_EQ(p.num_stages(), r.num_stages);
    EXPECT_TRUE(fits(r, p));
    EXPECT_NEAR(bottleneck_time(r, p), expected, 1e-12 * expected);
  }
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 0);
}

TEST(Optimal, MatchesBruteForceOnChainsAcrossNodes) {
  // Chains: every stage receives from its neighbour only, so the program is exact for
  // bottleneck_time on any links, here two nodes with slow inter-node links and latency.
  check_optimal_against_brute_force(test::two_level_cluster(2, 2, 2e9, 5e-6, 2e8, 5e-5), 0, 11);
}

TEST(Optimal, MatchesBruteForceWithSkipConnections) {
  // Skip edges: exact when links are alike and latency-free (the header's condition).
  check_optimal_against_brute_force(test::two_level_cluster(1, 8, 1e9, 0, 1e9, 0), 0.3, 12);
}

TEST(Optimal, ErrorNamesTheStageOfTheLeanestSplit) {
  // Parameters + gradients of 2, 2, 2, 2, 2, 2, 8, 8 GiB: the 2-split with the smallest largest
  // stage is [0, 6) = 12 GiB | [6, 8) = 16 GiB.
  const CostModel cm(test::synthetic("uniform:param_kb=1048576/1048576/1048576/1048576/1048576/"
                                     "1048576/4194304/4194304"),
                     test::two_level_cluster(1, 8, 1e10, 1e-6, 1e10, 1e-6));
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  r.memory_limit_bytes = 15 * kGiB;
  EXPECT_EQ(input_error([&] { make_partitioner("optimal")->partition(r); }),
            "partitioner optimal: no split into 2 contiguous stages fits the 15.00 GiB limit; the "
            "best still needs 16.00 GiB on stage 1");
  r.memory_limit_bytes = 16 * kGiB;
  EXPECT_THAT(make_partitioner("optimal")->partition(r).balance(), ElementsAre(6, 2));
}

// PipeDream's objective for contiguous stages with replica counts, written out independently:
// max over stages of max(compute, all-reduce / M) / m, and 2 C_i at every border.
double pipedream_objective(const PartitionRequest& r, const Partition& p) {
  const CostModel& cm = *r.cost;
  double worst = 0;
  int machine = 0;
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& layers = p.stages[static_cast<size_t>(s)];
    const int m = p.replicas_of(s);
    const StageCost c = cm.stage_cost(layers, r.micro_batch);
    std::vector<int> devices;
    for (int k = 0; k < m; ++k) devices.push_back(machine + k);
    const double sync = cm.allreduce_s(c.param_bytes, devices) / r.micro_batches;
    worst = std::max(worst, std::max(c.forward_s + c.backward_s, sync) / m);
    if (s > 0) {
      double cut = 0;
      for (const auto& e : cm.graph().edges()) {
        if (e.from < layers.front() && e.to >= layers.front()) cut += e.bytes_per_sample;
      }
      if (cut > 0)
        worst = std::max(worst, 2 * cm.transfer_s(cut * r.micro_batch, machine - 1, machine));
    }
    machine += m;
  }
  return worst;
}

double brute_force_pipedream(const PartitionRequest& r) {
  double best = kInf;
  const int L = r.cost->num_layers(), P = r.num_stages;
  for (int S = 1; S <= std::min(L, P); ++S) {
    std::vector<int> sizes;
    compositions(L, S, sizes, [&] {
      for (int spare = 0; spare <= P - S; ++spare) {
        std::vector<int> reps;
        compositions(S + spare, S, reps, [&] {
          Partition p = contiguous_partition(sizes);
          p.replicas = reps;
          if (fits(r, p)) best = std::min(best, pipedream_objective(r, p));
        });
      }
    });
  }
  return best;
}

TEST(PipeDreamDp, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(2019);
  int replicated = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int L = std::uniform_int_distribution<int>(1, 7)(rng);
    const Cluster cluster = test::two_level_cluster(2, 2, 4e9, 2e-6, 5e8, 2e-5);
    const CostModel cm(random_profile(rng, L, 0.25), cluster);
    PartitionRequest r;
    r.cost = &cm;
    r.num_stages = std::uniform_int_distribution<int>(1, std::min(L, 4))(rng);
    r.micro_batch = std::uniform_int_distribution<int>(1, 8)(rng);
    r.micro_batches = std::uniform_int_distribution<int>(1, 4)(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " L=" << L << " P=" << r.num_stages);
    const PipeDreamPlan plan = pipedream_plan(r);
    const double expected = brute_force_pipedream(r);
    EXPECT_NEAR(plan.bottleneck_s, expected, 1e-12 * expected);
    EXPECT_NEAR(pipedream_objective(r, plan.partition), plan.bottleneck_s, 1e-12 * expected);
    int machines = 0;
    for (int s = 0; s < plan.partition.num_stages(); ++s) machines += plan.partition.replicas_of(s);
    EXPECT_LE(machines, r.num_stages);
    if (machines > plan.partition.num_stages()) ++replicated;
  }
  EXPECT_GT(replicated, 5);  // the instances do exercise replication
}

Profile heavy_last_layer(double param_kb) {
  // Per sample forward + backward: 3, 3, 3 and 27 ms.
  return test::synthetic(fmt::format("uniform:fwd_ms=1/1/1/9,param_kb={}", param_kb));
}

TEST(PipeDreamDp, ReplicatesWhenGradientsAreCheap) {
  // On two machines the best pipeline is [0, 3) | [3] with a 27 ms bottleneck; one stage on both
  // machines takes 36 / 2 = 18 ms while its all-reduce (1 KiB a layer) is negligible.
  const CostModel cm(heavy_last_layer(1), test::two_level_cluster(1, 2, 1e10, 0, 1e10, 0));
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  const PipeDreamPlan plan = pipedream_plan(r);
  EXPECT_THAT(plan.partition.balance(), ElementsAre(4));
  EXPECT_THAT(plan.partition.replicas, ElementsAre(2));
  EXPECT_NEAR(plan.bottleneck_s, 18e-3, 1e-12);
  EXPECT_EQ(plan.partition.num_devices(), 2);
}

TEST(PipeDreamDp, PipelinesWhenTheAllReduceDominatesUnlessAmortised) {
  // 200 MB of parameters per layer: the 2-way ring moves 800 MB in 80 ms over 10 GB/s, so one
  // replicated stage takes max(36, 80) / 2 = 40 ms > 27 ms of the pipeline. With the all-reduce
  // shared by M = 4 micro-batches it is max(36, 20) / 2 = 18 ms again.
  const CostModel cm(heavy_last_layer(200e6 / 1024),
                     test::two_level_cluster(1, 2, 1e10, 0, 1e10, 0));
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  PipeDreamPlan plan = pipedream_plan(r);
  EXPECT_THAT(plan.partition.balance(), ElementsAre(3, 1));
  EXPECT_TRUE(plan.partition.replicas == std::vector<int>({1, 1}));
  EXPECT_NEAR(plan.bottleneck_s, 27e-3, 1e-9);
  r.micro_batches = 4;
  plan = pipedream_plan(r);
  EXPECT_THAT(plan.partition.replicas, ElementsAre(2));
  EXPECT_NEAR(plan.bottleneck_s, 18e-3, 1e-9);
}

TEST(PipeDreamDp, AsPlannedPricesTheMicroBatchThePlannerBuilds) {
  // Forward + backward 3, 3, 3 and 27 ms a sample, 1 KiB of parameters a layer, two machines. The
  // paper's program replicates the model at any micro-batch: (1/2) 36 b ms. The planner runs two
  // replicas as dp = 2 with b / 2 samples each, which needs an even b; at b = 1 it can only
  // pipeline, [0, 3) | [3] at 27 ms.
  const CostModel cm(heavy_last_layer(1), test::two_level_cluster(1, 2, 1e10, 0, 1e10, 0));
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  r.micro_batch = 1;
  const PipeDreamOptions planned{true, PipeDreamPricing::kAsPlanned};
  EXPECT_THAT(pipedream_plan(r).partition.replicas, ElementsAre(2));
  EXPECT_NEAR(pipedream_plan(r).bottleneck_s, 18e-3, 1e-12);
  PipeDreamPlan plan = pipedream_plan(r, planned);
  EXPECT_THAT(plan.partition.balance(), ElementsAre(3, 1));
  EXPECT_TRUE(plan.partition.replicas.empty());
  EXPECT_NEAR(plan.bottleneck_s, 27e-3, 1e-9);
  // At b = 2 both replicate; as planned a micro-batch of two takes one sample's 36 ms, plus the
  // part of the all-reduce (4 KiB in one bucket, 0.4 us) past the backward's end: all of it.
  r.micro_batch = 2;
  plan = pipedream_plan(r, planned);
  EXPECT_THAT(plan.partition.replicas, ElementsAre(2));
  EXPECT_NEAR(plan.bottleneck_s, 36e-3 + 4096 / 1e10, 1e-9);
  EXPECT_DOUBLE_EQ(planned_period_s(r, plan.partition), plan.bottleneck_s);
}

TEST(PipeDreamDp, RespectsMemoryWhereItsOwnPlanWouldNot) {
  // 1 GiB of parameters a layer (2 GiB with gradients); free all-reduce. PipeDream's own plan
  // replicates all four layers (8 GiB per replica); under a 6 GiB limit ours pipelines.
  const CostModel cm(heavy_last_layer(1048576), test::two_level_cluster(1, 2, 1e18, 0, 1e18, 0));
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  r.memory_limit_bytes = 6 * kGiB;
  const PipeDreamPlan blind = pipedream_plan(r, PipeDreamOptions{false});
  EXPECT_THAT(blind.partition.replicas, ElementsAre(2));
  EXPECT_EQ(blind.worst_stage, 0);
  EXPECT_NEAR(blind.over_limit_bytes, 2 * kGiB, 1);
  const PipeDreamPlan aware = pipedream_plan(r);
  EXPECT_THAT(aware.partition.balance(), ElementsAre(3, 1));
  EXPECT_EQ(aware.over_limit_bytes, 0);
  EXPECT_NEAR(aware.bottleneck_s, 27e-3, 1e-9);
  // The registry's partitioner is the memory-aware one.
  EXPECT_THAT(make_partitioner("pipedream-dp")->partition(r).balance(), ElementsAre(3, 1));
  EXPECT_THAT(make_pipedream_dp_partitioner(PipeDreamOptions{false})->partition(r).replicas,
              ElementsAre(2));
  r.memory_limit_bytes = 1 * kGiB;  // not even one layer fits
  EXPECT_EQ(input_error([&] { pipedream_plan(r); }),
            "partitioner pipedream-dp: no pipeline on 2 devices fits the 1.00 GiB limit; "
            "PipeDream's own plan needs 8.00 GiB on stage 0");
}

}  // namespace
}  // namespace pipetwin
