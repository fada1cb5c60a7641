// Simulator speed (target: >= 10M actions simulated per second per core).
//
//   BM_Engine_GPipeDP_K8_M32   the discrete-event engine alone re-running one K=8, M=32 GPipe +
//                              data-parallel (dp=4) iteration: the figure docs/performance.md reports
//   BM_Simulate_GPipeDP_K8_M32 the whole path: schedule generation, validation, task graph,
//                              engine, memory walk, timeline and metrics
//   BM_Engine_1F1B_K4_M16_N8   a longer 1F1B run, for scale
//   BM_Engine_GPipeDP_K8_M32_Topology  the first case on a cluster with a topology (one NIC per
//                              node): transfers and all-reduces as flows over shared links
//                              (sim/network/flow_model.hpp)
//   BM_Engine_1F1B_TP2_K4_M32 / BM_Simulate_1F1B_TP2_K4_M32  1F1B on K=4 tensor-parallel groups of
//                              t=2 with dp=2, every layer with its forward and backward all-reduce
//                              (core/tensor_parallel.hpp): the passes include them, and the whole
//                              path also writes each one as a timeline event on the tensor stream
// items_per_second = actions simulated per second.
#include <algorithm>

#include <benchmark/benchmark.h>

#include "profiles/model_spec.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/synthetic.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin {
namespace {

Plan bench_plan(const std::string& schedule, int K, int M, int dp, bool topology = false,
               int tp = 1) {
  Plan p;
  p.model = "uniform:layers=16,fwd_ms=1,bwd_ms=2,act_kb=256,param_kb=65536";
  p.profile = synthetic_profile(ModelSpec::parse(p.model, "bench"));
  p.cluster.name = "bench";
  p.cluster.device.name = "bench-gpu";
  p.cluster.device.memory_bytes = 1e15;
  p.cluster.device.memory_bandwidth = 1e12;
  p.cluster.device.peak_flops["float32"] = 1e14;
  p.cluster.nodes = dp;
  p.cluster.devices_per_node = K * tp;
  if (tp > 1) {
    p.tensor_parallel.size = tp;
    p.profile.tensor_parallel.size = tp;
    for (auto& l : p.profile.layers) {
      l.tp_forward = {{CollectiveKind::kAllReduce, 1 << 20}};
      l.tp_backward = {{CollectiveKind::kAllReduce, 1 << 20}};
    }
  }
  p.cluster.intra_node = {"nvlink", "", 300e9, 3e-6};
  p.cluster.inter_node = {"ib", "", 25e9, 5e-6};
  if (topology) p.cluster.topology = Topology{};
  p.schedule = schedule;
  p.chunks = M;
  p.dp = dp;
  p.batch_size = M * dp;
  const int per = 16 / K;
  for (int s = 0; s < K; ++s) {
    StagePlan st;
    st.device = s;
    for (int i = 0; i < per; ++i) st.layers.push_back(s * per + i);
    p.stages.push_back(st);
  }
  return p;
}

void engine_bench(benchmark::State& state, const std::string& schedule, int K, int M, int dp, int N,
                  bool topology = false, int tp = 1) {
  const PlanContext ctx(bench_plan(schedule, K, M, dp, topology, tp), N);
  sim::PipelineSimulator sim(ctx, CompiledSchedule(make_schedule(schedule, ctx.shape), schedule));
  std::vector<double> start, end;
  for (auto _ : state) {
    sim.run_engine(start, end);
    benchmark::DoNotOptimize(end.data());
  }
  const auto actions = static_cast<int64_t>(sim.schedule().num_actions());
  state.SetItemsProcessed(state.iterations() * actions);
  state.counters["actions"] = static_cast<double>(actions);
}

void BM_Engine_GPipeDP_K8_M32(benchmark::State& state) { engine_bench(state, "gpipe", 8, 32, 4, 1); }
BENCHMARK(BM_Engine_GPipeDP_K8_M32);

void BM_Engine_1F1B_K4_M16_N8(benchmark::State& state) { engine_bench(state, "1f1b", 4, 16, 1, 8); }
BENCHMARK(BM_Engine_1F1B_K4_M16_N8);

void BM_Engine_GPipeDP_K8_M32_Topology(benchmark::State& state) {
  engine_bench(state, "gpipe", 8, 32, 4, 1, true);
}
BENCHMARK(BM_Engine_GPipeDP_K8_M32_Topology);

void BM_Engine_1F1B_TP2_K4_M32(benchmark::State& state) {
  engine_bench(state, "1f1b", 4, 32, 2, 1, false, 2);
}
BENCHMARK(BM_Engine_1F1B_TP2_K4_M32);

void simulate_bench(benchmark::State& state, const Plan& plan) {
  const PlanContext ctx(plan, 1);
  int64_t actions = 0;
  for (auto _ : state) {
    const auto r = sim::simulate_plan(ctx);
    // The schedule's actions (not the tensor-parallel events drawn beside them).
    actions = std::count_if(r.timeline.events.begin(), r.timeline.events.end(),
                            [](const TimelineEvent& e) { return e.action.op != Op::kTensorParallel; });
    benchmark::DoNotOptimize(r.metrics.iteration_time_s);
  }
  state.SetItemsProcessed(state.iterations() * actions);
  state.counters["actions"] = static_cast<double>(actions);
}

void BM_Simulate_GPipeDP_K8_M32(benchmark::State& state) {
  simulate_bench(state, bench_plan("gpipe", 8, 32, 4));
}
BENCHMARK(BM_Simulate_GPipeDP_K8_M32);

void BM_Simulate_1F1B_TP2_K4_M32(benchmark::State& state) {
  simulate_bench(state, bench_plan("1f1b", 4, 32, 2, false, 2));
}
BENCHMARK(BM_Simulate_1F1B_TP2_K4_M32);

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
