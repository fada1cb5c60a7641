// The synthetic model on LibTorch: the executor-side twin of profiles/synthetic.hpp, so executor
// timings can be checked against the simulator's closed forms (the synthetic model
// exists in both engines).
//
//   uniform:layers=L,fwd_ms=f,bwd_ms=b,recompute_ms=r,overhead_ms=o,act_kb=a,param_kb=p,...
//
// takes exactly profiles/synthetic.hpp's options (it is parsed by core's synthetic_profile(), so the
// defaults and per-layer '/'-lists are the same) and builds one Layer per profile layer, with the
// profile's names ("layer0", ...), kind "synthetic". With element size e (4 for float32, 8 for
// float64), layer i holds floor(param_kb_i * 1024 / e) parameters and maps [b, d_{i-1}] to
// [b, d_i], d_i = max(1, floor(act_kb_i * 1024 / e)) (d_{-1} from input_kb). Its output is
//   y = x + mean(w)                          when d_{i-1} == d_i,
//   y = mean_j(x[:, j]) broadcast + mean(w)  otherwise (mean(w) = 0 without parameters),
// so gradients reach the parameters and the input. Its forward busy-waits (spins on
// std::chrono::steady_clock, it does not sleep) until overhead_ms + fwd_ms * b milliseconds have
// passed since it started, its backward (a custom autograd function) until overhead_ms +
// bwd_ms * b, and a forward run inside a SyntheticRecompute scope until overhead_ms +
// recompute_ms * b. Split in two (a BackwardInput and a BackwardWeight: models/split_linear.hpp,
// exec/runtime/weight_grad_store.hpp), the backward of a layer with parameters spins for the whole
// less its weight half and defers the weight half, which spins for wgrad_ms * b (the spec's
// wgrad_ms; without it the cost model's estimate: all of the backward for layer 0, half for the
// others, core/cost_model.hpp) and adds the weight gradient. The spin measures host wall time; on
// a GPU it does not wait for the device.
// The optimizer-state and opt_ms options describe the optimizer and do not change the layers.
// Task: regression (per-sample mean squared error against a normal(0, 1) target).
//
// Thread-safety: pure functions; SyntheticRecompute scopes are per thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/model_spec.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::models {

struct SyntheticLayerConfig {
  std::string name;
  double overhead_ms = 0, fwd_ms = 0, bwd_ms = 0, recompute_ms = 0;  // per call / per sample
  // The weight half of the backward (a split backward's W; see above): per call / per sample.
  double wgrad_overhead_ms = 0, wgrad_ms = 0;
  double output_bytes = 0;  // per sample
  double param_bytes = 0;
};

struct SyntheticConfig {
  double input_bytes = 0;  // per sample
  std::vector<SyntheticLayerConfig> layers;
};

SyntheticConfig synthetic_config(const ModelSpec& spec);
// Features of a tensor of `bytes` per sample, and parameters in `bytes`, for an element size.
int64_t synthetic_features(double bytes, int64_t element_size);
int64_t synthetic_parameters(double bytes, int64_t element_size);
int64_t parameter_count(const SyntheticConfig& c, int64_t element_size = 4);
LayeredModel build_synthetic(const SyntheticConfig& c, torch::Dtype dtype, uint64_t seed);

// While one is alive on a thread, synthetic layers run on that thread spin for their recompute
// time instead of their forward time (an executor opens one around a checkpointed recompute).
class SyntheticRecompute {
 public:
  SyntheticRecompute();
  ~SyntheticRecompute();
  SyntheticRecompute(const SyntheticRecompute&) = delete;
  SyntheticRecompute& operator=(const SyntheticRecompute&) = delete;

 private:
  bool saved_;
};

}  // namespace pipetwin::models
