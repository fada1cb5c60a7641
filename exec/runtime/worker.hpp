// DeviceWorker: runs one device's action list for real, stream by stream.
//
// Like the simulator (sim/pipeline_sim.hpp), each of the device's streams — compute, send,
// recv, collective — is a thread that takes its actions in schedule order and starts one when
// the Board says its dependencies are done. Compute actions call the device's StageRuntimes (a
// split backward's BackwardInput and BackwardWeight their two halves, stage.hpp; the weight half
// reports its layers' gradients complete, as a whole Backward does);
// sends and receives call the Transport; all-reduces sum a stage's gradient bucket over its
// replicas. Each stream thread issues to its own lane of the schedule device's Device
// (exec/platform/device.hpp: on CPU the thread itself, on CUDA a stream of its own); every action
// is timed between two marks of that lane (steady clock on CPU, CUDA events on GPU), waited for,
// and recorded with the weight version the runtime actually used, in the Timeline format the
// simulator writes. Tensors pass between the
// device's streams through its Exchange. A first stage with frozen layers (F_frozen,
// exec/runtime/stage.hpp) runs them once per step over the replica's whole batch, in the forward of
// the step's first micro-batch, and feeds every micro-batch of the step from that output; with
// AutoCache on, per sample through the machine's ActivationStore
// (exec/runtime/activation_store.hpp).
//
// What each forward keeps — its graph or only its inputs, and the weight version it pins — is read
// off the schedule's liveness walk (core/schedule/liveness.hpp), the same walk the memory model
// reads; the warm-up holds as many graphs at once as the walk says the stage will. With a check
// walk in WorkerShared, every compute action is followed by a check that the stages hold exactly
// what that walk says (exec/runtime/liveness_check.hpp).
//
// A failure in any thread raises the AbortSignal with the device, action and reason; every other
// thread then stops at its next wait.
//
// Thread-safety: start() spawns the threads; join() waits for them; nothing else is public.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "core/plan.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/liveness.hpp"
#include "core/timeline.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/transport.hpp"
#include "exec/runtime/board.hpp"
#include "exec/runtime/data.hpp"
#include "exec/runtime/fault.hpp"
#include "exec/runtime/liveness_check.hpp"
#include "exec/runtime/loss_scaler.hpp"
#include "exec/runtime/stage.hpp"
#include "exec/runtime/stage_io.hpp"

namespace pipetwin::exec {

// Holds every stream thread until the process's compute threads have warmed up and the clock
// has started (all devices start measuring together).
class StartGate {
 public:
  explicit StartGate(int warmups) : pending_(warmups) {}
  void warmed_up();
  void wait_warmed_up(AbortSignal& abort);
  void open();
  void wait_open(AbortSignal& abort);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_;
  bool open_ = false;
};

// What all workers of a process share.
struct WorkerShared {
  const CompiledSchedule* schedule = nullptr;
  // The schedule's liveness walk: what each forward keeps and pins (core/schedule/liveness.hpp).
  const Liveness* liveness = nullptr;
  // The walk the stages are checked against after every compute action (null: no check); the
  // schedule's own, or another in a test of the check.
  const Liveness* check = nullptr;
  const PlanContext* context = nullptr;
  Board* board = nullptr;
  Transport* transport = nullptr;
  AbortSignal* abort = nullptr;
  BatchSource* data = nullptr;
  // Which tensors each stage edge carries (exec/runtime/stage_io.hpp).
  const StageGraph* graph = nullptr;
  // A tensor shaped like producer p's output for one micro-batch (p a model layer).
  std::function<at::Tensor(int producer)> value_like;
  // Per hosted schedule device, the mark of the common start (its device's clock zero).
  std::map<int, const Mark*> t0;
  int threads_per_stage = 1;
  bool pin_threads = true;
  StartGate* gate = nullptr;
  bool warmup = true;  // one untimed forward and backward per stage before the clock starts
  // Called once per optimizer step of a stage with (device, stage, global step, loss sum), in
  // step order, after the window's work of the stage's device is done (the losses are read from
  // the device then, not at every step).
  std::function<void(int, int, int, double)> on_step;
  // The schedule's step 0 is global optimizer step `first_step` (a trainer runs a long training
  // as a sequence of schedules): data and fault injection use global steps.
  int first_step = 0;
  int rank = 0;  // this process's rank (fault injection)
  Fault fault;   // PIPETWIN_FAULT, parsed once by the caller
  // With loss scaling: where the stages agree whether a step overflowed
  // (exec/runtime/loss_scaler.hpp).
  OverflowVote* vote = nullptr;
};

class DeviceWorker {
 public:
  // `device`: the schedule device; `hardware`: what it runs on (exec/platform/device.hpp).
  DeviceWorker(int device, Device& hardware, WorkerShared& shared,
               std::map<int, StageRuntime*> stages);
  ~DeviceWorker();

  void start();
  void join();
  std::vector<TimelineEvent> take_events();
  std::vector<MemorySample> take_memory();

 private:
  enum class Slot : uint8_t { kOutput, kInput, kOutputGrad, kInputGrad };
  using Key = std::tuple<Slot, int, int, int>;  // slot, stage, micro-batch, peer stage

  // An action issued, waiting for its marks to be read (after the lane's one host wait).
  struct Pending {
    Action action;  // with the version the runtime used
    std::unique_ptr<Mark> begin;
    std::shared_ptr<const Mark> end;
    int64_t live_bytes = -1;  // compute actions: the device's bytes after it
    at::Tensor loss;          // a last stage's optimizer step: the step's loss sum (device)
  };

  void run_stream(StreamKind stream);
  void warm_up();
  // Issues action `id` and returns its end mark (the Board's).
  std::shared_ptr<const Mark> execute(int id, std::vector<Pending>& pending);
  void optimizer_step(const Action& a, Pending& p);
  // A backward's per-layer report: the Board learns the layer and where the lane is.
  std::function<void(int)> layer_reporter(int id);
  // The lane's events, memory samples and step losses, once its work is done.
  void finish(std::vector<Pending>& pending);
  void forward(int id, const Action& a);
  void backward(int id, const Action& a);
  void send(const Action& a);
  void recv(const Action& a);
  void allreduce(const Action& a);
  // Micro-batch `micro` of the step's F_frozen output (the frozen prefix over the whole batch).
  at::Tensor frozen_input(StageRuntime* st, int global_step, int micro);
  // F_frozen over the replica's batch of the step: through the AutoCache when it is on.
  at::Tensor frozen_output(StageRuntime* st, int global_step, const at::Tensor& batch);
  void put(Key key, std::vector<at::Tensor> bundle);
  std::vector<at::Tensor> take(Key key);
  std::vector<at::Tensor> edge_like(int from, int to) const;
  // A tensor shaped like producer p's output for one micro-batch, on this device.
  at::Tensor like(int producer) const;
  int peer_device(const Action& a) const;

  int id_;  // the schedule device
  Device& device_;
  int replica_;
  WorkerShared& shared_;
  std::map<int, StageRuntime*> stages_;
  Fault fault_;
  std::unique_ptr<LivenessCheck> check_;  // with WorkerShared::check; the compute thread's
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<Key, std::vector<at::Tensor>> exchange_;  // a stage edge's tensors (one reader)
  // (stage, global step) -> F_frozen's output per micro-batch, micro-batches taken so far
  std::map<std::pair<int, int>, std::pair<std::vector<at::Tensor>, int>> frozen_out_;
  std::vector<TimelineEvent> events_;
  std::vector<MemorySample> memory_;
  std::shared_ptr<const Mark> last_step_end_;  // the compute lane's last optimizer step's end
};

// The message tag of a transfer: unique per (payload, stage pair, micro-batch).
int64_t transfer_tag(const Action& a, int num_stages);

}  // namespace pipetwin::exec
