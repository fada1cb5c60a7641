// What a trace says of each layer's tensors: parameter bytes, output and saved bytes per sample,
// skip connections — from the "pipetwin" metadata python/pipetwin_trace.py writes into the trace,
// else estimated from the shapes the profiler recorded (record_shapes=True: "Input Dims", "Input
// type" of each operator).
//
// The metadata object, at the trace's top level (every field optional but "layers"' names):
//   "pipetwin": {"model": "mlp", "micro_batch": 8, "dtype": "float32", "device": "cpu",
//                "device_name": "...", "optimizer": "sgd", "input_bytes_per_sample": 256,
//                "layers": [{"name": "fc0", "kind": "linear", "param_bytes": 66560,
//                            "output_bytes_per_sample": 1024, "saved_bytes_per_sample": 1024,
//                            "skip_from": ["stem"]}, ...]}
// "skip_from" names the earlier layers whose outputs this layer reads besides its predecessor's.
// python/pipetwin_trace.py's annotate() also writes "forward_ops": [["aten::linear", "fc0"], ...,
// ["aten::add", ""]], the outermost operators of one forward and the layer each ran in, by which
// a trace without layer ranges is given them (plain.hpp).
//
// From shapes (no metadata for a layer): its input is the first tensor of the first operator in
// its range; its output is the next layer's input (the last layer's: the first tensor of the next
// operator after its range, usually the loss); saved bytes are taken equal to the output; its
// parameters are the tensors its outermost operators read whose leading dimension is not the
// micro-batch size. An estimate: the profile's notes say when it was used.
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profiles/trace_import/attribute.hpp"
#include "profiles/trace_import/kineto.hpp"

namespace pipetwin::trace_import {

struct LayerBytes {
  std::string kind = "layer";
  double param_bytes = 0;
  double output_bytes_per_sample = 0;
  double saved_bytes_per_sample = 0;
  std::vector<int> skip_from;  // earlier layers (indices) read besides the predecessor
  bool from_metadata = false;
};

// The trace's metadata fields that are not per layer (validated; absent fields stay empty/0).
struct TraceMetadata {
  std::string model, dtype, device, device_name, optimizer;
  int micro_batch = 0;                 // 0: not given
  double input_bytes_per_sample = -1;  // -1: not given
  // What python/pipetwin_trace.py measures around the recording: the median unprofiled step
  // (seconds) and the minor page faults per profiled step; -1: not given.
  double unprofiled_step_s = -1, page_faults_per_step = -1;
};

TraceMetadata read_metadata(const KinetoTrace& trace);

// The leading dimension of the first layer's input, from the recorded shapes; nullopt: none.
std::optional<int64_t> leading_dimension(const KinetoTrace& trace, const TraceMeasure& m);

// Per layer of `m` (same order); `input_bytes_per_sample` is set from the metadata or the first
// layer's input. `assumed_float` is set when a tensor's element type was not recorded.
std::vector<LayerBytes> layer_bytes(const KinetoTrace& trace, const TraceMeasure& m,
                                    int micro_batch, double& input_bytes_per_sample,
                                    bool& assumed_float);

}  // namespace pipetwin::trace_import
