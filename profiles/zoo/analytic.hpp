// Analytic cost: a roofline estimate of every layer of a zoo descriptor on a device, as a Profile
// (source "analytic") that the cost model, planner and simulator use like a measured one.
//
// A roofline (Williams, Waterman and Patterson, "Roofline", CACM 2009) per layer with per-op-kind
// efficiencies. For one task of a layer with f FLOPs and m bytes moved, on a device of peak P
// FLOP/s (for the dtype) and bandwidth W bytes/s:
//
//   time = overhead[kind, pass] + max(f / (P x efficiency[kind]), m / (W x memory_efficiency))
//
//   forward    f = b x forward FLOPs per sample
//              m = weights read (all parameters; none for an embedding, which gathers rows)
//                  + b x activation traffic per sample (profiles/zoo/zoo.hpp), in the dtype
//   backward   2 x the forward FLOPs (input and weight gradients: two products per forward
//              product); 2 x the forward traffic, and every weight read and its gradient written
//   recompute  = forward (checkpointing runs the forward again)
//   optimizer  the rule's state and, in float16/bfloat16, a float32 master copy of the weights
//              (core/precision.hpp: Adam in mixed precision is 2 + 2 + 4 + 8 bytes per
//              parameter); the step is memory-bound, its traffic per parameter is there too
//              (Adam in float32: 7 x 4 bytes)
// Contention (LayerTiming::contention, used only where devices share a GPU or a core): the roofline
// time assumes the task saturates the device, so beside one co-runner it gets half the device,
// except its launch overhead: (overhead + 2 x (time - overhead)) / time.
//
// The overhead is the fixed cost of a task: on a GPU the kernels it launches times the launch
// latency, on a CPU dispatch and autograd bookkeeping. It depends on the layer's op kind (an
// attention block launches many more kernels than a linear layer) and on the pass: a backward
// launches about twice a forward's kernels plus the autograd engine's work, an optimizer step
// about one kernel per parameter tensor (PyTorch's optimizers, torch/optim/sgd.py). A calibrated
// file therefore gives one overhead per (op kind, pass); the recompute is the forward. Kinds it
// does not list take its default_overheads, and a file without them (the built-in defaults,
// files written before per-kind overheads) one overhead_s for every task. The efficiencies and
// overheads are the constants below until calibrated against measured profiles
// (profiles/zoo/calibration.hpp), then read from a "pipetwin.efficiency" file.
//
// Default efficiencies (fractions of the device's peak FLOP/s), chosen as a careful engineer's
// prior for large-batch training kernels on GPUs, where matrix products reach 50-70% of peak and
// the memory system 70-80% of its bandwidth: mlp 0.65, linear 0.6, head 0.55, attention and
// cross-attention 0.45 (softmax and small per-head products run below the big GEMMs), conv and
// residual 0.5, cell 0.35 (AmoebaNet's many small ops), embedding and norm 0.3, any other kind
// 0.5; memory 0.75; overhead 20 us per task.
//
// Format "pipetwin.efficiency" version 1 (JSON):
//   {"format": "pipetwin.efficiency", "version": 1, "device": "cpu-core", "dtype": "float32",
//    "compute": {"attention": 0.61, ...}, "default_compute": 0.5, "memory": 0.9,
//    "overhead_s": 2.1e-05,
//    "overheads": {"attention": {"forward_s": 1.4e-04, "backward_s": 5.1e-04, "step_s": 7e-05}},
//    "default_overheads": {"forward_s": 9e-05, "backward_s": 3e-04, "step_s": 6e-05},
//    "notes": "...", "sources": {"conv": "...", "memory": "...", ...},
//    "fit": {...free-form report...}}
// "sources" (optional) says where each figure comes from, by field or op kind, for files derived
// from published benchmarks rather than fitted to this project's profiles (the Turing and Pascal
// GPUs of the papers reproduced, hardware/efficiency/). "overheads" and "default_overheads" are
// optional (files without them load as before, one overhead_s per task). Efficiencies must lie
// in (0, 2] (a calibrated value above 1 says the catalog's nominal peak is low for this
// workload); overheads must not be negative.
//
// Thread-safety: value types and pure functions (file I/O in load/save).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/json_io.hpp"
#include "core/precision.hpp"
#include "core/profile.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::zoo {

inline constexpr double kMaxEfficiency = 2.0;

// The passes of a layer that pay an overhead (a recompute is a forward).
enum class TaskPass { forward, backward, step };
const char* pass_name(TaskPass pass);  // "fwd", "bwd", "step"

// Fixed cost per task of one op kind, seconds.
struct TaskOverheads {
  double forward_s = 0, backward_s = 0, step_s = 0;
  double of(TaskPass pass) const;
  bool operator==(const TaskOverheads&) const = default;
};

struct Efficiency {
  std::map<std::string, double> compute;  // per op kind
  double default_compute = 0.5;           // kinds not listed
  double memory = 0.75;
  double overhead_s = 20e-6;                       // any task without an entry below
  std::map<std::string, TaskOverheads> overheads;  // per op kind (calibrated)
  std::optional<TaskOverheads> default_overheads;  // kinds not in `overheads` (calibrated)
  std::string device;  // what it was calibrated on; empty for the built-in defaults
  std::string dtype;
  std::string notes;
  std::map<std::string, std::string> sources;  // field or op kind -> where its figure comes from
  Json fit;                                    // the calibration's report, kept as written

  double compute_for(const std::string& kind) const;
  double overhead_for(const std::string& kind, TaskPass pass) const;
};

Efficiency default_efficiency();

Efficiency efficiency_from_json(const JsonView& doc);
Json efficiency_to_json(const Efficiency& e);
Efficiency load_efficiency(const std::string& path);
void save_efficiency(const Efficiency& e, const std::string& path);

// The two roofline terms of one task at 100% efficiency, in seconds.
struct TaskWork {
  double compute_s = 0;  // FLOPs / peak
  double memory_s = 0;   // bytes / bandwidth
};

// The work of one layer's forward and backward at micro-batch size b.
struct LayerWork {
  TaskWork forward, backward;
};
LayerWork layer_work(const ZooLayer& layer, int b, double peak_flops, double bandwidth,
                     double elem_bytes);

// The optimizer step's work: its traffic (core/precision.hpp ParamBytes::step_traffic).
TaskWork step_work(const ZooLayer& layer, const ParamBytes& per_param, double bandwidth);

// overhead[kind, pass] + max(compute / efficiency[kind], memory / memory efficiency).
double task_time(const TaskWork& w, const std::string& kind, TaskPass pass, const Efficiency& e);

struct AnalyticOptions {
  std::string dtype = "float32";
  std::string optimizer = "adam";  // sgd, momentum or adam (core/precision.hpp)
  std::vector<int> micro_batches = {1, 2, 4, 8, 16, 32};
  Efficiency efficiency = default_efficiency();
};

// Everything of the analytic profile but its times: memory per layer, edges, input bytes (shared
// by the roofline and the op-level model, profiles/zoo/op_cost.hpp). A non-positive micro-batch
// size or none is an InputError.
Profile analytic_memory_profile(const ZooModel& model, const DeviceSpec& device,
                                const AnalyticOptions& options = {});

// The analytic profile of `model` on `device`. A device without a peak FLOP/s for the dtype or
// without a memory bandwidth, or a non-positive micro-batch size, is an InputError.
Profile analytic_profile(const ZooModel& model, const DeviceSpec& device,
                         const AnalyticOptions& options = {});

// Peak FLOP/s and bandwidth of `device` for `dtype`, validated (InputError naming the device).
double device_peak(const DeviceSpec& device, const std::string& dtype);
double device_bandwidth(const DeviceSpec& device);

}  // namespace pipetwin::zoo
