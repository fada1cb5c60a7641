// Max-min fair rates by progressive filling (sim/network/max_min.hpp), against allocations
// worked out by hand (Bertsekas & Gallager, Data Networks, 6.5.2).
#include "sim/network/max_min.hpp"

#include <limits>

#include <gtest/gtest.h>

namespace pipetwin::sim::network {
namespace {

FlowPaths paths(const std::vector<std::vector<int32_t>>& p) {
  FlowPaths f;
  for (const auto& links : p) f.add(links);
  return f;
}

TEST(MaxMin, TwoFlowsOnOneLinkGetHalfEach) {
  const auto r = max_min_rates({10e9}, paths({{0}, {0}}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 5e9);
  EXPECT_DOUBLE_EQ(r[1], 5e9);
}

TEST(MaxMin, AFlowOverTwoLinksIsHeldByTheSlower) {
  const auto r = max_min_rates({12e9, 3e9}, paths({{0, 1}}));
  EXPECT_DOUBLE_EQ(r[0], 3e9);
}

// The two-link example: a long flow crosses links 0 and 1, one short flow uses each link.
// With capacities 1 and 1 every flow gets 1/2; with capacities 1 and 3, link 0 is the long
// flow's bottleneck (1/2 each there), and the short flow on link 1 takes what is left, 5/2.
TEST(MaxMin, ThreeFlowsOnTwoLinksTextbookAllocation) {
  const auto even = max_min_rates({1, 1}, paths({{0, 1}, {0}, {1}}));
  EXPECT_DOUBLE_EQ(even[0], 0.5);
  EXPECT_DOUBLE_EQ(even[1], 0.5);
  EXPECT_DOUBLE_EQ(even[2], 0.5);
  const auto r = max_min_rates({1, 3}, paths({{0, 1}, {0}, {1}}));
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 2.5);
}

// Parking lot: one flow over three unit links, one short flow per link — 1/2 each, every link
// full; with the middle link at 3 the two outer links still hold the long flow to 1/2.
TEST(MaxMin, ParkingLot) {
  const auto r = max_min_rates({1, 3, 1}, paths({{0, 1, 2}, {0}, {1}, {2}}));
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 2.5);
  EXPECT_DOUBLE_EQ(r[3], 0.5);
}

// Every link ends full or with all its flows bottlenecked elsewhere, and no flow exceeds a link.
TEST(MaxMin, AllocationIsFeasibleAndEveryFlowHasABottleneck) {
  const std::vector<double> cap{4, 2, 7, 1.5};
  const FlowPaths f = paths({{0, 1}, {0, 2}, {2, 3}, {1, 2, 3}, {0}, {2}});
  const auto r = max_min_rates(cap, f);
  std::vector<double> load(cap.size(), 0);
  for (int i = 0; i < f.num_flows(); ++i) {
    for (int32_t k = f.path_begin[static_cast<size_t>(i)];
         k < f.path_begin[static_cast<size_t>(i) + 1]; ++k)
      load[static_cast<size_t>(f.path_links[static_cast<size_t>(k)])] += r[static_cast<size_t>(i)];
  }
  for (size_t l = 0; l < cap.size(); ++l) EXPECT_LE(load[l], cap[l] * (1 + 1e-12)) << l;
  for (int i = 0; i < f.num_flows(); ++i) {
    bool bottleneck = false;  // a full link on its path where no flow runs faster than it
    for (int32_t k = f.path_begin[static_cast<size_t>(i)];
         k < f.path_begin[static_cast<size_t>(i) + 1]; ++k) {
      const auto l = static_cast<size_t>(f.path_links[static_cast<size_t>(k)]);
      if (load[l] < cap[l] * (1 - 1e-9)) continue;
      bool largest = true;
      for (int j = 0; j < f.num_flows(); ++j) {
        for (int32_t q = f.path_begin[static_cast<size_t>(j)];
             q < f.path_begin[static_cast<size_t>(j) + 1]; ++q) {
          if (static_cast<size_t>(f.path_links[static_cast<size_t>(q)]) == l &&
              r[static_cast<size_t>(j)] > r[static_cast<size_t>(i)] * (1 + 1e-9))
            largest = false;
        }
      }
      bottleneck = bottleneck || largest;
    }
    EXPECT_TRUE(bottleneck) << "flow " << i;
  }
}

TEST(MaxMin, InactiveFlowsAndEmptyPaths) {
  MaxMinSolver solver;
  std::vector<double> r;
  const std::vector<uint8_t> active{1, 0, 1};
  solver.solve({6}, paths({{0}, {0}, {}}), r, &active);
  EXPECT_DOUBLE_EQ(r[0], 6);
  EXPECT_DOUBLE_EQ(r[1], 0);
  EXPECT_EQ(r[2], std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace pipetwin::sim::network
