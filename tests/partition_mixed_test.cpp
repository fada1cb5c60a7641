// core/partition/mixed_pipe.cpp and its steps (coarse_graph, coarsen, refine): the dynamic
// topological order under contraction, the coarsening passes, refinement, and the issue's
// "must show": on a T5-like encoder–decoder (FTPipe Figure 4) mixed-pipe beats every contiguous
// partitioner on simulated throughput and balances memory better; on plain chains it stays
// within a stated margin of `optimal`.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/partition/coarse_graph.hpp"
#include "core/partition/coarsen.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/refine.hpp"
#include "core/plan.hpp"
#include "sim/pipeline_sim.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::ElementsAre;

constexpr double kInf = std::numeric_limits<double>::infinity();

Cluster pcie_cluster() {
  return test::two_level_cluster(1, 8, 1e10, 1e-6, 1e10, 1e-6);
}

LayerProfile block_layer(const std::string& name, const std::string& kind, double fwd_ms,
                         double act_kb, double saved_kb, double param_kb) {
  LayerProfile l;
  l.name = name;
  l.kind = kind;
  for (int mb : {1, 2, 4, 8}) {
    l.timings.push_back({mb, fwd_ms * mb * 1e-3, 2 * fwd_ms * mb * 1e-3, fwd_ms * mb * 1e-3});
  }
  l.output_bytes_per_sample = act_kb * 1024;
  l.saved_bytes_per_sample = saved_kb * 1024;
  l.param_bytes = param_kb * 1024;
  return l;
}

// FTPipe Figure 4's case: a long encoder input makes the encoder blocks heavy (5 ms a sample,
// 1 MiB out, 8 MiB saved), a short decoder input the decoder blocks light (1 ms, 8 KiB out,
// 64 KiB saved), with equal parameters (64 MiB each); every decoder block reads the encoder's
// output (cross-attention), a skip edge from the last encoder block.
Profile t5_like(int blocks) {
  Profile p;
  p.model = "t5-like";
  p.device = "test-gpu";
  p.source = "synthetic";
  p.input_bytes_per_sample = 64 * 1024;
  for (int i = 0; i < blocks; ++i) {
    p.layers.push_back(block_layer(fmt::format("encoder.{}", i), "t5_block", 5, 1024, 8192, 65536));
  }
  for (int i = 0; i < blocks; ++i) {
    p.layers.push_back(block_layer(fmt::format("decoder.{}", i), "t5_block", 1, 8, 64, 65536));
  }
  const double enc_out = 1024 * 1024, dec_out = 8 * 1024;
  for (int i = 0; i + 1 < blocks; ++i) {
    p.edges.push_back({i, i + 1, enc_out});
    p.edges.push_back({blocks + i, blocks + i + 1, dec_out});
  }
  for (int i = 0; i < blocks; ++i) p.edges.push_back({blocks - 1, blocks + i, enc_out});
  return p;
}

struct Simulated {
  double iteration_s = kInf;
  std::vector<double> peak_bytes;
  double memory_spread() const {
    const auto [lo, hi] = std::minmax_element(peak_bytes.begin(), peak_bytes.end());
    return *hi - *lo;
  }
};

Plan plan_of(const CostModel& cm, const Partition& part, int batch, int chunks) {
  Plan p;
  p.model = cm.profile().model;
  p.profile = cm.profile();
  p.cluster = cm.cluster();
  p.schedule = "gpipe";
  p.partitioner = "test";
  p.batch_size = batch;
  p.chunks = chunks;
  for (int s = 0; s < part.num_stages(); ++s) {
    p.stages.push_back(
        {part.stages[static_cast<size_t>(s)], part.device.empty() ? s : part.device_of(s)});
  }
  return p;
}

Simulated simulate(const CostModel& cm, const Partition& part, int batch, int chunks) {
  Simulated out;
  if (!part.uniform_replicas()) return out;
  Plan plan = plan_of(cm, part, batch, chunks);
  plan.dp = part.replicas_of(0);
  const PlanContext ctx(plan, 0);
  const sim::SimResult r = sim::simulate_plan(ctx);
  out.iteration_s = r.metrics.iteration_time_s;
  for (const auto& d : r.memory.devices) out.peak_bytes.push_back(d.peak_bytes);
  return out;
}

// A request whose evaluator is the simulator, as sim/planner.cpp passes it.
PartitionRequest simulated_request(const CostModel& cm, int P, int batch, int chunks) {
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = P;
  r.micro_batch = static_cast<double>(batch) / chunks;
  r.micro_batches = chunks;
  r.in_flight = chunks;  // GPipe keeps every micro-batch's activations until its backward
  r.evaluate = [&cm, batch, chunks](const Partition& p) {
    try {
      return simulate(cm, p, batch, chunks).iteration_s;
    } catch (const InputError&) {
      return kInf;
    }
  };
  return r;
}

bool is_graph_partitioner(const std::string& name) {
  return name == "mixed-pipe" || name == "metis";
}

TEST(MixedPipe, BeatsEveryContiguousPartitionerOnAnEncoderDecoder) {
  // Six heavy encoder and six light decoder blocks on three GPUs, GPipe with 8 micro-batches.
  // Contiguous stages cannot balance 6 x 15 ms + 6 x 3 ms: the best has a 45 ms stage. One
  // encoder pair and one decoder pair per GPU is 36 ms each, which mixed-pipe finds.
  const CostModel cm(t5_like(6), pcie_cluster());
  const int P = 3, batch = 8, chunks = 8;
  PartitionRequest r = simulated_request(cm, P, batch, chunks);
  r.memory_limit_bytes = 1.1 * 1024 * kMiB;  // an even split needs about 670 MiB a GPU
  const Partition mixed = make_partitioner("mixed-pipe")->partition(r);
  const Simulated m = simulate(cm, mixed, batch, chunks);
  EXPECT_EQ(mixed.num_devices(), P);
  EXPECT_GT(mixed.num_stages(), P);  // several stages per GPU
  EXPECT_NEAR(bottleneck_time(r, mixed), 36e-3, 0.5e-3);
  for (double need : device_memory_bytes(r, mixed)) EXPECT_LE(need, r.memory_limit_bytes);
  int compared = 0;
  for (const auto& name : partitioner_names()) {
    if (is_graph_partitioner(name)) continue;
    SCOPED_TRACE(name);
    const Partition seq = make_partitioner(name)->partition(r);
    if (!seq.uniform_replicas()) {
      // PipeDream's answer replicates some stages only: neither engine runs that; compare the
      // bottleneck both planners minimise.
      EXPECT_LT(bottleneck_time(r, mixed), bottleneck_time(r, seq));
      continue;
    }
    const Simulated s = simulate(cm, seq, batch, chunks);
    std::printf("%-14s %-12s %6.1f ms, memory spread %4.0f MiB (mixed-pipe: %.1f ms, %.0f MiB)\n",
                name.c_str(), fmt::format("{}", seq.balance()).c_str(), s.iteration_s * 1e3,
                s.memory_spread() / kMiB, m.iteration_s * 1e3, m.memory_spread() / kMiB);
    EXPECT_LT(m.iteration_s, s.iteration_s);
    EXPECT_LT(m.memory_spread(), s.memory_spread());
    ++compared;
  }
  EXPECT_GE(compared, 4);
}

// A random chain: layer times 0.2–5 ms a sample, outputs and parameters up to 2 MiB.
Profile random_chain(std::mt19937& rng, int L) {
  Profile p = test::synthetic(fmt::format("uniform:layers={}", L));
  std::uniform_real_distribution<double> ms(0.2, 5), kb(1, 2048);
  for (auto& layer : p.layers) {
    const double f = ms(rng);
    for (auto& t : layer.timings) {
      t.forward_s = f * 1e-3 * t.micro_batch;
      t.backward_s = 2 * t.forward_s;
      t.recompute_s = t.forward_s;
    }
    layer.output_bytes_per_sample = layer.saved_bytes_per_sample = kb(rng) * 1024;
    layer.param_bytes = kb(rng) * 1024;
  }
  return p;
}

TEST(MixedPipe, NeverMoreThanOnePercentBehindOptimalOnChains) {
  // The stated margin: 1%, by the simulator (GPipe, M = 2P) and by the bottleneck both. On these
  // seeds the worst ratio measured is 1.000 either way: with one block per GPU (L = P) mixed-pipe
  // can return a sequential pipeline, and it often beats `optimal` in simulation by placing
  // stages out of order.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const int L = std::uniform_int_distribution<int>(4, 16)(rng);
    const int P = std::uniform_int_distribution<int>(2, 4)(rng);
    const CostModel cm(random_chain(rng, L), pcie_cluster());
    const int chunks = 2 * P, batch = 2 * chunks;
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " L=" << L << " P=" << P);
    PartitionRequest r = simulated_request(cm, P, batch, chunks);
    const Partition opt = make_partitioner("optimal")->partition(r);
    const Partition mix = make_partitioner("mixed-pipe")->partition(r);
    EXPECT_LE(simulate(cm, mix, batch, chunks).iteration_s,
              1.01 * simulate(cm, opt, batch, chunks).iteration_s);
    r.evaluate = nullptr;  // the bottleneck alone decides
    const Partition analytic = make_partitioner("mixed-pipe")->partition(r);
    EXPECT_LE(bottleneck_time(r, analytic), 1.01 * bottleneck_time(r, opt));
  }
}

TEST(MixedPipe, ErrorWhenNoAssignmentFits) {
  // Two layers of 1 GiB (2 GiB with gradients) on two devices of 1.5 GiB: nothing fits.
  const CostModel cm(test::synthetic("uniform:layers=2,param_kb=1048576"), pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 2;
  r.memory_limit_bytes = 1.5 * kGiB;
  EXPECT_EQ(
      test::input_error([&] { make_partitioner("mixed-pipe")->partition(r); }),
      "partitioner mixed-pipe: no assignment to 2 devices fits the 1.50 GiB limit: a block "
      "of 1 layer(s) from layer 0 needs 2.00 GiB, the device with the most room has 1.50 GiB");
}

// --- CoarseGraph: the dynamic topological order under contraction -----------------------------

// A random DAG of L layers whose indices are shuffled, so the profile order is not topological.
Profile random_dag(std::mt19937& rng, int L, double density) {
  std::vector<int> perm(static_cast<size_t>(L));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  Profile p = test::synthetic(fmt::format("uniform:layers={},param_kb=64,act_kb=16", L));
  std::uniform_real_distribution<double> coin(0, 1), kb(1, 64);
  for (int i = 0; i < L; ++i) {
    for (int j = i + 1; j < L; ++j) {
      if (j == i + 1 || coin(rng) < density) {
        p.edges.push_back(
            {perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)], kb(rng) * 1024});
      }
    }
  }
  return p;
}

// Whether the quotient graph with a and b merged has a cycle, by Kahn's algorithm.
bool merge_makes_cycle(const ModelGraph& g, const CoarseGraph& cg, int a, int b) {
  std::vector<int> of(static_cast<size_t>(g.num_layers()));
  for (int x : cg.blocks()) {
    for (int l : cg.block(x).layers) of[static_cast<size_t>(l)] = x == b ? a : x;
  }
  std::map<int, std::set<int>> succ;
  std::map<int, int> indegree;
  for (int x : cg.blocks()) indegree[x == b ? a : x] = 0;
  for (const auto& e : g.edges()) {
    const int u = of[static_cast<size_t>(e.from)], v = of[static_cast<size_t>(e.to)];
    if (u != v && succ[u].insert(v).second) ++indegree[v];
  }
  std::vector<int> ready;
  for (const auto& [x, d] : indegree) {
    if (d == 0) ready.push_back(x);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int x = ready.back();
    ready.pop_back();
    ++done;
    for (int y : succ[x]) {
      if (--indegree[y] == 0) ready.push_back(y);
    }
  }
  return done != indegree.size();
}

TEST(CoarseGraph, ContractionsKeepATopologicalOrderAndRefuseCycles) {
  std::mt19937 rng(404);
  int refused = 0, merged = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const int L = std::uniform_int_distribution<int>(5, 40)(rng);
    const CostModel cm(random_dag(rng, L, 0.15), pcie_cluster());
    PartitionRequest r;
    r.cost = &cm;
    r.micro_batch = 2;
    r.in_flight = 3;
    CoarseGraph g(r);
    for (int step = 0; step < 3 * L && g.num_blocks() > 1; ++step) {
      const std::vector<int> blocks = g.blocks();
      const int a = blocks[std::uniform_int_distribution<size_t>(0, blocks.size() - 1)(rng)];
      const std::vector<int> n = g.neighbours(a);
      if (n.empty()) continue;
      const int b = n[std::uniform_int_distribution<size_t>(0, n.size() - 1)(rng)];
      const bool cycle = merge_makes_cycle(cm.graph(), g, a, b);
      ASSERT_EQ(g.can_contract(a, b), !cycle) << "trial " << trial << " step " << step;
      if (cycle) {
        ++refused;
        continue;
      }
      const double expected_memory = g.merged_memory(a, b);
      ASSERT_EQ(g.contract(a, b), a);
      ++merged;
      std::vector<int> layers = g.block(a).layers;
      std::sort(layers.begin(), layers.end());
      EXPECT_NEAR(g.memory(a), stage_memory_bytes(r, layers), 1e-6 * g.memory(a));
      EXPECT_NEAR(expected_memory, g.memory(a), 1e-6 * g.memory(a));
      // Every edge between blocks runs forward in the maintained order; every layer is in
      // exactly one block.
      std::vector<int> owner(static_cast<size_t>(L), -1);
      for (int x : g.blocks()) {
        for (int l : g.block(x).layers) {
          ASSERT_EQ(owner[static_cast<size_t>(l)], -1);
          owner[static_cast<size_t>(l)] = x;
        }
      }
      for (const auto& e : cm.graph().edges()) {
        const int u = owner[static_cast<size_t>(e.from)], v = owner[static_cast<size_t>(e.to)];
        ASSERT_GE(u, 0);
        if (u != v) {
          ASSERT_LT(g.position(u), g.position(v));
          ASSERT_GT(g.bytes_between(u, v), 0);
        }
      }
    }
  }
  EXPECT_GT(refused, 10);
  EXPECT_GT(merged, 100);
}

// --- coarsening passes -------------------------------------------------------------------------

std::vector<std::vector<int>> sorted_blocks(const CoarseGraph& g) {
  std::vector<std::vector<int>> out;
  for (int b : g.blocks()) {
    std::vector<int> layers = g.block(b).layers;
    std::sort(layers.begin(), layers.end());
    out.push_back(layers);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Coarsen, ConstantsAndZeroWeightNodesJoinTheirLightestNeighbour) {
  // 0 (2 ms) -> 2 (a zero-weight op) -> 3 (3 ms) -> 4 (1 ms); 1 is a constant feeding 3 and 4.
  // The constant's lightest consumer is 4, but 1 -> 3 -> 4 would close a cycle: it joins 3.
  // The zero-weight op joins the lighter of its neighbours, 0.
  Profile p = test::synthetic("uniform:fwd_ms=2/0/0/3/1,act_kb=4");
  p.edges = {{0, 2, 4096}, {2, 3, 4096}, {1, 3, 64}, {3, 4, 4096}, {1, 4, 64}};
  const CostModel cm(p, pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  CoarseGraph g(r);
  remove_constants(g);
  EXPECT_THAT(sorted_blocks(g),
              ElementsAre(ElementsAre(0), ElementsAre(1, 3), ElementsAre(2), ElementsAre(4)));
  merge_zero_weight(g);
  EXPECT_THAT(sorted_blocks(g), ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3), ElementsAre(4)));
}

TEST(Coarsen, HeavyCommunicationAbovePercentileMerges) {
  // 120 layers in a chain; layer 50 receives 40 MiB and sends 60 MiB a sample (layer 51 then
  // receives 60 MiB): only 50 is above the 99th percentile, and it merges across its heaviest
  // edge, with 51.
  Profile p = test::synthetic("uniform:layers=120,act_kb=1");
  p.layers[49].output_bytes_per_sample = 40 * kMiB;
  p.layers[50].output_bytes_per_sample = 60 * kMiB;
  const CostModel cm(p, pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  CoarseGraph g(r);
  merge_heavy_communication(g);
  EXPECT_EQ(g.num_blocks(), 119);
  for (int b : g.blocks()) {
    if (g.block(b).layers.size() > 1) {
      EXPECT_THAT(g.block(b).layers, ElementsAre(50, 51));
    }
  }
}

TEST(Coarsen, ByTypeMergesOneScopeUnderTheCaps) {
  // Two transformer blocks of attention + MLP: scopes enc.0 and enc.1 merge inside, not across.
  Profile p = test::synthetic("uniform:layers=4,act_kb=4,param_kb=1024");
  const char* names[] = {"enc.0.attn", "enc.0.mlp", "enc.1.attn", "enc.1.mlp"};
  const char* kinds[] = {"attention", "mlp", "attention", "mlp"};
  for (int i = 0; i < 4; ++i) {
    p.layers[static_cast<size_t>(i)].name = names[i];
    p.layers[static_cast<size_t>(i)].kind = kinds[i];
  }
  const CostModel cm(p, pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  CoarseGraph g(r);
  coarsen_by_type(g, kInf, kInf);
  EXPECT_THAT(sorted_blocks(g), ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3)));
  // A compute cap below two layers' time keeps them apart.
  CoarseGraph capped(r);
  coarsen_by_type(capped, 1.5 * 3e-3, kInf);
  EXPECT_EQ(capped.num_blocks(), 4);
}

TEST(Coarsen, AroundCentresMakesLBlocksWithinMemory) {
  const CostModel cm(test::synthetic("uniform:layers=12,act_kb=4,param_kb=1024"), pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  CoarseGraph g(r);
  coarsen_around_centers(g, 4, CentreChoice::kSpread);
  EXPECT_THAT(sorted_blocks(g), ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5),
                                            ElementsAre(6, 7, 8), ElementsAre(9, 10, 11)));
  // With room for two layers a block, centres cannot take everything: more blocks, all fitting.
  r.memory_limit_bytes = 2 * stage_memory_bytes(r, {5}) + 1;
  CoarseGraph tight(r);
  coarsen_around_centers(tight, 4, CentreChoice::kHeaviest);
  EXPECT_GE(tight.num_blocks(), 6);
  for (int b : tight.blocks()) EXPECT_LE(tight.memory(b), r.memory_limit_bytes);
}

// --- refinement ---------------------------------------------------------------------------------

TEST(Refine, MovesLayersUntilBalanced) {
  // Eight 3 ms layers, six on device 0 and two on device 1: refinement moves two across.
  const CostModel cm(test::synthetic("uniform:layers=8,act_kb=4"), pcie_cluster());
  PartitionRequest r;
  r.cost = &cm;
  Partition p = contiguous_partition({6, 2});
  p.device = {0, 1};
  EXPECT_NEAR(bottleneck_time(r, p), 18e-3, 1e-9);
  const Partition q = refine_partition(r, p);
  EXPECT_THAT(q.balance(), ElementsAre(4, 4));
  EXPECT_NEAR(bottleneck_time(r, q), 12e-3, 1e-6);
  // ... but not over the memory limit: one extra layer fits on device 1, not two.
  const CostModel heavy(test::synthetic("uniform:layers=8,act_kb=4,param_kb=1048576"),
                        pcie_cluster());
  r.cost = &heavy;
  r.memory_limit_bytes = 6.5 * kGiB;  // 2 GiB a layer with gradients: three layers
  const Partition capped = refine_partition(r, p);
  EXPECT_THAT(capped.balance(), ElementsAre(5, 3));
}

}  // namespace
}  // namespace pipetwin
