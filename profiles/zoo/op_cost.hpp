// Op-level cost: the kernels a zoo layer launches (profiles/zoo/ops.hpp) priced on one device in
// one dtype with that device's op parameters (profiles/zoo/op_params.hpp), summed into the
// layer's forward, backward (and its weight half) and optimizer-step times: an analytic Profile
// (source "analytic") like profiles/zoo/analytic.hpp's roofline, from operations instead of
// per-kind efficiencies.
//
// GEMM (batch x [M x K] [K x N]): wave quantisation over the device's units (Volkov and Demmel
// 2008; NVIDIA's "Matrix Multiplication Background" guide on tile and wave quantisation):
//   tiles   = batch x ceil(M / tile_m) x ceil(N / tile_n)
//   waves   = ceil(tiles / units)
//   compute = waves x 2 tile_m tile_n (K + tile_k_overhead) / unit_flops
//   memory  = batch (M K + K N + M N) elem / bandwidth(working set)
//   body    = max(compute, memory)
// so a GEMM of exactly one wave costs one tile's time, and one tile more a second wave: small
// GEMMs lose efficiency as they do on real GPUs. A CPU stage is one unit (one core): waves are
// then tiles, and the quantisation pads M and N to its micro-kernel's block.
// Convolution: implicit GEMM for every pass (forward M = b oh ow, N = c_out, K = c_in kh kw;
// dgrad M = b h w, N = c_in, K = c_out kh kw; wgrad M = c_out, N = c_in kh kw, K = b oh ow),
// over the pass's efficiency, plus the file's fixed cost per convolution call; for a 3x3 stride-1
// forward or dgrad in a dtype the device runs
// Winograd in, Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", CVPR 2016): 16 GEMMs of [b ceil(oh/2) ceil(ow/2) x c_in] [c_in x c_out] (2.25x fewer
// multiplications than the 36 of direct 2x2 outputs), plus input and output transforms that read
// and write 4x the input and output through memory. The cheaper of the two is taken, as cuDNN's
// heuristics aim to.
// Fused attention: its FLOPs at units x unit_flops x attention efficiency, or its traffic.
// Element-wise: max(elements / the class's rate, bytes / bandwidth(working set)); classes without
// a rate (a GPU's) are bound by bandwidth alone. bandwidth(ws) is cache_bandwidth while the
// working set fits in cache_bytes, else the memory bandwidth.
// A kernel also costs launch_s on the device and host_s on the host. A pass (the kernels of a
// forward, a backward, a step) runs them in order: synchronously (a CPU: host then device, each
// kernel in turn), or asynchronously (a GPU: the host issues kernel i at h_i = h_{i-1} + host_s,
// the device runs it from max(h_i, the end of kernel i-1)); the pass ends with its last kernel.
// A backward also pays host_node_s per autograd node on the host. The optimizer step makes the
// rule's calls (sgd 1, momentum 3, adam 8: exec/runtime/optimizer.cpp's foreach paths), each
// paying host_tensor_s per parameter tensor, and moves the rule's traffic (core/precision.hpp).
// op_level_profile then applies the file's layer refinement where it has one (op_params.hpp):
// every pass times its scale, plus its boundary times on the model's first and last layer.
// Under float16/bfloat16 (autocast), GEMMs and convolutions move 2-byte elements and the
// forward casts each weight (a 4 -> 2 byte copy); kernels marked fp32 (norms, softmax, the
// residual stream, the loss) move 4-byte ones.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "profiles/zoo/analytic.hpp"
#include "profiles/zoo/op_params.hpp"
#include "profiles/zoo/ops.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

struct GemmCost {
  double tiles = 0, waves = 0;
  double compute_s = 0, memory_s = 0;
  double body_s() const { return compute_s > memory_s ? compute_s : memory_s; }
};
GemmCost gemm_cost(double batch, double m, double n, double k, const OpParams& p,
                   const std::string& dtype);

enum class ConvAlgo { implicit_gemm, winograd };
const char* conv_algo_name(ConvAlgo a);
struct ConvCost {
  ConvAlgo algo = ConvAlgo::implicit_gemm;
  double body_s = 0;
};
// The algorithm (and its time) for pass `pass` of `conv` at batch b.
ConvCost conv_cost(const OpSpec& conv, ConvPass pass, double b, const OpParams& p,
                   const std::string& dtype);

// Memory bandwidth for a working set of `bytes`.
double bandwidth_for(double bytes, const OpParams& p);

// The kernel's time on the device (launch included) and on the host.
struct KernelTime {
  double host_s = 0, device_s = 0;
};
KernelTime kernel_time(const Kernel& k, const OpParams& p, const std::string& dtype);

// A pass of kernels in order, plus `nodes` autograd nodes on the host.
double pass_time(const std::vector<Kernel>& kernels, int nodes, const OpParams& p,
                 const std::string& dtype);

struct LayerCost {
  double forward_s = 0, backward_s = 0, backward_weight_s = 0, step_s = 0;
  double forward_host_s = 0, backward_host_s = 0;  // host shares (the fixed part)
};
struct OpCostOptions {
  std::string dtype = "float32";
  std::string optimizer = "sgd";
  bool first_layer = false;
};
// The ops of `layer` (ZooLayer::ops, or generic_ops when it lists none) at micro-batch b.
std::vector<OpSpec> layer_ops(const ZooLayer& layer);
LayerKernels layer_kernels(const ZooLayer& layer, int b, const OpParams& p, const OpCostOptions& o);
LayerCost layer_cost(const ZooLayer& layer, int b, const OpParams& p, const OpCostOptions& o);

// The op-level analytic profile of `model` on `device` (options.efficiency is not used).
Profile op_level_profile(const ZooModel& model, const DeviceSpec& device, const OpParams& p,
                         const AnalyticOptions& options = {});

}  // namespace pipetwin::zoo
