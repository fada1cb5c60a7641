// core/elastic/autocache: lazy replacement as in Figure 8 (no sample runs through a frozen layer
// twice), memory budget and disk spill, and the decision to cache.
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/elastic/autocache.hpp"
#include "core/elastic/elastic_sampler.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;
using ::testing::ElementsAre;

TEST(AutoCache, Figure8LazyReplacement) {
  // "T1 freezes 3 layers, T2 freezes 4 layers ... the cache still holds cached activations from
  // layer 3, which must be replaced by activations from layer 7": boundary 3 -> 7.
  ActivationCache cache(4);
  cache.set_boundary(3, 100);
  SampleWork w = cache.use(2);  // first epoch at T1: nothing cached
  EXPECT_EQ(w.cached_at, -1);
  EXPECT_EQ(w.compute_from, 0);
  EXPECT_EQ(w.compute_to, 3);
  EXPECT_EQ(w.write, Tier::kMemory);
  w = cache.use(2);  // next epoch: a hit
  EXPECT_EQ(w.cached_at, 3);
  EXPECT_EQ(w.read, Tier::kMemory);
  EXPECT_EQ(w.compute_from, w.compute_to);
  EXPECT_EQ(w.write, Tier::kNone);
  cache.set_boundary(7, 100);
  w = cache.use(2);  // read layer 3's output, run layers 3..6, replace the entry
  EXPECT_EQ(w.cached_at, 3);
  EXPECT_EQ(w.compute_from, 3);
  EXPECT_EQ(w.compute_to, 7);
  EXPECT_EQ(w.write, Tier::kMemory);
  EXPECT_EQ(cache.peek(2).cached_at, 7);
  EXPECT_EQ(cache.entries(), 1);
  EXPECT_DOUBLE_EQ(cache.memory_bytes(), 100);
}

TEST(AutoCache, NoSampleRunsThroughAFrozenLayerTwice) {
  // 300 samples on 2 machines, 4 epochs, the boundary moving at epoch starts and mid-epoch;
  // every frozen-layer forward pass of every sample is counted. The last move is at the start
  // of the last epoch, so every entry ends at boundary 10.
  const long N = 300;
  const int layers = 12;
  ElasticSampler sampler(N, 2, 5);
  std::vector<ActivationCache> caches(2, ActivationCache(N));
  std::vector<std::vector<int>> runs(static_cast<size_t>(N), std::vector<int>(layers, 0));
  const std::vector<std::pair<long, int>> moves = {{0, 2},   {150, 3}, {300, 3},
                                                   {500, 6}, {700, 9}, {900, 10}};
  long trained = 0;
  for (int e = 0; e < 4; ++e) {
    sampler.begin_epoch(e);
    while (!sampler.epoch_done()) {
      int boundary = 0;
      for (const auto& [at, b] : moves) {
        if (trained >= at) boundary = b;
      }
      for (auto& c : caches) {
        if (boundary > c.boundary()) c.set_boundary(boundary, 64);
      }
      const auto step = sampler.next_step(2, 16);
      for (size_t r = 0; r < step.ids.size(); ++r) {
        for (long id : step.ids[r]) {
          const SampleWork w = caches[r / 2].use(id);
          EXPECT_EQ(w.compute_to, boundary);  // the sample reaches the boundary ...
          EXPECT_TRUE(w.compute_from == 0 || w.cached_at == w.compute_from);  // ... from its entry
          for (int l = w.compute_from; l < w.compute_to; ++l)
            ++runs[static_cast<size_t>(id)][static_cast<size_t>(l)];
        }
      }
      trained += step.samples;
    }
  }
  for (long id = 0; id < N; ++id) {
    for (int l = 0; l < layers; ++l) {
      ASSERT_LE(runs[static_cast<size_t>(id)][static_cast<size_t>(l)], 1)
          << "sample " << id << " layer " << l;
    }
    EXPECT_EQ(caches[static_cast<size_t>(sampler.node_of(id))].peek(id).cached_at, 10);
  }
  // Without the cache each sample would have run layer 0 once per epoch.
  EXPECT_EQ(caches[0].entries() + caches[1].entries(), N);
}

TEST(AutoCache, MemoryBudgetSpillsToDiskAndPrefetches) {
  CacheConfig config;
  config.memory_budget_bytes = 1000;  // ten entries of 100 bytes
  ActivationCache cache(25, config);
  cache.set_boundary(2, 100);
  std::vector<long> ids;
  for (long i = 0; i < 25; ++i) ids.push_back(i);
  const BatchWork first = cache.use_batch(ids);
  EXPECT_EQ(first.misses, 25);
  EXPECT_DOUBLE_EQ(first.memory_write_bytes, 1000);
  EXPECT_DOUBLE_EQ(first.disk_write_bytes, 1500);
  EXPECT_THAT(first.runs_from, ElementsAre(25));
  EXPECT_DOUBLE_EQ(cache.memory_bytes(), 1000);
  EXPECT_DOUBLE_EQ(cache.disk_bytes(), 1500);
  EXPECT_THAT(cache.to_prefetch({3, 9, 10, 24}), ElementsAre(10, 24));
  const BatchWork again = cache.use_batch({0, 1, 10, 11, 12});
  EXPECT_EQ(again.hits, 5);
  EXPECT_DOUBLE_EQ(again.memory_read_bytes, 200);
  EXPECT_DOUBLE_EQ(again.disk_read_bytes, 300);
  EXPECT_DOUBLE_EQ(again.memory_write_bytes + again.disk_write_bytes, 0);
  // A boundary whose activations are larger: replaced entries stay in memory while they fit.
  cache.set_boundary(5, 250);
  const BatchWork moved = cache.use_batch({0, 1, 2, 3, 20});
  EXPECT_EQ(moved.stale, 5);
  EXPECT_THAT(moved.runs_from, ElementsAre(0, 0, 5));
  // Memory holds 1000 (entries 0..9). Entry 0: 900 + 250 > 1000, to disk (memory 900);
  // entry 1: 800 + 250 > 1000, to disk (800); entry 2: 700 + 250 <= 1000, stays (950);
  // entry 3: 850 + 250 > 1000, to disk (850); entry 20 was on disk and stays there.
  EXPECT_DOUBLE_EQ(moved.memory_write_bytes, 250);
  EXPECT_DOUBLE_EQ(moved.disk_write_bytes, 4 * 250);
  EXPECT_DOUBLE_EQ(moved.memory_read_bytes, 400);
  EXPECT_DOUBLE_EQ(moved.disk_read_bytes, 100);
  EXPECT_DOUBLE_EQ(cache.memory_bytes(), 850);
  EXPECT_DOUBLE_EQ(cache.disk_bytes(), 1500 - 100 + 4 * 250);
  EXPECT_LE(cache.memory_bytes(), config.memory_budget_bytes);
}

TEST(AutoCache, CachesOnlyWhenReadingBeatsTheFrozenForward) {
  // ViT-B/16 at the boundary: 197 x 768 float32 = 605,184 bytes per sample over PCIe 3.0 x16
  // (15.754 GB/s): 38.4 us.
  const CacheCosts pcie{15.754e9, 2e9};
  const double bytes = 197 * 768 * 4;
  EXPECT_NEAR(cache_read_s(bytes, 0, pcie), 38.41e-6, 0.01e-6);
  EXPECT_NEAR(cache_read_s(bytes, 0.5, pcie), 38.41e-6 + 0.5 * bytes / 2e9, 0.01e-6);
  EXPECT_TRUE(cache_pays_off(100e-6, cache_read_s(bytes, 0, pcie)));
  EXPECT_FALSE(cache_pays_off(30e-6, cache_read_s(bytes, 0, pcie)));
  EXPECT_FALSE(cache_pays_off(100e-6, cache_read_s(bytes, 0.5, pcie)));  // half on a slow disk
}

TEST(AutoCache, NothingToCacheWithoutFrozenLayers) {
  ActivationCache cache(3);
  const BatchWork w = cache.use_batch({0, 1, 2});
  EXPECT_EQ(w.samples, 3);
  EXPECT_EQ(w.misses + w.hits + w.stale, 0);
  EXPECT_EQ(cache.entries(), 0);
}

TEST(AutoCache, Errors) {
  ActivationCache cache(3);
  cache.set_boundary(4, 10);
  EXPECT_EQ(input_error([&] { cache.set_boundary(2, 10); }),
            "autocache: the frozen boundary cannot move down (2 after 4)");
  EXPECT_EQ(input_error([&] { cache.use(3); }), "autocache: sample id 3 out of range 0..2");
  EXPECT_EQ(input_error([] { ActivationCache(0); }),
            "autocache: samples must be positive (0 given)");
  EXPECT_EQ(input_error([] {
              cache_read_s(1, 0, {0, 1});
            }),
            "autocache: host bandwidth must be positive");
}

}  // namespace
}  // namespace pipetwin::elastic
