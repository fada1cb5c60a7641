// StageRuntime: one pipeline stage's layers, weight versions, activations and gradients.
//
// It executes the compute actions of the schedule IR for its stage:
//   forward(mb, v)     run the layers on the weights of version v (the current ones). With a
//                      later recompute it runs without autograd and keeps only the inputs
//                      (checkpointing: torchgpipe Section 2.1); otherwise it keeps the graph.
//                      What it keeps and which version it pins come from the caller (ForwardKeep),
//                      which reads them off the liveness walk (core/schedule/liveness.hpp).
//   recompute(mb, v)   run again with autograd from the kept inputs, on version v's weights
//   backward(mb, v)    back-propagate the received output gradients (and the loss on the last
//                      stage) through the graph built on version v; return the input gradients
//   backward_input(mb, v), backward_weight(mb, v)
//                      the two halves of a split backward (zero-bubble schedules, Qi et al. 2024,
//                      Section 2): the input gradients now, the weight gradients later, through
//                      the stage's WeightGradStore (exec/runtime/weight_grad_store.hpp). The
//                      forward is told its backward is split (ForwardKeep::split) and records
//                      what W needs; after I the autograd graph is gone and the store holds that;
//                      W reads the version I read, and the micro-batch keeps it pinned until W.
//   optimizer_step(v)  apply the accumulated gradients, producing version v
// Inputs and outputs are lists in the order of StageSpec::inputs and ::outputs
// (exec/runtime/stage_io.hpp): one tensor each for a stage of a chain model; with cross-layer skip
// connections a stage may read several tensors (its predecessor's output, an encoder feature from
// stages back) and send several; every layer reads its main input (the previous layer's output) and
// its skip input from what the stage received or computed. Weight versions: a version's weights
// stay alive while a micro-batch pins them — from the forward or recompute that built its graph on
// them, or from a checkpointed forward whose recompute will read them (PipeDream's weight stashing
// under checkpointing), until its backward; the step then writes the new version into another
// instance of the layers. When nothing pins the current weights (synchronous schedules, FTPipe,
// Features Replay), the step updates them in place. This is the rule of core/schedule/liveness.hpp,
// and holding() lists what the stage keeps so the executor can check it against that walk.
//
// Gradients of all versions accumulate into one set of tensors (shared as .grad by every
// instance), which is what the all-reduce sums and the optimizer reads; the loss of a micro-batch
// is scaled by 1 / (samples per step) so gradients equal those of the mean loss of the mini-batch.
//
// A trainer runs a long training as a sequence of schedules ("windows", exec/runtime/session.hpp):
// begin_window() renumbers the current weights as version 0 for the next schedule, which is only
// possible between schedules (no micro-batch in flight, one version alive), and shifts the
// micro-batch numbers that key dropout so they stay global. The state accessors (parameters,
// buffers, optimizer, load_state) serve checkpoints and re-planning; they too are for use between
// schedules.
//
// Frozen layers (PipeTransformer Section 3.1): model layers below StageSpec::frozen_layers
// are frozen. Since freezing is bottom-up they are a prefix of the stage's layers. They run
// forward only — without autograd and in eval mode (no dropout; BatchNorm on its running
// statistics, which stay as they were), so their output is a function of the sample alone, as
// AutoCache (Section 3.4) requires of F_frozen — and get no gradient, no backward, no optimizer
// update and no all-reduce (the plan's buckets leave them out, core/cost_model.hpp). The graph of a
// micro-batch starts at the first active layer. A first stage's frozen prefix is F_frozen ("kept in
// a separate model instance F_frozen in the first device of a pipeline", Section 3.2.1): the
// worker runs it once per step over the replica's whole batch (frozen_forward) and hands forward()
// its output; a frozen prefix of a later stage (a plan that keeps frozen layers in place, "freeze
// only") runs inside forward(), and as nothing below it trains, its backward returns a zero input
// gradient for the upstream stage's schedule.
//
// Mixed precision (exec/runtime/autocast.hpp): with StageSpec::autocast set, forward, recompute,
// infer and the frozen prefix run their layers inside an autocast region of that dtype (on this
// thread, cleared when they end); the last stage computes its loss inside that region from the
// model's output as autocast left it, and autocast's policy for the loss operators (cross entropy,
// log_softmax, nll_loss: float32) casts it, as in an ordinary autocast training loop. The outputs
// keep the dtype autocast gave them (a bfloat16 activation crosses the stage boundary at 2 bytes),
// and backward casts each received output gradient to its output's dtype.
// Weights, gradients and optimizer state stay in the weights' dtype. With loss scaling (float16,
// exec/runtime/loss_scaler.hpp) the last stage multiplies its loss by the scaler's scale, and
// optimizer_step unscales the gradients, asks `agree` whether any stage overflowed, and skips the
// update if one did (the version still advances, with the same weights).
//
// Gradient norms (the freeze algorithm's input, Equation 1): with track_gradient_norms, every
// optimizer step records the squared L2 norm of each layer's gradient as the step applies it
// (after the all-reduce); take_gradient_norms() hands them over between windows.
//
// Thread-safety: not thread-safe; called from its device's compute thread only (the collective
// thread reads gradients() only while the schedule's dependencies keep the compute thread off
// them), or from the trainer's thread between schedules.
#pragma once

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/modules/container/any.h>

#include "exec/runtime/loss_scaler.hpp"
#include "exec/runtime/optimizer.hpp"
#include "exec/runtime/weight_grad_store.hpp"

namespace pipetwin::exec {

struct StageSpec {
  int stage = 0;
  std::vector<int> layers;  // model layer indices, ascending
  // Per entry of `layers`: the model layer whose output is its skip input, or -1 (empty: none).
  std::vector<int> skip_from;
  // Producers (model layers; -1 the model input) of the tensors forward() receives, and the layers
  // whose outputs it returns, both ascending (StageIO). Empty: a chain stage, which receives
  // layers[0] - 1 and, unless last, returns layers.back().
  std::vector<int> inputs;
  std::vector<int> outputs;
  bool first = false;               // receives the model input
  bool last = false;                // produces the loss
  double loss_scale = 1.0;          // 1 / samples per optimizer step
  bool per_layer_backward = false;  // back-propagate layer by layer (reports each layer's end)
  // Dropout masks of micro-batch mb come from models::micro_batch_dropout_key(dropout_seed,
  // replica, mb), in its forward and again in its recompute (layers.hpp "Dropout").
  uint64_t dropout_seed = 0;
  int replica = 0;
  int frozen_layers = 0;              // model layers [0, frozen_layers) are frozen (see above)
  bool track_gradient_norms = false;  // record per-layer gradient norms at each optimizer step
  // Autocast of forward and recompute (see above): kBFloat16 or kHalf on `autocast_device`
  // (kCPU or kCUDA); Undefined: none.
  at::ScalarType autocast = at::ScalarType::Undefined;
  c10::DeviceType autocast_device = c10::DeviceType::CPU;
  bool loss_scaling = false;  // dynamic loss scaling (exec/runtime/loss_scaler.hpp)
  LossScalerConfig loss_scaler;
};

// What a forward keeps until its micro-batch's recompute or backward, as the liveness walk says
// (core/schedule/liveness.hpp: Liveness::keeps_graph and pinned_after_forward).
struct ForwardKeep {
  bool graph = true;        // the graph (saved activations); false: only the inputs
  int pinned_version = -1;  // weight version kept alive for the micro-batch; -1: none
  // Its backward is split in I and W (the schedule has a BackwardWeight for it): the forward and
  // its recompute record the weight halves for W (exec/runtime/weight_grad_store.hpp).
  bool split = false;
  // A forward that keeps its graph pins the version it runs on (the graph references it).
  static ForwardKeep with_graph(int version) { return {true, version}; }
};

// What a stage holds now, in the terms of the liveness walk (core/schedule/liveness.hpp's
// LiveMicroBatch and LiveVersion), for the executor's check against it.
struct HeldMicroBatch {
  int micro_batch = -1;
  int graph_version = -1;   // the version its graph was built on; -1: no graph
  int pinned_version = -1;  // the version it keeps alive; -1: none
  auto operator<=>(const HeldMicroBatch&) const = default;
};
struct HeldVersion {
  int version = -1;
  bool current = false;
  int pins = 0;  // micro-batches in flight that pin it
  auto operator<=>(const HeldVersion&) const = default;
};
struct StageHolding {
  std::vector<HeldMicroBatch> micro_batches;  // ascending
  std::vector<HeldVersion> versions;          // ascending
  bool operator==(const StageHolding&) const = default;
};

// "[32, 16]": a tensor's shape for messages.
std::string shape_of(const at::Tensor& t);

class StageRuntime {
 public:
  using LayerFactory = std::function<std::vector<torch::nn::AnyModule>()>;
  // per-sample loss of the model's output against the target, shape [batch]
  using LossFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

  StageRuntime(StageSpec spec, LayerFactory factory, OptimizerConfig optimizer, LossFn loss);
  ~StageRuntime();

  const StageSpec& spec() const { return spec_; }
  int current_version() const { return current_; }
  // The weight version the last forward, recompute or backward ran on, as this runtime counts
  // versions itself (one per optimizer step), independently of what the schedule says.
  int last_version_used() const { return last_used_; }

  // Returns the outputs (detached), in spec().outputs order. `past_frozen`: inputs[0] is the
  // output of the stage's frozen prefix already (F_frozen).
  std::vector<at::Tensor> forward(int mb, int version, std::vector<at::Tensor> inputs,
                                  const ForwardKeep& keep, const at::Tensor& target,
                                  bool past_frozen = false);
  // Rebuilds the graph on version v, which the micro-batch pins from now on instead of what its
  // forward pinned.
  void recompute(int mb, int version);
  // `grad_outputs`: per output, the gradient summed over the stages that read it (undefined: none
  // reached it). Returns per input the gradient (zeros where none flowed; undefined for the model
  // input).
  std::vector<at::Tensor> backward(int mb, int version, const std::vector<at::Tensor>& grad_outputs,
                                   const std::function<void(int layer)>& on_layer_done);
  // The halves of a split backward (see above). backward_input takes and returns what backward
  // does, and reports no layer: the weight gradients are not complete before backward_weight,
  // which reports each layer as backward does.
  std::vector<at::Tensor> backward_input(int mb, int version,
                                         const std::vector<at::Tensor>& grad_outputs);
  void backward_weight(int mb, int version, const std::function<void(int layer)>& on_layer_done);
  // Micro-batches whose backward_input ran and whose backward_weight has not, ascending; the
  // weight-gradient closures micro-batch `mb` waits with, and the bytes all of them hold.
  std::vector<int> awaiting_weight() const { return wgrads_.awaiting(); }
  int deferred_weight_work(int mb) const { return wgrads_.pending(mb); }
  int64_t deferred_weight_bytes() const { return wgrads_.bytes(); }
  // With loss scaling, `agree` gets whether this stage's gradients overflowed and returns
  // whether any stage's did (null: this stage alone decides). Returns whether it updated.
  bool optimizer_step(int new_version, const std::function<bool(bool)>& agree = nullptr);
  // Untimed forwards of `inputs` holding `graphs` graphs at once, then their backwards (`split`:
  // each as its two halves, as the schedule will run them); the gradients are discarded
  // (executor warm-up).
  void warm_up(const std::vector<at::Tensor>& inputs, const at::Tensor& target, int graphs = 1,
               bool split = false);

  // Before a schedule: the current weights become version 0 and micro-batch mb of the schedule
  // is global micro-batch first_micro_batch + mb. Throws std::logic_error mid-schedule.
  void begin_window(int64_t first_micro_batch);
  // The forward of `inputs` (spec().inputs order) through the current weights with dropout off
  // and without autograd (evaluation): the outputs in spec().outputs order, then, on the last
  // stage, the model's output (not the loss).
  std::vector<at::Tensor> infer(const std::vector<at::Tensor>& inputs);

  // Layers of this stage that are frozen: the first frozen_count() of spec().layers.
  int frozen_count() const { return frozen_; }
  // The frozen prefix's forward over `input` (eval mode, no autograd): F_frozen's output. With
  // `from`/`to`: only its layers [from, to) (indices into spec().layers; to < 0: all), as
  // AutoCache runs a stale entry's remaining frozen layers (exec/runtime/activation_store.hpp).
  at::Tensor frozen_forward(const at::Tensor& input, int from = 0, int to = -1);
  // Samples that passed through each frozen layer (index into spec().layers) in this runtime.
  const std::vector<int64_t>& frozen_passes() const { return frozen_passes_; }
  // Per optimizer step since the last call, the squared gradient norm of each of spec().layers
  // (0 for frozen layers); empty unless spec().track_gradient_norms.
  std::vector<std::vector<double>> take_gradient_norms();

  // Accumulated gradients of the active parameters of model layers [first, last] of this stage.
  std::vector<at::Tensor> gradients(int first_layer, int last_layer) const;
  // Parameters of the current version (for tests and checkpoints), in layer order.
  std::vector<at::Tensor> parameters() const;
  // Buffers (BatchNorm statistics) of the current version, in layer order.
  std::vector<at::Tensor> buffers() const;
  // (model layer, name inside the layer) of every parameter / buffer, in the order above.
  std::vector<std::pair<int, std::string>> parameter_names() const;
  std::vector<std::pair<int, std::string>> buffer_names() const;
  // Copies values into the current version's parameters and buffers (same order and shapes as
  // parameters() / buffers(); std::invalid_argument otherwise).
  void load_state(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& buffers);
  // The loss scaler (null without loss scaling).
  const LossScaler* loss_scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  LossScaler* loss_scaler() { return scaler_ ? &*scaler_ : nullptr; }
  const Optimizer& optimizer() const { return optimizer_; }
  Optimizer& optimizer() { return optimizer_; }
  // Sum of the per-sample losses of the micro-batches forwarded since the last call (last stage):
  // a float64 scalar tensor on the stage's device (a CPU zero when none), which the caller reads
  // when it needs the number (the worker: once the window's work is done, no wait per step).
  at::Tensor take_loss_sum();
  int live_versions() const;
  // Micro-batches in flight and weight versions alive (see StageHolding).
  StageHolding holding() const;

 private:
  struct Slot;
  struct MicroBatch;
  Slot& slot_of(int version, const char* who, int mb);
  std::shared_ptr<Slot> new_slot();
  void wire();
  int value_of(int producer) const;
  MicroBatch& with_graph(int mb, int version, size_t grad_outputs, const char* who);
  void drop_graph(MicroBatch& m);
  void finish_backward(int mb);
  at::Tensor call_layer(Slot& slot, size_t j, const at::Tensor& x, const at::Tensor& skip);
  void forward_values(Slot& slot, std::vector<at::Tensor>& v, size_t from);
  // `count_loss`: add the last stage's per-sample losses to loss_sum_ (a forward, not a recompute).
  void run(Slot& slot, MicroBatch& m, bool with_graph, bool count_loss);
  std::vector<at::Tensor> backprop(MicroBatch& m, const std::vector<at::Tensor>& grad_outputs,
                                   const std::function<void(int)>& on_layer_done);
  std::vector<at::Tensor> backprop_by_layer(MicroBatch& m,
                                            const std::vector<at::Tensor>& grad_outputs,
                                            const std::function<void(int)>& on_layer_done);
  at::Tensor run_frozen(Slot& slot, at::Tensor x, int from = 0, int to = -1);
  void record_gradient_norms();
  void pin(int version, const char* who, int mb);
  void release(int version);
  void skip_step(Slot& cur, int new_version);

  StageSpec spec_;
  LayerFactory factory_;
  Optimizer optimizer_;
  LossFn loss_;
  std::optional<LossScaler> scaler_;
  std::map<int, std::shared_ptr<Slot>> slots_;  // by version
  std::vector<std::shared_ptr<Slot>> pool_;     // free instances
  std::map<int, std::unique_ptr<MicroBatch>> in_flight_;
  WeightGradStore wgrads_;  // the weight halves of split backwards, by micro-batch
  // Values of a micro-batch: the inputs, then each layer's output (index inputs + position).
  std::vector<int> main_src_, skip_src_;  // per layer position: value read (-1: none)
  std::vector<int> out_value_;            // per output: its value
  // Per layer position: the values no later layer reads and the stage does not return, dropped
  // once it has run, so a forward without autograd holds no more than a chain's would.
  std::vector<std::vector<int>> drop_after_;
  std::vector<at::Tensor> grads_;           // shared .grad of every slot's parameters
  std::vector<int> param_layer_;            // model layer of each parameter
  std::vector<int> param_index_;            // index in spec_.layers of each parameter's layer
  int frozen_ = 0;                          // frozen layers (a prefix of spec_.layers)
  std::vector<int64_t> frozen_passes_;      // per frozen layer: samples run through it
  std::vector<std::vector<double>> norms_;  // per optimizer step, per layer: squared norms
  int current_ = 0;
  int last_used_ = 0;
  int64_t micro_batch_offset_ = 0;  // global number of the schedule's micro-batch 0
  at::Tensor loss_sum_;             // float64 on the stage's device; undefined: 0
};

}  // namespace pipetwin::exec
