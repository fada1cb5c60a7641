// Sweep speed (target: 500 points a second): a 1,000-point sweep of full discrete-event simulations over a
// 12-layer model — K up to 12, M up to 40, five schedules — in under 2 s on 2 cores, i.e. at
// least 500 points/s.
//
//   BM_Sweep1000/jobs:N   the whole `pipetwin sweep` path for the grid
//                           schedule=gpipe,1f1b,pipedream,ddg,feature-replay;
//                           stages=1,2,4,8,12;chunks=1:40
//                         with one sample per micro-batch (batch = M), on PipeTransformer's
//                         2 x 8 RTX 5000 cluster: per point, planning (partition, cost model),
//                         schedule generation, compilation, memory walk, the event simulation of
//                         the schedule's default iterations (3 mini-batches; 4K + 4 for the
//                         asynchronous pipedream, ddg and feature-replay: up to 1.6 x 10^5 tasks),
//                         its iteration time / throughput / bubble and the CSV row, all written to
//                         a CSV file. items_per_second = points per second (wall);
//                         points_per_cpu_s = points per CPU second of all threads, the figure
//                         to read on a machine shared with other work.
//   BM_SweepPoint         one point (K = 8, M = 32, 1f1b), for scale.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>

#include <benchmark/benchmark.h>

#include "studies/sweep/runner.hpp"

namespace pipetwin::sim {
namespace {

const char* kGrid =
    "schedule=gpipe,1f1b,pipedream,ddg,feature-replay;stages=1,2,4,8,12;chunks=1:40";

// User + system CPU time of the whole process (every thread), in seconds.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

SweepInputs bench_inputs() {
  SweepInputs in;
  in.base.model = "uniform:layers=12,fwd_ms=1,bwd_ms=2,act_kb=1024,param_kb=16384";
  in.base.cluster = "pipetransformer-2x8-rtx5000";
  in.base.micro_batch = 1;
  in.base.chunks = 1;
  return in;
}

void BM_Sweep1000(benchmark::State& state) {
  const Sweep sweep(Grid::parse(kGrid), bench_inputs());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pipetwin-sweep-bench-" + std::to_string(::getpid()) + ".csv"))
                               .string();
  RunOptions o;
  o.output = path;
  o.jobs = static_cast<int>(state.range(0));
  int64_t points = 0;
  const double cpu0 = process_cpu_s();
  for (auto _ : state) {
    std::filesystem::remove(path);
    const RunResult r = run_sweep(sweep, o);
    points += r.computed;
    if (!r.complete) state.SkipWithError("sweep incomplete");
  }
  const double cpu = process_cpu_s() - cpu0;
  std::filesystem::remove(path);
  state.SetItemsProcessed(points);
  state.counters["points"] = static_cast<double>(sweep.size());
  // CPU seconds of all threads: on a shared machine, wall time measures the neighbours too.
  state.counters["points_per_cpu_s"] = cpu > 0 ? static_cast<double>(points) / cpu : 0;
}
BENCHMARK(BM_Sweep1000)
    ->ArgName("jobs")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_SweepPoint(benchmark::State& state) {
  const Sweep sweep(Grid::parse("stages=8;chunks=32;schedule=1f1b"), bench_inputs());
  for (auto _ : state) benchmark::DoNotOptimize(sweep.row(0));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SweepPoint)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetwin::sim

BENCHMARK_MAIN();
