// core/partition/: uniform (the EPFL report's split), the Bárány–Grinberg block partition behind
// balance-time and balance-size, and the partitioners' errors.
#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/partition/block_partition.hpp"
#include "core/partition/partitioner.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Cluster cluster() {
  return test::two_level_cluster(1, 8, 1e10, 1e-6, 1e10, 1e-6);
}

Partition run(const std::string& name, const CostModel& cm, int stages, double limit = 0) {
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = stages;
  r.memory_limit_bytes = limit;
  return make_partitioner(name)->partition(r);
}

// Block sums of `sizes` over `w`.
std::vector<double> block_sums(const std::vector<double>& w, const std::vector<int>& sizes) {
  std::vector<double> sums;
  size_t i = 0;
  for (int n : sizes) {
    double s = 0;
    for (int j = 0; j < n; ++j) s += w[i++];
    sums.push_back(s);
  }
  return sums;
}

double spread(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
}

void expect_contiguous_cover(const Partition& p, int layers) {
  int next = 0;
  for (const auto& s : p.stages) {
    ASSERT_FALSE(s.empty());
    for (int l : s) EXPECT_EQ(l, next++);
  }
  EXPECT_EQ(next, layers);
}

TEST(Uniform, EpflReportSplitsElevenLayersFourFourThree) {
  const CostModel cm(test::synthetic("uniform:layers=11"), cluster());
  const Partition p = run("uniform", cm, 3);
  EXPECT_THAT(p.balance(), ElementsAre(4, 4, 3));
  EXPECT_THAT(p.stages[0], ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(p.stages[1], ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(p.stages[2], ElementsAre(8, 9, 10));
}

TEST(Uniform, ExtraLayersGoToTheFirstStages) {
  const CostModel cm(test::synthetic("uniform:layers=10"), cluster());
  EXPECT_THAT(run("uniform", cm, 4).balance(), ElementsAre(3, 3, 2, 2));
  EXPECT_THAT(run("uniform", cm, 5).balance(), ElementsAre(2, 2, 2, 2, 2));
  EXPECT_THAT(run("uniform", cm, 10).balance(), ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 1, 1));
  EXPECT_THAT(run("uniform", cm, 1).balance(), ElementsAre(10));
}

TEST(BlockPartition, BaranyGrinbergGuaranteeOnRandomSequences) {
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<int> length(1, 40);
  std::uniform_real_distribution<double> weight(0, 10);
  std::uniform_int_distribution<int> kind(0, 9);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = length(rng);
    const int k = std::uniform_int_distribution<int>(1, std::min(n, 8))(rng);
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w) {
      const int c = kind(rng);
      x = c == 0 ? 0 : (c == 1 ? 1000 * weight(rng) : weight(rng));  // zeros and outliers too
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n=" << n << " k=" << k);
    std::vector<int> sizes;
    ASSERT_NO_THROW(sizes = block_partition(w, k));
    ASSERT_EQ(static_cast<int>(sizes.size()), k);
    for (int s : sizes) ASSERT_GE(s, 1) << "blocks must not be empty";
    ASSERT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0), n);
    const double largest = *std::max_element(w.begin(), w.end());
    // Every pair of block sums differs by at most the largest element.
    EXPECT_LE(spread(block_sums(w, sizes)), largest * (1 + 1e-9) + 1e-12);
  }
}

TEST(BlockPartition, EqualWeightsGiveSizesWithinOne) {
  // With equal weights the guarantee says block sizes differ by at most one.
  for (int n = 1; n <= 30; ++n) {
    for (int k = 1; k <= n; ++k) {
      const auto sizes = block_partition(std::vector<double>(static_cast<size_t>(n), 2.5), k);
      const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
      EXPECT_LE(*hi - *lo, 1) << "n=" << n << " k=" << k;
      EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), 0), n);
    }
  }
}

TEST(BlockPartition, ArgumentErrors) {
  try {
    block_partition({1, 2, 3}, 0);
    ADD_FAILURE() << "no error for 0 partitions";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "partitions must be positive (0 < 1)");
  }
  try {
    block_partition({1, 2}, 3);
    ADD_FAILURE() << "no error for more partitions than elements";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "sequence is shorter than intended partitions (2 < 3)");
  }
}

TEST(BalanceTime, BeatsUniformOnUnequalLayers) {
  // Per-sample forward + backward: 3 ms for six layers, 12 ms for the last two. Uniform puts
  // 3+3+12+12 = 30 ms on stage 1.
  const CostModel cm(test::synthetic("uniform:fwd_ms=1/1/1/1/1/1/4/4"), cluster());
  auto stage_times = [&](const Partition& p) {
    std::vector<double> t;
    for (const auto& s : p.stages) {
      const StageCost c = cm.stage_cost(s, 1);
      t.push_back(c.forward_s + c.backward_s);
    }
    return t;
  };
  const auto uniform = stage_times(run("uniform", cm, 2));
  EXPECT_NEAR(*std::max_element(uniform.begin(), uniform.end()), 30e-3, 1e-12);
  const Partition p = run("balance-time", cm, 2);
  expect_contiguous_cover(p, 8);
  const auto balanced = stage_times(p);
  EXPECT_LT(*std::max_element(balanced.begin(), balanced.end()), 30e-3 - 1e-9);
  EXPECT_LE(spread(balanced), 12e-3 + 1e-12);  // within one layer (the largest) of each other
}

TEST(BalanceSize, BeatsUniformOnUnequalLayers) {
  // Parameters 1 MiB for six layers, 4 MiB for the last two; parameters + gradients per stage.
  const CostModel cm(test::synthetic("uniform:param_kb=1024/1024/1024/1024/1024/1024/4096/4096"),
                     cluster());
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  auto memory = [&](const Partition& p) {
    std::vector<double> m;
    for (const auto& s : p.stages) m.push_back(stage_memory_bytes(r, s));
    return m;
  };
  const auto uniform = memory(run("uniform", cm, 2));
  EXPECT_EQ(*std::max_element(uniform.begin(), uniform.end()), 2 * 10 * kMiB);
  const Partition p = run("balance-size", cm, 2);
  expect_contiguous_cover(p, 8);
  const auto balanced = memory(p);
  EXPECT_LT(*std::max_element(balanced.begin(), balanced.end()), 2 * 10 * kMiB);
  EXPECT_LE(spread(balanced), 2 * 4 * kMiB);
}

TEST(Partitioners, EqualLayersSplitEvenlyByEveryPartitioner) {
  const CostModel cm(test::synthetic("uniform:layers=12,param_kb=64,act_kb=8"), cluster());
  for (const auto& name : partitioner_names()) {
    EXPECT_THAT(run(name, cm, 4).balance(), ElementsAre(3, 3, 3, 3)) << name;
  }
}

TEST(Partitioners, StageMemoryCountsInFlightActivations) {
  // Stage {0} at 4 samples: input 1 KiB and saved 2 KiB per sample, 3 micro-batches in flight:
  // 3 * (4 + 8) KiB; no parameters.
  const CostModel cm(test::synthetic("uniform:layers=2,input_kb=1,saved_kb=2"), cluster());
  PartitionRequest r;
  r.cost = &cm;
  r.micro_batch = 4;
  r.in_flight = 3;
  EXPECT_EQ(stage_memory_bytes(r, {0}), 3 * 12 * 1024.0);
}

TEST(PartitionErrors, StageCountOutOfRange) {
  const CostModel cm(test::synthetic("uniform:layers=4"), cluster());
  for (const auto& name : partitioner_names()) {
    EXPECT_EQ(input_error([&] { run(name, cm, 0); }),
              "partitioner " + name + ": partitions must be positive (0 < 1)");
    EXPECT_EQ(input_error([&] { run(name, cm, 5); }),
              "partitioner " + name + ": model has fewer layers than stages (4 < 5)");
  }
}

TEST(PartitionErrors, LayersOutOfDataFlowOrder) {
  Profile p = test::synthetic("uniform:layers=3");
  p.edges = {{1, 0, 8}, {0, 2, 8}};
  const CostModel cm(p, cluster());
  EXPECT_EQ(input_error([&] { run("balance-time", cm, 2); }),
            "partitioner balance-time: contiguous partitioning needs layers in data-flow order "
            "(the profile has an edge to an earlier layer)");
}

TEST(PartitionErrors, MemoryLimitNamesTheStage) {
  // 1 GiB of parameters per layer, 4 GiB for the last two: uniform's stage 1 holds
  // 2 * (1 + 1 + 4 + 4) = 20 GiB of parameters and gradients, stage 0 8 GiB.
  const CostModel cm(test::synthetic("uniform:param_kb=1048576/1048576/1048576/1048576/1048576/"
                                     "1048576/4194304/4194304"),
                     cluster());
  EXPECT_EQ(input_error([&] { run("uniform", cm, 2, 16 * kGiB); }),
            "partitioner uniform: stage 1 needs 20.00 GiB, over the 16.00 GiB limit");
  EXPECT_NO_THROW(run("uniform", cm, 2, 20 * kGiB));
  EXPECT_THAT(input_error([&] { run("balance-time", cm, 2, 4 * kGiB); }),
              HasSubstr("over the 4.00 GiB limit"));
}

TEST(PartitionErrors, UnknownPartitioner) {
  const std::string error = input_error([] { make_partitioner("metis2"); });
  EXPECT_THAT(error, ::testing::StartsWith("unknown partitioner \"metis2\" (known: uniform, "
                                           "balance-time, balance-size"));
  for (const auto& name : partitioner_names()) EXPECT_THAT(error, HasSubstr(name));
  for (const auto& name : partitioner_names()) EXPECT_EQ(make_partitioner(name)->name(), name);
}

}  // namespace
}  // namespace pipetwin
