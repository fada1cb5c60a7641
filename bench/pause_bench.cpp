// What a pause costs the pass after it: a pipeline stage's forward and backward, each started
// after its core has waited `pause` (as a stage waits for the other stage), against back to back.
//
// The profiler times a layer's passes back to back; in a pipeline a stage waits between its
// actions, and on this project's CPU VM the pass after a wait runs longer, by more the longer
// the wait (docs/validation.md, "Executor against simulator"). The stage: the first half of BERT-tiny
// (embedding and block 0, the balance-time plan's stage 0 at K=2), one intra-op thread on core 0.
// Reported: the backward's time (manual time) and the forward's (counter forward_ms); compare a
// pause's figures with pause 0. The host's speed drifts by more than the effect at micro-batch 8
// within a minute: interleave the cases.
//
//   build/bench/pause_bench --benchmark_repetitions=8 --benchmark_enable_random_interleaving=true
//                           --benchmark_report_aggregates_only
#include <chrono>
#include <thread>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "exec/platform/host.hpp"
#include "models/zoo.hpp"

namespace {

using pipetwin::models::LayeredModel;

constexpr size_t kStageLayers = 3;  // embed, block0.attn, block0.mlp

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void StageAfterPause(benchmark::State& state) {
  const auto pause = std::chrono::microseconds(state.range(0));
  const int micro_batch = static_cast<int>(state.range(1));
  pipetwin::exec::tune_malloc();
  pipetwin::exec::configure_compute_thread(1, 0, true);
  LayeredModel model = pipetwin::models::build_model("bert:tiny", at::kFloat, 1);
  const at::Tensor input = model.synthetic_input(micro_batch, 1);
  for (auto& layer : model.layers) {
    for (auto p : layer.parameters()) p.mutable_grad() = at::zeros_like(p);
  }
  auto forward = [&] {
    at::Tensor x = input;
    for (size_t l = 0; l < kStageLayers; ++l) x = model.layers[l].forward(x, at::Tensor());
    return x;
  };
  for (int i = 0; i < 3; ++i) {  // warm-up
    at::Tensor y = forward();
    y.backward(at::ones_like(y));
  }
  double forward_s = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(pause);
    auto t = std::chrono::steady_clock::now();
    at::Tensor y = forward();
    forward_s += seconds_since(t);
    const at::Tensor seed = at::ones_like(y);
    std::this_thread::sleep_for(pause);
    t = std::chrono::steady_clock::now();
    y.backward(seed);
    state.SetIterationTime(seconds_since(t));
  }
  state.counters["forward_ms"] =
      benchmark::Counter(forward_s * 1e3, benchmark::Counter::kAvgIterations);
}

BENCHMARK(StageAfterPause)
    ->ArgNames({"pause_us", "micro_batch"})
    ->ArgsProduct({{0, 1000, 5000, 20000}, {1, 8}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(40);

}  // namespace

BENCHMARK_MAIN();
