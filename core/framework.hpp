// Framework: the time a training framework adds to what its profile measures, as seven terms the
// cost model applies (docs/framework-fit.md). A profile times layers one by one; a framework
// running a pipeline also spends time between and around them — dispatching an action, launching
// a layer's kernels, the per-iteration bookkeeping of its optimizer step — and reaches another
// fraction of the hardware's speed than the profile (or the analytic model) assumed:
//
//   iteration_s          per iteration, per stage: added to the stage's optimizer step
//                        (zero_grad, the step's launch, loss-scale checks, the step's barrier)
//   micro_batch_s        per micro-batch, per stage and pass: added to every forward, backward
//                        (its input half when split) and recompute of a stage
//   layer_launch_s       per layer and pass: added to each layer's forward, backward (input half)
//                        and recompute
//   compute_scale        multiplies every profiled compute time (forward, backward, recompute,
//                        optimizer step, cold starts): 1 / the framework's compute efficiency
//                        relative to the profile
//   communication_scale  multiplies every transfer's and all-reduce's time (latency and
//                        bandwidth alike): 1 / its communication efficiency
//   transfer_host_s      per hand-off between stages on two devices, at each end: the time the
//                        send or the receive takes from its stage's compute (the executor's
//                        transfer threads run on the stage's core; a framework's host-side work
//                        to post a P2P op): added to the forward that sends an activation or
//                        receives one, and to the backward that sends or receives a gradient
//   contention_scale     multiplies the profile's co-runner slowdown beyond 1 (contention - 1)
//                        of devices sharing a core or a GPU: how much more (or less) the stages
//                        of a running pipeline slow each other than the profiler's co-runner did
//
// The identity (0, 0, 0, 1, 1, 0, 1) changes nothing, bit for bit: x * 1.0 + 0.0 == x. A plan carries
// its framework (core/plan.hpp "framework", absent for the identity), so `simulate` applies what
// `plan --framework` chose. The terms are fitted from measured runs by `pipetwin calibrate --runs`
// (studies/framework_fit.hpp).
//
// This is distinct from the framework's memory (core/framework_memory.hpp), which the catalog
// keeps per device kind.
//
// Format "pipetwin.framework" version 1:
//   {"format": "pipetwin.framework", "version": 1, "name": "pipetwin-executor-cpu",
//    "description": "...", "source": "...",
//    "terms": {"iteration_s": 0, "micro_batch_s": 6.1e-05, "layer_launch_s": 2e-06,
//              "compute_scale": 1.04, "communication_scale": 0.9, "transfer_host_s": 1e-05,
//              "contention_scale": 2.5},
//    "fit": {...}}   (what calibrate --runs measured it from; kept, not read)
// A bad field is an InputError naming the file and the field.
//
// Thread-safety: a value type; pure functions.
#pragma once

#include <string>

#include "core/json_io.hpp"

namespace pipetwin {

struct Framework {
  std::string name;  // "": no framework given (the identity)
  std::string description;
  std::string source;
  double iteration_s = 0;
  double micro_batch_s = 0;
  double layer_launch_s = 0;
  double compute_scale = 1;
  double communication_scale = 1;
  double transfer_host_s = 0;
  double contention_scale = 1;
  Json fit;  // the fit's report (calibrate --runs), written back as read

  // Every term at its neutral value: the cost model is unchanged.
  bool identity() const {
    return iteration_s == 0 && micro_batch_s == 0 && layer_launch_s == 0 && compute_scale == 1 &&
           communication_scale == 1 && transfer_host_s == 0 && contention_scale == 1;
  }
};

// The seven terms in a fixed order, for code that fits or prints them (studies/framework_fit.hpp).
enum class FrameworkTerm {
  kIteration,
  kMicroBatch,
  kLayerLaunch,
  kCompute,
  kCommunication,
  kTransferHost,
  kContention
};
inline constexpr int kFrameworkTerms = 7;

// "iteration_s", "micro_batch_s", "layer_launch_s", "compute_scale", "communication_scale",
// "transfer_host_s", "contention_scale".
const char* framework_term_name(FrameworkTerm term);
// The term's value in `f`, and a reference to it.
double framework_term(const Framework& f, FrameworkTerm term);
double& framework_term(Framework& f, FrameworkTerm term);
// The term's neutral value: 0 for the overheads, 1 for the scales.
double framework_term_neutral(FrameworkTerm term);
// The term named `name` ("micro_batch_s", or the short "micro_batch"); InputError naming `flag`
// and the names otherwise.
FrameworkTerm parse_framework_term(const std::string& name, const std::string& flag);

Json framework_to_json(const Framework& f);
// The document (a "pipetwin.framework" file), or the object a plan embeds under "framework".
Framework framework_from_json(const JsonView& doc);
Framework load_framework(const std::string& path);
void save_framework(const Framework& f, const std::string& path);

}  // namespace pipetwin
