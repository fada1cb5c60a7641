// Attribution: the time of each training step of a PyTorch profiler trace, split over the model's
// layers (docs/import-trace.md, docs/design.md "Profile").
//
// The trace marks its structure with record_function ranges (python/pipetwin_trace.py makes
// them): "pipetwin.step:<i>" around each training step, "pipetwin.layer:<name>" around each layer's
// forward, "pipetwin.optimizer" around the optimizer step (and, optionally,
// "pipetwin.optimizer:<layer>" around the part of it that updates one layer). A trace recorded
// without the helper is first given such ranges where it can be (plain.hpp: steps from
// torch.profiler's ProfilerStep#<n> or the optimizer's ranges, layers from metadata or --layers N).
// With no "pipetwin.layer:" range it may have torch.profiler's module ranges instead
// (with_stack=True in torch 2.x: "nn.Module: <Class>_<k>" python_function events, k counting the
// class's instances; PyTorch 2.x, torch/csrc/profiler/): the layers are then those, the
// outermost (the model itself, and the loss module) not counted as a level, the levels read from
// the Python call tree where the trace has it (kineto.hpp, TraceEvent::module_depth). Python
// frames are ranges: they are looked through. Per measured step (every step but the first, which
// is warm-up):
//   - forward: a layer's ranges inside the step, on a CPU trace by the durations of the operators
//     they hold (outermost ones, through nested ranges: kineto.hpp's TraceEvent::range), on a GPU
//     trace by the device time of the kernels launched inside them (kernel <-> runtime call by
//     the "correlation" arg, else kernel <-> operator by "External id"). On a CPU a range's wall
//     time also holds the Python between its operators (module calls, the hooks that open the
//     range) and the profiler's bookkeeping, which pipetwin's executor does not run: a Linear +
//     ReLU layer of width 256 at micro-batch 128, 263 us of range around 249 us of operators
//     (Debian's torch 1.13, 2-vCPU VM). That time is unattributed, as what the step's own range
//     holds outside operators is (the same applies to the optimizer's ranges);
//   - backward: PyTorch's autograd engine runs each backward node inside a range
//     "autograd::engine::evaluate_function: <Node>" that carries the "Sequence number" of the
//     forward operator that made the node; the layer whose forward range holds that operator owns
//     the node's time (the forward operator of a sequence number is the latest one recorded with
//     it: an operator records the number the next autograd node will get, so operators that make
//     no node share it with the next one that does); in a trace without sequence numbers (the
//     legacy profiler's export) the nodes are matched to their operators by name and order
//     (backward_order.hpp). Gradient accumulation into a parameter
//     ("AccumulateGrad") has no sequence number; the engine runs it as soon as the gradient is
//     ready (its sequence number is the highest, torch/csrc/autograd/engine.cpp ReadyQueue), i.e.
//     right after the node that made the gradient on the same thread, so it goes to that node's
//     layer;
//   - optimizer: the "pipetwin.optimizer" ranges' time (its split over layers is import.hpp's),
//     or per layer the "pipetwin.optimizer:<layer>" ranges where present and all of them name
//     selected layers;
//   - the loss: the outermost operators the step runs after the last layer's forward and before
//     its first backward op, outside every layer range (the loss function, backward()'s seed
//     gradient), and the
//     backward ops of its operators go to the last layer, as `pipetwin profile` charges them (in a
//     pipeline the last stage computes the loss); with loss_to_last_layer off they stay
//     unattributed;
//   - unattributed: the rest of the step's time (zero_grad, ops between layer ranges, the
//     profiler's own overhead), by operator name, never dropped.
// Sequence numbers are counted per forward thread; pipetwin assumes one forward thread (a trace
// does not say which of its lanes a backward op's "Fwd thread id" names).
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profiles/trace_import/kineto.hpp"

namespace pipetwin::trace_import {

inline constexpr std::string_view kStepPrefix = "pipetwin.step:";
inline constexpr std::string_view kLayerPrefix = "pipetwin.layer:";
inline constexpr std::string_view kModulePrefix = "nn.Module: ";
inline constexpr std::string_view kOptimizerRange = "pipetwin.optimizer";
inline constexpr std::string_view kOptimizerLayerPrefix = "pipetwin.optimizer:";
inline constexpr std::string_view kBackwardPrefix = "autograd::engine::evaluate_function: ";

// Whether `s` begins with `prefix` (the range names above).
inline bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Which ranges are the layers (--layers):
//   children  every "pipetwin.layer:" range not nested in another one (the default); in a trace
//             of module ranges, the model's child modules ("nn.Module: Linear_0" -> "Linear_0");
//   depth=N   "pipetwin.layer:" ranges nested in N-1 others (depth=1 is children; module ranges:
//             the model's modules N levels down);
//   N         a whole number: children, and there must be N of them; in a trace with no layer
//             ranges and no metadata that names them, the first N forward operators of each step,
//             one layer each (plain.hpp);
//   a,b,c     the ranges named so, "pipetwin.layer:a" or a plain record_function range "a" (a
//             single range named by a number is written "pipetwin.layer:3").
struct LayerSelection {
  enum class Mode { kChildren, kDepth, kCount, kNames };
  Mode mode = Mode::kChildren;
  int depth = 1;
  int count = 0;  // kCount
  std::vector<std::string> names;

  // Parses the --layers value; a bad one is an InputError naming the flag and the value.
  static LayerSelection parse(const std::string& spec);
  std::string to_string() const;
};

struct StepMeasure {
  double step_s = 0;  // the step range's duration (GPU: device time launched in the step)
  std::vector<double> forward_s, backward_s;  // per layer
  double loss_s = 0;       // the loss's forward (in the last layer's forward_s when attributed)
  double optimizer_s = 0;  // all "pipetwin.optimizer" ranges
  std::vector<double> optimizer_layer_s;  // per layer, from "pipetwin.optimizer:<layer>"
  // Per layer, its AccumulateGrad nodes' time (in backward_s too): gradients added into the
  // parameters' .grad, a stand-in for the parameter bytes where none were recorded (import.hpp).
  std::vector<double> accumulate_s;
  double unattributed_s = 0;  // step_s less everything attributed (forward, backward, optimizer)
  std::map<std::string, double> unattributed_by_name;  // its largest parts, by operator
};

struct TraceMeasure {
  std::vector<std::string> layers;        // forward order
  std::vector<int> first_range;           // per layer: its first range in the first measured step
  std::vector<int> measured_steps;        // the step ranges (event indices) measured, in time order
  int all_steps = 0;                      // steps in the trace, warm-up included
  std::vector<StepMeasure> steps;         // one per measured step
  bool device_time = false;               // GPU trace: times are the kernels' device time
  bool per_layer_optimizer = false;       // "pipetwin.optimizer:<layer>" ranges give the split
  bool optimizer_ranges_ignored = false;  // such ranges name layers not selected: not used
  int backward_ops = 0, backward_attributed = 0;  // outermost backward ops in measured steps
  bool loss_to_last_layer = true;                 // the loss is in the last layer's times
  // No backward op carries a sequence number (the legacy profiler's export): the nodes were
  // matched to the forward operators that made them by name and order (backward_order.hpp).
  bool backward_by_order = false;
};

// Measures every step of `trace` but the first; a trace without steps, layers or backward ops is
// an InputError naming its file and what is missing.
TraceMeasure measure_trace(const KinetoTrace& trace, const LayerSelection& selection,
                           bool loss_to_last_layer = true);

}  // namespace pipetwin::trace_import
