// `pipetwin import-trace`: PyTorch profiler traces of a model become a pipetwin profile
// (core/profile.hpp; docs/import-trace.md walks through it).
//
// One trace per micro-batch size gives each layer one timing row: the median over the trace's
// measured steps (attribute.hpp says how a step's time is split over the layers) of the layer's
// forward and backward time. The recompute time is taken equal to the forward (a trace of plain
// training has none). The optimizer step's time is split over the layers in proportion to their
// parameter bytes — SGD's update streams each parameter, its gradient (and state) once, so its
// time grows with the bytes; where a trace records no bytes (no shapes, no metadata), in
// proportion to the time its layer's AccumulateGrad nodes took, which stream the same bytes once —
// unless the trace has one "pipetwin.optimizer:<layer>" range per layer; its figure is the median
// over the traces. A trace recorded without pipetwin's helper is first read as plain.hpp says.
// Bytes and skip connections come from the trace's metadata or shapes (layer_bytes.hpp). Edges: a
// chain, plus one edge per skip.
//
// What could not be attributed to any layer is never dropped: the profile's notes and the
// per-trace report give it as a share of the step time, with its largest parts by operator.
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/profile.hpp"
#include "profiles/trace_import/attribute.hpp"
#include "profiles/trace_import/kineto.hpp"

namespace pipetwin::trace_import {

struct ImportOptions {
  LayerSelection layers;
  std::vector<int> micro_batches;  // --micro-batch: one per trace; empty: from each trace
  std::string device;              // catalog device name; empty: from the traces
  std::string model;               // empty: the metadata's, else the first file's name
  bool loss_to_last_layer = true;  // --loss last (default) or unattributed (attribute.hpp)
};

struct TraceReport {
  std::string origin;
  int micro_batch = 0;
  int measured_steps = 0, all_steps = 0;
  bool device_time = false;
  double step_s = 0;              // median over measured steps
  double unattributed_s = 0;      // median
  double unattributed_share = 0;  // median of unattributed / step
  double loss_s = 0;              // median forward time of the loss (attribute.hpp)
  // The largest unattributed parts, medians over the steps, largest first.
  std::vector<std::pair<std::string, double>> unattributed_parts;
  int backward_ops = 0, backward_attributed = 0;  // outermost backward ops, all measured steps
  bool bytes_from_metadata = false;
  // From the recording helper's metadata (python/pipetwin_trace.py); -1: not recorded. A step
  // that runs much longer profiled than not, or pays page faults, reads high: pipetwin's
  // executor keeps its heap (exec/platform/host.cpp) and runs no profiler.
  double unprofiled_step_s = -1, page_faults_per_step = -1;
};

// Page faults per profiled step from which import-trace warns that the recording's tensors
// landed on fresh pages (the helper's steady_heap() leaves about 0; 1,000 per step cost 2 ms
// of a 14 ms step on this project's VM).
inline constexpr double kManyPageFaultsPerStep = 50;

struct ImportResult {
  Profile profile;
  std::vector<TraceReport> traces;  // by micro-batch size
};

// Imports traces (at least one; one micro-batch size each). Errors are InputErrors naming the
// trace file and what is wrong or missing.
ImportResult import_traces(const std::vector<KinetoTrace>& traces, const ImportOptions& options);

// The flags of `pipetwin import-trace` as given, with their defaults: the CLI's and the Python
// API's import_trace() keywords (the trace files, --layers, --micro-batch, --device, --model,
// --loss, --catalog).
struct ImportFlags {
  std::vector<std::string> traces;
  std::string layers = "children", device, model, loss = "last", catalog;
  std::vector<int> micro_batches;

  // The import's options; an InputError naming the flag for a bad --layers value, a --loss other
  // than last or unattributed, or a micro-batch size below 1.
  ImportOptions options() const;
};

// `pipetwin import-trace`: --device checked against `catalog`, the trace files at `paths` loaded
// and imported, and the profile's device checked against `catalog` too (InputErrors naming it).
ImportResult import_files(const std::vector<std::string>& paths, const ImportOptions& options,
                          const Catalog& catalog);

// The warning for a recording whose tensors landed on fresh pages (page_faults_per_step at or
// above kManyPageFaultsPerStep): "<trace>: 812 page faults per profiled step: ..."; "" otherwise.
std::string page_fault_warning(const TraceReport& report);

// The catalog device (hardware/devices.json) a CUDA device name stands for ("NVIDIA H100 80GB
// HBM3" -> "h100-sxm"); empty when unknown.
std::string catalog_device_for(const std::string& device_name);

}  // namespace pipetwin::trace_import
