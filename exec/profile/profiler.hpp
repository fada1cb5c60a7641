// Profiler: measures a model's Profile (core/profile.hpp) on this machine.
//
// Layers are timed in sequence, the way a stage runs them, so each sees the caches a pipeline
// run leaves it: one pass at micro-batch size b is the forward of every layer in order, untimed
// and then timed per layer (each layer's input is the previous output detached, which is what a
// stage with per-layer backward does and costs nothing measurable), the forward again (the
// recompute that checkpointing replays before backward, timed per layer), the backward of every
// layer in reverse order on the timed forward's graph (timed per layer; the last layer's backward
// starts at the loss) and one optimizer step per layer on the gradients it produced (zeroing them
// after, as a stage does). Each figure is the median over `repeats` passes after `warmup` passes.
// The first layer computes no input gradient, as the first stage does not.
//
// Contention: where the process may use two cores or more and `contention` is on, the passes are
// repeated while a co-runner thread, pinned to the second core with its own copy of the model,
// runs the same passes without pause; each layer's contention factors at size b are its times
// with the co-runner over its times alone, at least 1: one for the forward (forward + recompute)
// and one for the backward (it applies to the optimizer step too), since they differ
// (profiler.cpp). The co-runner's passes run on across pauses, so a measured layer sees any part of
// its pass; what slows a pass depends mostly on its own kind, not on the kind beside it (a
// BERT-tiny block: backward 1.28 beside forwards, 1.26 beside backwards). On the CI machine class
// the two vCPUs share one physical core (hardware/devices.json, cpu-core core_sharing), and the
// simulator uses this factor while two stages of a core compute at once. The co-runner runs the
// same layers rather than another stage's: a careful approximation, since which layers overlap in a
// pipeline depends on the plan; the factor depends mostly on the operation kind (GEMM vs
// memory-bound), which the co-runner's mix shares with the model's.
//
// Cold starts: on a CPU, with contention measured, passes that sleep before their forward and
// their backward (each of ProfileOptions::cold_pauses_s in turn) while the co-runner computes
// give each layer's cold_forward_s / cold_backward_s: its time after the wait less its time
// beside the co-runner without one. A stage that waits for its neighbour while that neighbour
// computes on the other hyper-thread of the same core finds its weights and saved activations
// evicted from the caches the two share (BERT-tiny's first half at micro-batch 8: its backward
// 1.07 ms slower after an 18 ms wait beside the other, 0.4 ms after the same wait idle).
//
// Cores: with two usable cores or more (and `contention` on), the passes at the largest size are
// also timed alone on each core (at most 8), giving the profile's core_slowdown: the cores of a
// virtual machine need not be alike.
//
// Split backward: the alone passes also time each layer's backward split in two as zero-bubble
// schedules run it (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Section 2): the input
// half with the linears' weight halves deferred, then the deferred weight halves
// (models/split_linear.hpp, exec/runtime/weight_grad_store.hpp). The weight half is the profile's
// backward_weight_s; weight gradients of other operations (LayerNorm, embeddings, convolutions)
// come with the input half, so a layer without linears has none. The halves' sum is compared with
// the whole backward and the notes say by how much they differ (the split costs what the whole
// does, give or take the host's noise; nothing fails on it).
//
// Memory: bytes per sample of the output and of everything the forward keeps alive for backward
// (the counting allocator, memory_tracker.hpp); parameter and optimizer-state bytes.
//
// On a GPU (torch_device cuda or cuda:I, exec/platform/device.hpp) the model and its inputs live
// there, each layer's time is the GPU's between CUDA events recorded around it, bytes come from the
// CUDA caching allocator, and the profile records the GPU's catalog entry unless `device` names
// one. Contention there is what stages that share one GPU as stream sets (torchgpipe's layout,
// hardware/clusters/h100-1gpu.json) cost each other: the co-runner issues its passes on streams
// of its own on the same GPU (from its own thread and core), each pass waited for before the
// next, so its kernels compete with the measured ones for the SMs and memory bandwidth and none
// are left queued once it pauses. Small kernels that leave most of the GPU idle overlap (a factor
// near 1); kernels that fill it take turns (near 2). There is no core slow-down on a GPU.
//
// Thread-safety: call from one thread at a time (it uses the process-wide memory counters).
#pragma once

#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "core/profile.hpp"
#include "exec/runtime/optimizer.hpp"

namespace pipetwin::exec {

struct ProfileOptions {
  std::vector<int> micro_batches{1, 2, 4, 8};
  int warmup = 2;
  int repeats = 7;
  bool float64 = false;
  // Autocast mixed precision (exec/runtime/autocast.hpp): kBFloat16 or kHalf; Undefined: none. The
  // layers run under autocast, so their times and saved bytes are mixed precision's.
  at::ScalarType autocast = at::ScalarType::Undefined;
  int threads = 1;
  bool pin = true;
  bool contention = true;      // measure contention factors (needs two usable cores, or a GPU)
  bool split_backward = true;  // measure the split backward's weight half (backward_weight_s)
  // Waits (seconds, increasing) after which the cold-start extras are measured, on a CPU with
  // contention measured; empty: not measured.
  std::vector<double> cold_pauses_s{0.001, 0.004, 0.016};
  uint64_t seed = 1;
  OptimizerConfig optimizer;
  // Catalog name recorded in the profile; "" on a GPU: its catalog entry
  // (exec/platform/device.hpp).
  std::string device = "cpu-core";
  std::string torch_device = "cpu";  // where to measure: cpu, cuda or cuda:I
};

Profile profile_model(const std::string& model, const ProfileOptions& options);

}  // namespace pipetwin::exec
