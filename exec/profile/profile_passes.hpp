// The profiler's measuring loops (profiler.hpp): training passes over a model's layers, timed
// layer by layer, and a co-runner that loads the second core while the first is measured.
//
// SequenceRunner::pass() is one pass as a stage runs it: forward of every layer in order (each
// layer's input the previous output, detached, and so is a cross-layer skip input; untimed, then
// again timed), the forward once more (checkpointing's recompute, dropped), backward of every layer
// in reverse order on the timed forward's graph, and one optimizer step per layer, zeroing the
// gradients after it. A pass into PassTimes with `split` set then times the backward split in two
// as zero-bubble schedules run it (Qi et al., ICLR 2024, Section 2; exec/runtime/
// weight_grad_store.hpp): an untimed forward whose linears record their weight halves
// (models/split_linear.hpp), the input half of every layer in reverse order with the weight halves
// deferred (I), then the deferred weight halves of every layer in reverse order (W). The step never
// touches the model (it stays as built): passes take turns between the two steps the executor
// takes, an update in place — of a copy of the weights, as GPipe and 1F1B update theirs — and an
// update that writes a new weight version from the model's weights into that copy, as weight
// stashing does while older micro-batches still read the old version (exec/runtime/stage.cpp,
// optimizer_step).
//
// Times are the Device's: the steady clock on the CPU, CUDA events on a GPU (where each is waited
// for, so a layer's time is its kernels' from the first launch to the last end).
//
// CoRunner runs passes of its own copy of the model on the second usable core while resumed, and
// idles (blocked, not spinning) while paused; pause() returns once it has stopped computing, so
// alone and shared passes can alternate and see the same host conditions. Its passes go on
// across pauses where they stopped, so beside a measured layer it runs any part of its pass, the
// mix of kinds another stage runs (restarted at each resume, in step with the measured pass, it
// put forwards beside forwards: BERT-tiny factors forward 1.16, backward 1.11, where a pipeline's
// stage sees about 1.05 and 1.2).
//
// Thread-safety: a SequenceRunner belongs to one thread. CoRunner's resume() and pause() are
// called from one (the measuring) thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/intrusive_ptr.h>

#include "exec/platform/device.hpp"
#include "exec/profile/profiler.hpp"
#include "exec/runtime/optimizer.hpp"
#include "models/layered_model.hpp"
#include "models/split_linear.hpp"

namespace pipetwin::exec {

// Per layer, the samples of one kind of time.
using Samples = std::vector<std::vector<double>>;

struct PassTimes {
  Samples forward, recompute, backward, optimizer, optimizer_new_version;
  Samples input_half, weight_half;  // the split backward's I and W, in passes with `split`
  int64_t passes = 0;  // recorded so far: the in-place and new-version steps take turns by it
  bool split = false;  // the passes recorded here time the split backward too
  explicit PassTimes(size_t layers, bool split_backward = false)
      : forward(layers),
        recompute(layers),
        backward(layers),
        optimizer(layers),
        optimizer_new_version(layers),
        input_half(layers),
        weight_half(layers),
        split(split_backward) {}
};

double median(std::vector<double> v);

// Per layer, the median of its samples, scaled so that the layers add up to the median of the
// passes' totals (pass i's total: the sum of every layer's i-th sample). A stage runs its layers
// as one action and the executor reports the median step, a median of sums; when a host slows
// now and then, each layer's times are skewed to the right and the sum of their medians falls
// short of it (two BERT-tiny profiles at micro-batch 8 on a noisy VM, before and after this
// scaling: forwards summing to 1.3% more, backwards 0.9%, within what two profiles differ by). The
// layers keep their medians' proportions; layers without samples (no parameters: no optimizer
// step) count nothing.
std::vector<double> pass_medians(const Samples& samples);

class SequenceRunner {
 public:
  // Times with `device`'s marks (exec/platform/device.hpp), where the model's layers must be.
  SequenceRunner(models::LayeredModel& model, int micro_batch, const ProfileOptions& o,
                 Device& device);

  // One pass; records its times into `t` when given. With `keep_going`, stops at the next layer
  // boundary once it reads false, and the next call goes on from there (the co-runner's passes
  // run on across pauses, so what it computes beside a measured layer varies from pass to pass).
  // With `wait_s` > 0, the thread sleeps that long before the timed forward and before the
  // backward, as a stage waits for its neighbour: those two then start cold (profiler.hpp).
  void pass(PassTimes* t, const std::atomic<bool>* keep_going = nullptr, double wait_s = 0);

 private:
  // A pass, layer by layer: an untimed forward first, so the timed one follows a forward as a
  // stage's forwards do (after another forward or a backward of its own, after an optimizer step
  // only once per iteration: timed right after the step, a BERT-tiny block's forward took 1.4x
  // its recompute, the same computation, a ViT-tiny block's 1.0x), then the timed forward, the
  // recompute, the backward (last layer first) and the optimizer steps. The backward runs on the
  // timed forward's graph, not the recompute's: its saved activations are then not the last
  // thing computed, as in a pipeline, where a micro-batch's backward comes after other work (timed
  // on the recompute's, ViT-tiny's backward at micro-batch 1 was 8% faster than a stage's).
  // Then, in passes with PassTimes::split, the split backward (above) on a forward of its own:
  // the weight halves are timed after every input half, as a zero-bubble stage defers them.
  enum class Phase {
    kWarmForward,
    kForward,
    kRecompute,
    kBackward,
    kStep,
    kSplitForward,
    kInputHalf,
    kWeightHalf
  };
  static constexpr size_t kPhases = 8;
  static constexpr size_t kWholePhases = 5;  // passes without the split backward end there
  // Per layer, its input (a leaf), its skip input and its output, of one forward.
  struct Graph {
    std::vector<at::Tensor> leaf, skip, y;
    explicit Graph(size_t n = 0) : leaf(n), skip(n), y(n) {}
  };
  void chain_layer(size_t l, Graph& g, Samples* times);
  void backward_layer(size_t l, const Graph& f, Samples* times);
  void weight_half_layer(size_t l, Samples* times);
  void step_layer(size_t l, PassTimes* t);

  models::LayeredModel& model_;
  Device& device_;
  at::ScalarType autocast_;          // Undefined: none (exec/runtime/autocast.hpp)
  c10::DeviceType autocast_device_;  // whose autocast
  at::Tensor input_, target_;
  std::vector<Optimizer> optimizers_;
  std::vector<std::vector<at::Tensor>> out_;  // per layer, the copy the optimizer writes
  // Where the pass stands (phase * layers + index) and what its layers hold so far.
  size_t pos_ = 0;
  Graph graph_, replay_;  // the forward's (the backward's), the recompute's
  Graph split_;           // the split backward's forward
  c10::intrusive_ptr<models::DeferredWeightGrads> deferred_;  // its weight halves
  bool in_place_ = true;                                      // this pass's optimizer step
};

class CoRunner {
 public:
  // Starts paused. `device` is the memory-tracker slot its allocations are counted in.
  CoRunner(const models::LayeredModel& model, int micro_batch, const ProfileOptions& o, int device);
  ~CoRunner();
  CoRunner(const CoRunner&) = delete;
  CoRunner& operator=(const CoRunner&) = delete;

  void resume();  // returns once it computes
  void pause();   // returns once it has stopped computing

 private:
  void loop(int micro_batch, ProfileOptions o, int device);

  models::LayeredModel model_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> want_{false};
  bool busy_ = false, quit_ = false;
  std::thread thread_;
};

}  // namespace pipetwin::exec
