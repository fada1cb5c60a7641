// AutoCache live (PipeTransformer Section 3.4, Figure 8, Appendix E;
// exec/runtime/activation_store.hpp): the store's per-sample hit / stale / miss rule against a
// closed form; training with the cache equals training without it (float64), with a memory budget
// that spills to disk too; a boundary move replaces entries lazily and no sample passes a frozen
// layer twice; two Gloo processes share the machine's cache; a wrong, short or corrupt cache file
// is refused with a message; the on/off decision is the simulator's; the epoch log carries the
// cache's counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/elastic/epoch_log.hpp"
#include "core/error.hpp"
#include "exec/runtime/activation_store.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"
#include "exec_test_util.hpp"
#include "sim/elastic_sim.hpp"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;
using exec::ActivationStore;
using exec::AutoCacheMode;
using test::input_error;
using testing::exec_plan;
using ::testing::HasSubstr;
using testing::Outcome;
using testing::sh;
using testing::write_plan;

// Three transformer blocks: boundaries at 3 (embed, block0.attn, block0.mlp) and 5 profile layers.
constexpr const char* kModel = "vit:test,image=8,patch=4,channels=1,depth=3";

// kModel on K stages and dp replicas, 2 micro-batches of 8 samples per replica and step.
Plan cache_plan(int stages, int dp = 1) {
  return exec_plan({.model = kModel, .stages = stages, .chunks = 2, .micro_batch = 8, .dp = dp});
}

class AutoCache : public test::TempDirTest {
 protected:
  // A store of `samples` samples of shape [2, 3] (float64) in dir_/name.
  exec::CacheOptions store_options(const std::string& name, double budget = INFINITY) const {
    exec::CacheOptions o;
    o.dir = (dir_ / name).string();
    o.memory_budget_bytes = budget;
    return o;
  }
  static exec::CacheLayout layout(int64_t samples) {
    exec::CacheLayout l;
    l.samples = samples;
    l.shape = {2, 3};
    l.dtype = at::kDouble;
    return l;
  }

  // Training of kModel on the digits (float64, K = 2, 16 samples a step, 89 steps an epoch) in
  // which one transformer layer freezes at step 30 and two at step 180 (in epoch 2).
  struct Run {
    std::vector<at::Tensor> params;  // every stage's, in model order
    std::vector<exec::EpochReport> epochs;
    int max_passes = -1;          // per (frozen layer, sample), -1: no store
    std::vector<int64_t> passes;  // per frozen layer
    int64_t steps = 0;
  };
  Run train(const exec::CacheOptions& cache, int epochs = 3) const {
    const Plan p0 = cache_plan(2);
    const exec::ElasticPolicy policy(p0, exec::ElasticOptions{});
    const Plan one = policy.plan_for(1, 2), two = policy.plan_for(2, 2);
    exec::TrainOptions o;
    o.exec = testing::float64_options(0);
    o.exec.data = "digits";
    o.epochs = epochs;
    o.log = (dir_ / "log.jsonl").string();
    o.policy_interval_steps = 30;
    o.autocache = cache;
    exec::Trainer t(p0, o);
    if (t.activation_store()) t.activation_store()->track_passes(true);
    t.set_policy([&](const exec::Trainer&, int64_t step) -> std::optional<exec::Transition> {
      if (step == 30) return exec::Transition{one, 1};
      if (step == 180) return exec::Transition{two, 2};
      return std::nullopt;
    });
    const exec::TrainResult r = t.run();
    Run out;
    for (int s = 0; s < t.plan().num_stages(); ++s) {
      for (const auto& x : r.parameters.at({0, s})) out.params.push_back(x);
    }
    out.epochs = r.epochs;
    out.steps = r.steps;
    if (const ActivationStore* st = t.activation_store()) {
      out.max_passes = st->max_passes_per_sample();
      for (int l = 0; l < 5; ++l) out.passes.push_back(st->passes(l));
    }
    return out;
  }
  static elastic::CacheCounts total(const Run& r) {
    elastic::CacheCounts c;
    for (const auto& e : r.epochs) {
      if (!e.cache_stats) continue;
      c.hits += e.cache_stats->hits;
      c.stale += e.cache_stats->stale;
      c.misses += e.cache_stats->misses;
      c.disk_read_bytes += e.cache_stats->disk_read_bytes;
      c.memory_read_bytes += e.cache_stats->memory_read_bytes;
    }
    return c;
  }
};

// Figure 8 on a stand-in for the frozen layers (layer l adds 1 to every element): the entries
// of samples cached at boundary 3 complete through layers [3, 5) only, the others run [0, 5);
// every entry ends as input + 5 whichever way it was made; a second store opened on the same
// files (another process) reads them, counted as shared.
TEST_F(AutoCache, EntriesAreReadCompletedOrComputedPerSample) {
  const exec::CacheOptions opt = store_options("cache");
  ActivationStore a(opt, "t", layout(16), ActivationStore::Role::kCreate, 0);
  std::vector<std::tuple<int, int, int64_t>> calls;  // from, to, rows
  const ActivationStore::RunFrozen add = [&](const at::Tensor& x, int from, int to) {
    calls.emplace_back(from, to, x.size(0));
    return x + (to - from);
  };
  auto inputs = [](const std::vector<int64_t>& ids) {
    std::vector<at::Tensor> rows;
    for (int64_t id : ids) rows.push_back(at::full({2, 3}, static_cast<double>(id), at::kDouble));
    return at::stack(rows);
  };
  a.set_boundary(3, true);
  const std::vector<int64_t> first = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_TRUE(at::equal(a.frozen_forward(first, inputs(first), add), inputs(first) + 3));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_tuple(0, 3, int64_t{8}));
  a.set_boundary(5, true);
  calls.clear();
  const std::vector<int64_t> second = {4, 8, 5, 9, 6, 10, 7, 11};  // half stale, half missing
  EXPECT_TRUE(at::equal(a.frozen_forward(second, inputs(second), add), inputs(second) + 5));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::make_tuple(0, 5, int64_t{4}));
  EXPECT_EQ(calls[1], std::make_tuple(3, 5, int64_t{4}));
  exec::CacheStats s = a.take_stats();
  EXPECT_EQ(s.work.misses, 8 + 4);
  EXPECT_EQ(s.work.stale, 4);
  EXPECT_EQ(s.work.hits, 0);
  EXPECT_EQ(s.work.memory_read_bytes, 4 * 48);
  EXPECT_EQ(a.passes(0), 12);  // samples 0..11 once each
  EXPECT_EQ(a.passes(3), 8);   // 4..11
  // Another process maps the same files: hits, nothing run, 8 reads of entries "a" wrote.
  ActivationStore b(opt, "t", layout(16), ActivationStore::Role::kOpen, 1);
  b.set_boundary(5, true);
  calls.clear();
  EXPECT_TRUE(at::equal(b.frozen_forward(second, inputs(second) * 0, add), inputs(second) + 5));
  EXPECT_TRUE(calls.empty());
  s = b.take_stats();
  EXPECT_EQ(s.work.hits, 8);
  EXPECT_EQ(s.shared_reads, 8);
}

// A memory budget of 5 slots: ids 0..4 in memory, the rest in the spill file; both read back.
TEST_F(AutoCache, EntriesBeyondTheBudgetSpillToDisk) {
  exec::CacheOptions opt = store_options("mem", 5 * 64);  // slots of 48 bytes, 64 apart
  opt.spill_dir = (dir_ / "disk").string();
  ActivationStore a(opt, "t", layout(16), ActivationStore::Role::kCreate, 0);
  EXPECT_EQ(a.memory_slots(), 5);
  EXPECT_EQ(a.tier_of(4), elastic::Tier::kMemory);
  EXPECT_EQ(a.tier_of(5), elastic::Tier::kDisk);
  EXPECT_TRUE(fs::exists(a.disk_path()));
  EXPECT_THAT(a.disk_path(), HasSubstr((dir_ / "disk").string()));
  const ActivationStore::RunFrozen add = [](const at::Tensor& x, int from, int to) {
    return x + (to - from);
  };
  std::vector<int64_t> ids(16);
  for (int64_t i = 0; i < 16; ++i) ids[static_cast<size_t>(i)] = i;
  const at::Tensor in = at::arange(16 * 6, at::kDouble).reshape({16, 2, 3});
  a.set_boundary(2, true);
  a.frozen_forward(ids, in, add);
  a.prefetch(ids);
  const at::Tensor again = a.frozen_forward(ids, in * 0, add);
  EXPECT_TRUE(at::equal(again, in + 2));
  const exec::CacheStats s = a.take_stats();
  EXPECT_EQ(s.work.hits, 16);
  EXPECT_EQ(s.work.memory_read_bytes, 5 * 48);
  EXPECT_EQ(s.work.disk_read_bytes, 11 * 48);
  EXPECT_EQ(s.work.disk_write_bytes, 11 * 48);
  const std::string mem = a.memory_path(), disk = a.disk_path();
  a.remove_files();
  EXPECT_FALSE(fs::exists(mem));
  EXPECT_FALSE(fs::exists(disk));
  EXPECT_FALSE(fs::exists(dir_ / "disk"));  // the folders it made go too
}

// A cache file of another layout, a short one, a foreign one, one truncated while in use and a
// slot header out of range: each an InputError naming the file, never a crash.
TEST_F(AutoCache, AWrongShortOrCorruptCacheFileIsRefused) {
  const exec::CacheOptions opt = store_options("cache", 4 * 64);
  ActivationStore a(opt, "t", layout(8), ActivationStore::Role::kCreate, 0);
  const std::string mem = a.memory_path(), disk = a.disk_path();
  auto open = [&](const exec::CacheLayout& l) {
    return input_error([&] { ActivationStore(opt, "t", l, ActivationStore::Role::kOpen, 1); });
  };
  exec::CacheLayout other = layout(8);
  other.shape = {3, 2};
  EXPECT_THAT(open(other), HasSubstr(mem + ": the activation cache holds 8 samples from id 0 of "
                                           "shape [2, 3] (4 in memory), this run needs 8 from "
                                           "id 0 of shape [3, 2]"));
  EXPECT_NO_THROW(ActivationStore(opt, "t", layout(8), ActivationStore::Role::kOpen, 1));
  ActivationStore b(opt, "t", layout(8), ActivationStore::Role::kOpen, 1);
  b.set_boundary(1, true);
  const ActivationStore::RunFrozen same = [](const at::Tensor& x, int, int) { return x.clone(); };
  const at::Tensor in = at::zeros({2, 2, 3}, at::kDouble);
  // A slot header that says boundary 99.
  {
    std::fstream f(mem, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 3 * 16);
    const int32_t bad = 99;
    f.write(reinterpret_cast<const char*>(&bad), sizeof(bad));
  }
  EXPECT_THAT(input_error([&] {
                b.frozen_forward({2, 3}, in, same);
              }),
              HasSubstr(mem + ": the slot of sample 3 holds sample 3 at boundary 99 (the run is "
                              "at 1): the activation cache is corrupt"));
  // The spill file shrinks under the run.
  fs::resize_file(disk, 100);
  EXPECT_THAT(input_error([&] {
                b.frozen_forward({0, 1}, in, same);
              }),
              HasSubstr(disk + ": the activation cache file is 100 bytes, "));
  EXPECT_THAT(open(layout(8)), HasSubstr(disk + ": the activation cache file is short"));
  // A foreign file, and a short one, in place of the memory file.
  {
    std::ofstream f(mem, std::ios::binary | std::ios::trunc);
    f << std::string(8192, 'x');
  }
  EXPECT_THAT(open(layout(8)), HasSubstr(mem + ": not a pipetwin activation cache (bad magic)"));
  fs::resize_file(mem, 10);
  EXPECT_THAT(open(layout(8)), HasSubstr(mem + ": the activation cache file is short (10 bytes, "));
  fs::remove(mem);
  EXPECT_THAT(open(layout(8)), HasSubstr(mem + ": cannot open the activation cache"));
}

TEST_F(AutoCache, SlotsNeedOneShapeAtEveryBoundary) {
  EXPECT_EQ(exec::uniform_slot_shape({{3, {5, 32}}, {5, {5, 32}}}), (std::vector<int64_t>{5, 32}));
  EXPECT_EQ(input_error([] {
              exec::uniform_slot_shape({{3, {5, 32}}, {5, {5, 64}}});
            }),
            "autocache: F_frozen's output per sample is [5, 32] after 3 layers but [5, 64] after "
            "5; the cache's fixed-size slots need one shape at every boundary (run with "
            "--autocache off)");
  EXPECT_THAT(input_error([] { exec::parse_autocache_mode("maybe"); }),
              HasSubstr("--autocache: expected auto, on or off, got \"maybe\""));
}

// Training with the cache equals training without it: every entry is the frozen layers' output
// of its sample (eval mode, no dropout), computed once on the same frozen weights. Two boundary
// moves: at the second, samples cached at 3 run layers [3, 5) only; over the whole run no sample
// passes a frozen layer twice, and the counts add up to the samples trained with layers frozen.
TEST_F(AutoCache, TrainingWithTheCacheEqualsTrainingWithoutIt) {
  exec::CacheOptions on;
  on.mode = AutoCacheMode::kOn;
  on.dir = (dir_ / "cache").string();
  const Run with = train(on);
  exec::CacheOptions off;
  off.mode = AutoCacheMode::kOff;
  const Run without = train(off);
  ASSERT_EQ(with.steps, 3 * 89);
  EXPECT_LT(testing::max_relative_error(with.params, without.params), 1e-12);
  EXPECT_FALSE(fs::exists(dir_ / "cache"));  // removed at the end
  const elastic::CacheCounts c = total(with);
  EXPECT_EQ(c.hits + c.stale + c.misses, (3 * 89 - 30) * 16);
  EXPECT_GT(c.hits, 0);
  EXPECT_GT(c.stale, 0);
  EXPECT_EQ(with.max_passes, 1);
  // Layers [0, 3) ran for the misses only; [3, 5) for the stale entries and the misses at 5.
  EXPECT_EQ(with.passes[0], c.misses);
  EXPECT_EQ(with.passes[2], c.misses);
  EXPECT_EQ(with.passes[3], with.passes[4]);
  EXPECT_GE(with.passes[3], c.stale);
  EXPECT_LE(with.passes[3] - c.stale, c.misses);
  ASSERT_EQ(with.epochs.size(), 3u);
  EXPECT_TRUE(with.epochs[2].cache);
  EXPECT_GT(with.epochs[1].cache_stats->hits, 0);
  EXPECT_GT(with.epochs[2].cache_stats->stale, 0);
  EXPECT_EQ(with.epochs[0].cache_stats->hits, 0);  // nothing was cached before
  EXPECT_FALSE(without.epochs[2].cache_stats.has_value());
}

// With room for 64 entries in memory the rest spill to disk, and training is still the same.
TEST_F(AutoCache, ATinyMemoryBudgetSpillsToDiskAndTrainingIsStillEqual) {
  exec::CacheOptions tiny;
  tiny.mode = AutoCacheMode::kOn;
  tiny.dir = (dir_ / "mem").string();
  tiny.spill_dir = (dir_ / "disk").string();
  tiny.memory_budget_bytes = 64 * 5 * 32 * 8;  // 64 slots of [5, 32] float64
  const Run spilled = train(tiny, 2);
  exec::CacheOptions off;
  off.mode = AutoCacheMode::kOff;
  const Run without = train(off, 2);
  EXPECT_LT(testing::max_relative_error(spilled.params, without.params), 1e-12);
  const elastic::CacheCounts c = total(spilled);
  EXPECT_GT(c.disk_read_bytes, 10 * c.memory_read_bytes);  // 1373 of 1437 slots on disk
  EXPECT_GT(c.memory_read_bytes, 0);
  EXPECT_EQ(spilled.max_passes, 1);
  EXPECT_FALSE(fs::exists(dir_ / "disk"));
}

// Two processes over Gloo, one replica each (K = 1, dp = 2), layers frozen by the alpha bound
// at steps 20 and 40; the cache is on by the cost model (auto). The sampler reshuffles the
// machine's samples every epoch, so each replica reads entries the other wrote; the weights
// equal those of the same run without the cache; the cache folder is gone at the end.
TEST_F(AutoCache, TwoGlooProcessesShareTheCache) {
  Plan p = cache_plan(1, 2);
  p.cluster.devices_per_node = 2;
  const std::string plan = write_plan(p, dir_);
  auto train = [&](const std::string& name, const std::string& extra) {
    return sh(fmt::format(
        "timeout -k 5 120 {}/pipetwin train --plan {} --nproc 2 --data digits --epochs 3 "
        "--float64 --seed 7 --lr 0.05 --momentum 0.9 --no-pin --timeout 30 -q --elastic "
        "--alpha 0.5 --freeze-interval 20step --freeze-rule bound --log {} --epoch-log {} "
        "--checkpoint-dir {} {}",
        PIPETWIN_BINARY_DIR, plan, (dir_ / (name + ".jsonl")).string(),
        (dir_ / (name + ".json")).string(), (dir_ / name).string(), extra));
  };
  const std::string cache = (dir_ / "shared-cache").string();
  Outcome out = train("on", "--cache-dir " + cache);
  ASSERT_EQ(out.status, 0) << out.output;
  out = train("off", "--autocache off");
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_FALSE(fs::exists(cache));
  const elastic::EpochLog log = elastic::load_epoch_log((dir_ / "on.json").string());
  ASSERT_EQ(log.epochs.size(), 3u);
  EXPECT_EQ(log.epochs[2].dp, 2);
  EXPECT_TRUE(log.epochs[2].cache);
  ASSERT_TRUE(log.epochs[2].cache_stats.has_value());
  const elastic::CacheCounts& c = *log.epochs[2].cache_stats;
  EXPECT_GT(c.hits, 0);
  EXPECT_GT(c.shared_reads, c.hits / 4);  // about half come from the other replica
  EXPECT_LT(c.shared_reads, c.hits + c.stale);
  // Final weights of both runs, every rank's copy, by name.
  auto weights = [&](const std::string& name) {
    std::map<std::pair<std::string, std::string>, std::vector<at::Tensor>> w;
    const auto m = exec::read_manifest((dir_ / name).string());
    EXPECT_TRUE(m.has_value());
    for (int r = 0; m && r < m->world; ++r) {
      for (const auto& st : exec::read_rank_file((dir_ / name).string(), *m, r).stages) {
        for (const auto& t : st.tensors) w[{t.name, t.role}].push_back(t.value);
      }
    }
    return w;
  };
  const auto won = weights("on"), woff = weights("off");
  ASSERT_EQ(won.size(), woff.size());
  for (const auto& [key, tensors] : woff) {
    EXPECT_LT(testing::max_relative_error(won.at(key), tensors), 1e-12) << key.first;
  }
}

// The on/off decision at a transition is the simulator's: with a read of 1024 bytes at
// 256 kB/s (4 ms) against 1 ms of forward per profile layer and sample, caching pays off from
// 2 frozen blocks (5 layers: 5 ms) on, not at 1 (3 layers: 3 ms).
TEST_F(AutoCache, ThePolicyTurnsTheCacheOnWhereTheSimulatorDoes) {
  Plan p = cache_plan(2);
  p.cluster.intra_node.bandwidth = 256000;
  exec::ElasticPolicy policy(p, exec::ElasticOptions{});
  policy.configure_cache(1437, {}, {});
  sim::ElasticConfig c;
  c.model = p.model;
  c.profile = p.profile;
  c.cluster = p.cluster;
  c.stages = 2;
  c.batch = p.batch_size;
  c.samples = 1437;
  c.epochs = 1;
  const int threshold = sim::cache_threshold_layers(c);
  EXPECT_EQ(threshold, 2);
  for (int f = 1; f <= 3; ++f) EXPECT_EQ(policy.cache_pays_off(f), f >= threshold) << f;
  EXPECT_FALSE(policy.transition(1).cache);
  EXPECT_TRUE(policy.transition(2).cache);
  // All but 1% of the entries on a disk of 1 kB/s: never.
  policy.configure_cache(1437, {1437 * 1024 * 0.01}, {0, 1000});
  EXPECT_FALSE(policy.cache_pays_off(3));
}

// The epoch log takes the cache's counts and still reads files without them.
TEST_F(AutoCache, TheEpochLogCarriesTheCountsAndOldLogsLoad) {
  elastic::EpochLog log;
  log.source = "measured";
  elastic::EpochRecord e;
  e.cache = true;
  e.cache_stats = elastic::CacheCounts{10, 2, 3, 4, 1e3, 2e3, 3e3, 4e3};
  log.epochs.push_back(e);
  const Json j = elastic::epoch_log_to_json(log);
  const elastic::EpochLog back = elastic::epoch_log_from_json(JsonView(j, "log.json"));
  ASSERT_TRUE(back.epochs[0].cache_stats.has_value());
  EXPECT_EQ(back.epochs[0].cache_stats->stale, 2);
  EXPECT_EQ(back.epochs[0].cache_stats->disk_write_bytes, 4e3);
  Json old = j;
  old["epochs"][0].erase("cache_stats");
  EXPECT_FALSE(
      elastic::epoch_log_from_json(JsonView(old, "old.json")).epochs[0].cache_stats.has_value());
  Json bad = j;
  bad["epochs"][0]["cache_stats"]["hits"] = -1;
  EXPECT_THAT(input_error([&] { elastic::epoch_log_from_json(JsonView(bad, "bad.json")); }),
              HasSubstr("bad.json: epochs[0].cache_stats.hits: must not be negative (-1 given)"));
}

// `pipetwin train` on bad cache flags: exit status 2 and one line naming the flag.
TEST_F(AutoCache, TheCommandLineRefusesBadCacheFlags) {
  const std::string plan = write_plan(exec_plan({.model = kModel}), dir_);
  const std::string cmd = fmt::format("{}/pipetwin train --plan {} --log {} --no-pin -q ",
                                      PIPETWIN_BINARY_DIR, plan, (dir_ / "log.jsonl").string());
  const testing::RefusedFlags cases = {
      {"--elastic --autocache maybe", "--autocache: expected auto, on or off, got \"maybe\""},
      {"--elastic --cache-memory lots",
       "--cache-memory: expected a non-negative number of bytes like 1048576, 512MiB or 2GiB, got "
       "\"lots\""},
      {"--elastic --cache-memory -1", "--cache-memory: expected a non-negative number"},
      {"--autocache on", "--autocache requires --elastic"},
      {"--elastic --autocache on --data synthetic",
       "--autocache on: the cache keys activations by sample id; --data synthetic draws new "
       "samples every step"}};
  testing::expect_refused(cmd, cases);
}

}  // namespace
}  // namespace pipetwin
