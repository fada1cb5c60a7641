// Partitioner speed (target: a 2,000-node graph in seconds, not minutes).
//
// A 2,000-layer graph shaped like a deep residual network: a chain with a skip edge around every
// second layer, layer times 0.2-5 ms a sample, parameters and outputs up to 4 MiB (fixed seed),
// partitioned onto P = 8 devices of one node. FTPipe reports about 20 minutes for PipeDream's
// exhaustive search on such a graph in Python and "a few seconds" for Mixed-pipe (Sections 4, 6).
//   BM_Partition/<name>   one partition() call; mixed-pipe evaluates its candidates with
//                         bottleneck_time (no simulator), as core/ does on its own
#include <benchmark/benchmark.h>

#include <random>

#include "core/cost_model.hpp"
#include "profiles/model_spec.hpp"
#include "core/partition/partitioner.hpp"
#include "profiles/synthetic.hpp"

namespace pipetwin {
namespace {

Profile residual_graph(int L) {
  std::mt19937 rng(2000);
  std::uniform_real_distribution<double> ms(0.2, 5), kb(1, 4096);
  Profile p = synthetic_profile(ModelSpec::parse("uniform:layers=" + std::to_string(L), "bench"));
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
    p.edges.push_back({i, i + 1, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
    if (i % 2 == 0 && i + 2 < L) {
      p.edges.push_back({i, i + 2, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
    }
  }
  return p;
}

Cluster bench_cluster() {
  Cluster c;
  c.name = "bench";
  c.device.name = "bench-gpu";
  c.device.memory_bytes = 1e12;
  c.device.memory_bandwidth = 1e12;
  c.device.peak_flops["float32"] = 1e14;
  c.devices_per_node = 8;
  c.intra_node = {"pcie", "", 12e9, 5e-6};
  c.inter_node = c.intra_node;
  return c;
}

void BM_Partition(benchmark::State& state, const std::string& name) {
  const CostModel cm(residual_graph(2000), bench_cluster());
  PartitionRequest r;
  r.cost = &cm;
  r.num_stages = 8;
  r.micro_batch = 4;
  r.in_flight = 8;
  const auto partitioner = make_partitioner(name);
  for (auto _ : state) {
    const Partition p = partitioner->partition(r);
    benchmark::DoNotOptimize(p.stages.data());
  }
  state.counters["layers"] = cm.num_layers();
}

BENCHMARK_CAPTURE(BM_Partition, balance - time, std::string("balance-time"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Partition, optimal, std::string("optimal"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Partition, pipedream - dp, std::string("pipedream-dp"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Partition, mixed - pipe, std::string("mixed-pipe"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Partition, metis, std::string("metis"))->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
