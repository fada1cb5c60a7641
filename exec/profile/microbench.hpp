// Micro-benchmark: times, on the machine at hand, what the op-level cost model
// (profiles/zoo/op_cost.hpp) needs to price a device: a grid of GEMM shapes, convolutions (forward
// and each backward product alone), every element-wise class forward and backward at sizes from
// the cache to memory, plain copies of growing buffers (bandwidth), attention as the executor
// runs it (fused where this LibTorch has the kernel), and the fixed costs: an operator's host
// time, an autograd node's, an optimizer's per parameter tensor, a GPU's launch latency.
// profiles/zoo/op_fit.hpp fits an op-parameter file to the timings; `pipetwin calibrate
// --microbench -o FILE` runs both and writes the file.
//
// Every timing is the median of `repeats` runs after `warmup` (ordinary LibTorch calls: at::mm,
// at::conv2d, at::gelu, ...), on one compute thread pinned to one core as the executor's stages
// run (exec/platform/host.hpp), forward with autograd recording as in training, backward through
// the autograd engine on a fresh graph each run (the profiler's pattern,
// exec/profile/profiler.hpp). Cases whose spread (max - min over the median) is large are kept: the
// fit is robust to them and the report shows the spread.
//
// Thread-safety: call from one thread at a time (it sets the calling thread's affinity and
// LibTorch's intra-op threads).
#pragma once

#include <functional>
#include <string>

#include "profiles/zoo/op_fit.hpp"

namespace pipetwin::exec {

struct MicrobenchOptions {
  std::string torch_device = "cpu";  // cpu, cuda or cuda:I
  std::string device = "cpu-core";   // catalog name recorded in the file
  std::string dtype = "float32";
  int threads = 1;
  bool pin = true;
  int warmup = 2;
  int repeats = 9;
  bool quick = false;  // fewer shapes and sizes (tests)
  double units = 1;    // SMs of a GPU (the catalog's op file says), cores on a CPU
  std::string units_source = "one core: the executor runs a stage on one intra-op thread";
};

// Runs the benchmark; `progress` (optional) gets a line per group.
zoo::MicrobenchData run_microbench(const MicrobenchOptions& options,
                                   const std::function<void(const std::string&)>& progress = {});

}  // namespace pipetwin::exec
