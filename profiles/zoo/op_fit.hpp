// Fitting a device's op parameters (profiles/zoo/op_params.hpp) to micro-benchmark timings: what
// `pipetwin calibrate --microbench` measures on the machine at hand (exec/profile/microbench.hpp)
// goes in as MicrobenchData, an OpParams with every number's source saying how it was measured
// comes out. Pure arithmetic, no LibTorch: the tests feed it timings made by a known OpParams and
// check that the fit recovers it.
//
// What each timing fits (y: a measured time; host and launch from the probes):
//   host_s        the median time of a one-element add issued alone (sync: host and kernel)
//   host_node_s   a chain of n one-element multiplies: (backward - n host_s) / n
//   host_tensor_s a multi-tensor add over n one-element tensors: (time - host_s) / n
//   launch_s      GPU: n tiny kernels queued behind a long one, their device time / n; CPU: 0
//   bandwidth     the copy of the largest buffers (bytes read and written / time; copies shorter
//                 than four host_s are left out)
//   cache_bytes, cache_bandwidth   the copies that fit a cache: the largest buffer whose
//                 bandwidth is above the geometric mean of the cache's and the memory's
//   gemm          for every (tile_m, tile_n, tile_k_overhead) among candidate values, unit_flops
//                 by least squares on relative errors of y - host - launch against the wave
//                 model's FLOP-equivalents (op_cost.hpp); the candidate with the least squared
//                 relative error of the whole model wins
//   conv          y less the host parts = fixed_s + implicit-GEMM time at efficiency 1 /
//                 efficiency of the pass: one fixed cost and three efficiencies by least squares
//                 on relative errors, reweighted to be robust (fixed_s kept non-negative)
//   elementwise   per class and direction, elements per second by least squares on relative
//                 errors over the sizes that fit the cache (y less the host parts and the other
//                 kernels' traffic)
//   attention     (fused only) per direction, FLOPs / ((y - host parts) x units x unit_flops)
// The report of the fit (per group: samples, median and worst relative error of the fitted model
// against the timings) goes in the file's "fit".
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "profiles/zoo/op_params.hpp"
#include "profiles/zoo/ops.hpp"

namespace pipetwin::zoo {

// One timed case: an op at micro-batch b (or the first layer's variant), its forward or backward.
struct BenchCase {
  std::string group;  // "gemm", "conv", "elementwise", "attention", "bandwidth"
  OpSpec op;
  int b = 1;
  bool first_layer = false;
  bool backward = false;
  ConvPass conv_pass = ConvPass::forward;  // conv backward: which product alone was timed
  double measured_s = 0;
  double spread = 0;  // (max - min) / median of the repeats
};

struct MicrobenchData {
  std::string device;  // catalog name to record ("cpu-core")
  std::string dtype = "float32";
  std::string machine;  // what it ran on, in words (CPU model, threads; GPU name)
  bool async = false;   // a GPU
  double units = 1;     // SMs or cores
  std::string units_source;
  double host_s = 0, node_s = 0, tensor_s = 0, launch_s = 0;
  bool fused_attention = false;
  struct Copy {
    double bytes = 0, measured_s = 0;
  };
  std::vector<Copy> copies;  // plain copies of buffers of increasing size
  std::vector<BenchCase> cases;
};

OpParams fit_op_params(const MicrobenchData& data);

// Solves a x = b for a small dense system by Gaussian elimination with partial pivoting; false
// when a pivot's magnitude falls below `singular`. The fit and its validation both use it.
bool solve_small(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x,
                 double singular);

// The fitted model's time for one case (host parts included).
double predict_case(const BenchCase& c, const OpParams& p, const std::string& dtype);

}  // namespace pipetwin::zoo
