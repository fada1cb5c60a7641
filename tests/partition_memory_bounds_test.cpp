// The shortcuts partitioners take through the schedule model (core/partition/stage_memory.hpp,
// range_terms.hpp) against the full computations they stand in for: most_graphs() against the
// walk's points, HeldSet::within() and its bounds against bytes(), RangeFits against
// RangeScanner::memory(), and the memory-aware partitioners against a min-max program that
// prices every range's memory (the program as written before its memory checks were deferred).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/partition/block_partition.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/range_terms.hpp"
#include "core/partition/stage_memory.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "tests/sim_test_util.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every synchronous schedule capacity searches, with its chunks per device, and two of the
// asynchronous ones.
struct Case {
  std::string schedule;
  int v;
};
const std::vector<Case> kCases = {{"gpipe", 1},     {"1f1b", 1},      {"interleaved-1f1b", 2},
                                  {"zb-h1", 1},     {"zb-h2", 1},     {"zbv", 2},
                                  {"dualpipev", 2}, {"pipedream", 1}, {"ftpipe-async", 1}};

TEST(StageMemoryGraphs, MostGraphsEqualTheWalksForEveryScheduleAndCheckpointMode) {
  int checked = 0;
  for (const Case& c : kCases) {
    for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
      for (int devices = 1; devices <= 4; ++devices) {
        for (int M : {1, 2, 3, 4, 5, 8, 9}) {
          const int K = devices * c.v;
          const StageMemory model({c.schedule, M, ck, 0, c.v});
          std::vector<int> fast;
          try {
            fast = model.most_graphs(K);
          } catch (const InputError&) {
            continue;  // the schedule refuses this M (zbv, dualpipev, interleaved)
          }
          ASSERT_EQ(fast.size(), static_cast<size_t>(K));
          for (int k = 0; k < K; ++k) {
            int most = 0;
            for (const HeldCounts& p : model.held(k, K).points()) most = std::max(most, p.graphs);
            EXPECT_EQ(fast[static_cast<size_t>(k)], most)
                << c.schedule << " ck=" << checkpoint_name(ck) << " K=" << K << " M=" << M
                << " stage " << k;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

StageBytes random_bytes(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1e9);
  StageBytes b;
  b.static_bytes = u(rng);
  b.input = u(rng);
  b.saved = u(rng) * 4;
  b.param = u(rng) / 2;
  b.forward_ws = u(rng);
  b.forward_nograd_ws = u(rng) / 3;
  b.backward_ws = u(rng) * 2;
  b.received_in = rng() % 3 == 0 ? 0 : u(rng);
  b.received_out = rng() % 3 == 0 ? 0 : u(rng);
  return b;
}

TEST(StageMemoryBounds, WithinAnswersAsBytesAndTheBoundsHold) {
  std::mt19937 rng(7);
  int decided = 0;
  for (const Case& c : kCases) {
    const int K = 4 * c.v;
    const StageMemory model({c.schedule, 8, Checkpoint::kExceptLast, 0, c.v});
    for (int trial = 0; trial < 200; ++trial) {
      StageBytes b = random_bytes(rng);
      if (trial % 50 == 0) b.param = -1;  // a negative factor: no bounds, the points decide
      const PricedBytes priced(b);
      const double everywhere = model.lower_everywhere(priced, K);
      for (int k = 0; k < K; ++k) {
        const HeldSet& h = model.held(k, K);
        const double exact = h.bytes(b);
        if (priced.nonnegative) {
          EXPECT_GE(h.upper(priced), exact);
          EXPECT_LE(h.lower(priced), exact);
          EXPECT_LE(everywhere, exact);
          EXPECT_GE(model.any_position(K).upper(priced), exact);
        } else {
          EXPECT_TRUE(std::isnan(h.upper(priced)));
        }
        for (double limit : {exact, std::nextafter(exact, 0.0), exact * 0.9, exact * 1.1,
                             h.lower(priced), h.upper(priced), 0.0, kInf}) {
          EXPECT_EQ(h.within(priced, limit), !(exact > limit))
              << c.schedule << " stage " << k << " limit " << limit;
          ++decided;
        }
      }
    }
  }
  EXPECT_GT(decided, 10000);
}

// A chain of L layers with skips on some, on a 4-device ideal cluster.
Profile test_profile(std::mt19937& rng, int L, bool skips) {
  Profile p = test::random_chain(rng, L);
  for (int i = 0; skips && i + 2 < L; ++i) {
    if (rng() % 3 == 0)
      p.edges.push_back({i, i + 2, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
  }
  return p;
}

TEST(RangeFits, AnswersAsTheScannersMemoryForEveryRangeAndStage) {
  std::mt19937 rng(3);
  int asked = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const Case& c = kCases[static_cast<size_t>(trial) % kCases.size()];
    const int L = std::uniform_int_distribution<int>(4, 12)(rng);
    const Profile p = test_profile(rng, L, trial % 2 == 1);
    const CostModel cm(p, pipetwin::testing::ideal_cluster(8), CostOptions{});
    const StageMemory model({c.schedule, 4, Checkpoint::kNone, 0, c.v});
    PartitionRequest r;
    r.cost = &cm;
    r.micro_batch = 2;
    r.memory = &model;
    const RangeScanner scan(r);
    const int K = 2 * c.v;
    // Limits from the smallest to the largest need of a range.
    std::vector<double> needs;
    for (int i = 0; i < L; ++i) {
      RangeTerms t = scan.start(i);
      for (int j = i; j < L; ++j) {
        scan.extend(t);
        for (int k = 0; k < K; ++k) needs.push_back(scan.memory(t, k, K));
      }
    }
    std::sort(needs.begin(), needs.end());
    for (size_t q : {size_t{0}, needs.size() / 4, needs.size() / 2, needs.size() - 1}) {
      const double limit = needs[q];
      RangeFits fits(scan, K, limit);
      for (int i = 0; i < L; ++i) {
        RangeTerms t = scan.start(i);
        for (int j = i; j < L; ++j) {
          scan.extend(t);
          for (int k = 0; k < K; ++k) {
            EXPECT_EQ(fits(t, k), !(scan.memory(t, k, K) > limit))
                << c.schedule << " [" << i << ", " << j << "] stage " << k;
            ++asked;
          }
        }
      }
    }
  }
  EXPECT_GT(asked, 1000);
}

// min_max_split as it was before the memory check moved into `allowed`: every range priced, its
// memory first (+inf over the limit).
template <class Cost>
std::vector<int> reference_split(const RangeScanner& scan, int K, Cost cost) {
  struct Score {
    double worst = kInf, squares = kInf;
  };
  auto better = [](const Score& a, const Score& b) {
    const double tol = 1e-12 * std::max(std::abs(a.worst), std::abs(b.worst));
    if (a.worst < b.worst - tol) return true;
    if (a.worst > b.worst + tol) return false;
    return a.squares < b.squares;
  };
  const int L = scan.num_layers();
  const auto row = static_cast<size_t>(L) + 1;
  std::vector<Score> best((static_cast<size_t>(K) + 1) * row);
  std::vector<int> from(best.size(), -1);
  auto at = [&](int k, int j) { return static_cast<size_t>(k) * row + static_cast<size_t>(j); };
  best[at(0, 0)] = {0, 0};
  for (int i = 0; i < L; ++i) {
    RangeTerms t = scan.start(i);
    for (int j = i + 1; j <= L; ++j) {
      scan.extend(t);
      for (int k = 1; k <= K; ++k) {
        const Score& prev = best[at(k - 1, i)];
        if (std::isinf(prev.worst)) continue;
        const double c = cost(t, k - 1);
        if (std::isinf(c)) continue;
        const Score cand{std::max(prev.worst, c), prev.squares + c * c};
        if (better(cand, best[at(k, j)])) {
          best[at(k, j)] = cand;
          from[at(k, j)] = i;
        }
      }
    }
  }
  if (std::isinf(best[at(K, L)].worst)) return {};
  std::vector<int> sizes(static_cast<size_t>(K));
  for (int k = K, j = L; k > 0; --k) {
    const int i = from[at(k, j)];
    sizes[static_cast<size_t>(k) - 1] = j - i;
    j = i;
  }
  return sizes;
}

std::vector<int> sizes_of(const Partition& p) {
  std::vector<int> sizes;
  for (const auto& s : p.stages) sizes.push_back(static_cast<int>(s.size()));
  return sizes;
}

TEST(MemoryAwarePartitioners, OptimalAndBalanceEqualThePricingOfEveryRange) {
  std::mt19937 rng(5);
  int compared = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const Case& c = kCases[static_cast<size_t>(trial) % kCases.size()];
    const int L = std::uniform_int_distribution<int>(6, 16)(rng);
    const Profile p = test_profile(rng, L, trial % 3 == 2);
    const CostModel cm(p, pipetwin::testing::ideal_cluster(8), CostOptions{});
    const StageMemory model({c.schedule, 4, Checkpoint::kExceptLast, 0, c.v});
    PartitionRequest r;
    r.cost = &cm;
    r.num_stages = 2 * c.v;
    r.micro_batch = 2;
    r.micro_batches = 4;
    r.memory = &model;
    const RangeScanner scan(r);
    const int K = r.num_stages;
    const LeanestSplit lean = leanest_split(scan, K);
    std::vector<double> prefix{0};
    for (int l = 0; l < L; ++l)
      prefix.push_back(prefix.back() + cm.forward_s(l, r.micro_batch) +
                       cm.backward_s(l, r.micro_batch));
    for (double scale : {0.99, 1.0, 1.05, 1.3, 2.0, 10.0}) {
      r.memory_limit_bytes = lean.need_bytes * scale;
      auto memory_first = [&](auto time) {
        return [&, time](const RangeTerms& t, int k) {
          return scan.memory(t, k, K) > r.memory_limit_bytes ? kInf : time(t, k);
        };
      };
      auto period = [&](const RangeTerms& t, int k) {
        const double b = r.micro_batch;
        const double in = std::max(0.0, t.in_bytes) * b, out = std::max(0.0, t.out_bytes) * b;
        const double fwd = in > 0 ? cm.transfer_s(in, k - 1, k) : 0;
        const double bwd = out > 0 ? cm.transfer_s(out, k, k + 1) : 0;
        return stage_period(t.compute_s, fwd, bwd);
      };
      auto weight = [&](const RangeTerms& t, int) {
        return prefix[static_cast<size_t>(t.end)] - prefix[static_cast<size_t>(t.begin)];
      };
      const std::vector<int> want_optimal = reference_split(scan, K, memory_first(period));
      const std::vector<int> want_balance = reference_split(scan, K, memory_first(weight));
      try {
        EXPECT_EQ(sizes_of(make_partitioner("optimal")->partition(r)), want_optimal)
            << c.schedule << " L=" << L << " scale " << scale;
      } catch (const NoFitError&) {
        // No split, or the split the finished partition's check refuses (its stages priced from
        // their costs, which round apart from the ranges' at a limit equal to the need).
        EXPECT_TRUE(want_optimal.empty() || !fits_memory(r, contiguous_partition(want_optimal)))
            << c.schedule << " scale " << scale;
      }
      // balance-time: the block partition when it fits, else the constrained program's split.
      std::vector<double> weights;
      for (int l = 0; l < L; ++l)
        weights.push_back(prefix[static_cast<size_t>(l) + 1] - prefix[static_cast<size_t>(l)]);
      const Partition block = contiguous_partition(block_partition(weights, K));
      const bool block_fits = fits_memory(r, block);
      try {
        EXPECT_EQ(sizes_of(make_partitioner("balance-time")->partition(r)),
                  block_fits ? sizes_of(block) : want_balance)
            << c.schedule << " L=" << L << " scale " << scale;
      } catch (const NoFitError&) {
        EXPECT_TRUE(!block_fits && want_balance.empty()) << c.schedule << " scale " << scale;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 240);
}

}  // namespace
}  // namespace pipetwin
