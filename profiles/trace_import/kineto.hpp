// A PyTorch profiler trace, read: the complete events of a Kineto Chrome-trace JSON file.
//
// torch.profiler writes Kineto's Chrome trace ("JSON Object Format" of the Trace Event Format:
// {"traceEvents": [...], "deviceProperties": [...], ...}); builds of PyTorch without Kineto write
// the legacy profiler's "JSON Array Format" (a bare array of events). Both are read here. Only
// complete events (ph "X": ts and dur in microseconds) carry what pipetwin needs; metadata ("M"),
// flow ("s"/"f"), instant and counter events are skipped.
//
// Each event is sorted into one of three kinds by its Kineto category ("cat"):
//   - host: operators and ranges on a CPU thread ("cpu_op", "user_annotation" — what
//     torch.autograd.profiler.record_function makes —, "python_function", or no category);
//   - runtime: CUDA runtime/driver calls on a CPU thread ("cuda_runtime", "cuda_driver"), which
//     launch device work and share its "correlation" id;
//   - device: work on a GPU lane ("kernel", "gpu_memcpy", "gpu_memset").
// A host event is a range (`TraceEvent::range`) rather than an operator when its category is
// "user_annotation" or "python_function", or, in a trace without categories (the legacy
// profiler's export), when it is named as pipetwin's ranges are ("pipetwin.", "nn.Module: ") or
// as torch's own record_function ranges are ("ProfilerStep#<n>", "Optimizer.step#<Class>.step",
// "Optimizer.zero_grad#..."); on a CPU trace a range's time is that of the operators it holds
// (attribute.hpp).
// Kineto's copies of user ranges on GPU lanes ("gpu_user_annotation") and its own bookkeeping
// ("Trace", "overhead", "cuda_sync") are dropped. Host and runtime events on one thread nest
// (PyTorch's RecordFunction ranges are properly nested per thread); `parent` is the innermost
// host or runtime event of the same thread that encloses an event. An event of zero duration that
// starts where the innermost open one ends is inside it: whole-microsecond timestamps (the legacy
// export) round a last child's start up to its parent's end (aten::fill_ at the end of
// aten::ones_like, Debian's torch 1.13); so is one of at most 1 us in such a file (aten::relu's
// aten::clamp_min, written from where the relu ends).
//
// The args pipetwin reads (PyTorch's profiler writes them; torch/csrc/profiler, libkineto):
// "Sequence number" and "Fwd thread id" (autograd: a backward op carries its forward op's
// sequence number), "Input Dims" and "Input type" (record_shapes=True), "correlation" and
// "External id" (a kernel and the runtime call or operator that launched it), and on torch 2.x's
// python_function events (with_stack=True) "Python id" and "Python parent id", the Python call
// tree (torch/csrc/autograd/profiler_kineto.cpp, AddTensorboardFields: the parent is the nearest
// enclosing Python event, null for a root).
//
// Errors are InputErrors "<file>: <json path>: <what>", naming the bad value (core/json_io.hpp).
//
// Thread-safety: plain value types; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin::trace_import {

enum class EventKind { kHost, kRuntime, kDevice };

struct TraceEvent {
  std::string name;
  EventKind kind = EventKind::kHost;
  bool range = false;  // a host range (record_function, a Python frame), not an operator
  int lane = 0;        // the (pid, tid) it ran on, numbered in order of first appearance
  double ts_us = 0, dur_us = 0;
  int64_t sequence = -1;       // "Sequence number"; -1: none (AccumulateGrad's is UINT64_MAX: none)
  int64_t fwd_thread = -1;     // "Fwd thread id"; -1: none
  int64_t correlation = -1;    // "correlation"; -1: none
  int64_t external_id = -1;    // "External id"; -1: none
  int64_t python_id = -1;      // "Python id"; -1: none (not a python_function event)
  int64_t python_parent = -1;  // "Python parent id"; -1: none or null (a root)
  // A "nn.Module: " python_function event's depth in the Python call tree: the module events
  // among its Python ancestors, plus one (the model itself is 1); 0: not such an event, or no
  // "Python id". It stands where timestamps nest Python frames and operators apart.
  int module_depth = 0;
  // "Input Dims": one shape per input (empty for a scalar or a non-tensor), and "Input type".
  bool has_input_dims = false;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<std::string> input_types;
  int parent = -1;        // index of the enclosing host/runtime event on the same lane; -1: none
  size_t file_index = 0;  // position in the file's event array, for messages

  double end_us() const { return ts_us + dur_us; }
};

struct KinetoTrace {
  std::string origin;       // the file, for messages
  std::string events_path;  // "traceEvents", or "" for the array format: events_path[i]
  // Complete events, sorted by lane, then start, then longer first (an enclosing range before
  // what it encloses), then file order.
  std::vector<TraceEvent> events;
  std::vector<std::string> device_names;  // "deviceProperties"[].name (GPU traces)
  Json metadata;  // the top-level "pipetwin" object python/pipetwin_trace.py adds; null: none

  bool has_device_events() const;
};

// Reads the events of a parsed trace document; `origin` names it in errors.
KinetoTrace parse_kineto_trace(const Json& doc, const std::string& origin);
// Loads and reads a trace file (a missing file, bad JSON or a bad event: InputError).
KinetoTrace load_kineto_trace(const std::string& path);

// Adds `extra` events (ranges pipetwin makes explicit: profiles/trace_import/plain.hpp) to the
// trace, sorted and nested as read ones are; at equal start and duration an added event encloses
// a read one.
void add_events(KinetoTrace& trace, std::vector<TraceEvent> extra);

// Bytes of one element of a profiler "Input type" ("float", "c10::Half", "long int", ...); 0 when
// the type is not a known scalar type (a list, a string, "Scalar", "").
double element_bytes(const std::string& input_type);

}  // namespace pipetwin::trace_import
