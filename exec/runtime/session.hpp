// PipelineSession: a plan's stages built once, run as many schedules ("windows") as a caller
// wants, with weights and optimizer state carried from one to the next.
//
// Construction does what every run needs once: build the plan's model and check that the plan
// matches it (layer names, parameter bytes, the layer graph with its skip connections) and fits
// the device memory, work out which tensors cross which stage edges (exec/runtime/stage_io.hpp),
// give every stage of every device this rank hosts a StageRuntime (which freezes the plan's
// frozen_layers, exec/runtime/stage.hpp) on the schedule device's Device (CPU, or a GPU:
// exec/platform/device.hpp), and connect the devices: threads of this process (in-process
// transport) or the ranks of a c10d job (Gloo on CPU), each rank hosting a block of devices. The
// ranks' ControlPlane (exec/platform/control_plane.hpp) is handed in, and the Transport is the one
// it makes unless a TransportFactory is handed in too: the session holds no code of either kind of
// job (docs/design.md "Platform behind an interface"). run_window(first_step, steps) then compiles
// (once per window length) the plan's schedule for `steps` optimizer steps and lets one
// DeviceWorker per hosted device run it, as global steps first_step .. first_step + steps - 1: the
// data of those steps, dropout keyed by global micro-batch numbers, and fault injection by global
// step. `pipetwin run` is one window (exec/runtime/executor.hpp); `pipetwin train` is a sequence of
// them (exec/train/trainer.hpp).
//
// Windows and schedule semantics: a window ends with every micro-batch done and one weight
// version per stage, so two windows of n steps equal one window of 2n steps exactly for the
// synchronous schedules (each step already ends with a flush), and for asynchronous ones they
// differ (the pipeline drains between windows): a caller keeps their window boundaries fixed
// (the trainer uses epochs).
//
// A failure in a window (a stage throws, a peer dies or times out) raises the session's
// AbortSignal and run_window throws RunFailure; the session is then dead.
//
// Thread-safety: one thread drives a session; run_window starts and joins the stream threads.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/plan.hpp"
#include "core/timeline.hpp"
#include "exec/platform/abort.hpp"
#include "exec/platform/control_plane.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/transport.hpp"
#include "exec/runtime/data.hpp"
#include "exec/runtime/executor.hpp"
#include "exec/runtime/fault.hpp"
#include "exec/runtime/stage.hpp"
#include "exec/runtime/stage_io.hpp"

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

class Board;
class Distributed;
struct WorkerShared;

struct WindowResult {
  std::map<int, std::vector<TimelineEvent>> events;  // by hosted device, times from the start
  std::map<int, std::vector<MemorySample>> memory;   // by hosted device
  // Per step of the window: the sum of per-sample losses this rank's last stages computed.
  std::vector<double> step_loss_sum;
  double seconds = 0;  // from the common start to the last stream's end
};

class PipelineSession {
 public:
  // `data` null: the source ExecOptions::data names, over every sample. A caller may share its
  // source with a later session (the trainer's re-plans); the session configures its slicing.
  // `control`: the ranks of the job (it outlives the session); `transport` null: the transport
  // `control` makes.
  PipelineSession(const Plan& plan, const ExecOptions& options, ControlPlane& control,
                  std::shared_ptr<BatchSource> data = nullptr,
                  TransportFactory transport = nullptr);
  // `dist` null: one process hosting every device (make_control_plane(dist), owned).
  PipelineSession(const Plan& plan, const ExecOptions& options, Distributed* dist,
                  std::shared_ptr<BatchSource> data = nullptr);
  ~PipelineSession();
  PipelineSession(const PipelineSession&) = delete;
  PipelineSession& operator=(const PipelineSession&) = delete;

  // Runs global steps [first_step, first_step + steps); RunFailure on failure. `warmup`: one
  // untimed forward/backward per stage before the clock starts (it leaves no trace).
  WindowResult run_window(int first_step, int steps, bool warmup);

  const Plan& plan() const { return plan_; }
  const PipelineShape& shape() const { return shape_; }
  const ExecOptions& options() const { return options_; }
  models::LayeredModel& model() { return *model_; }
  BatchSource& data() { return *data_; }
  Transport& transport() { return *transport_; }
  AbortSignal& abort() { return abort_; }
  ControlPlane& control() { return *control_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  int devices() const { return static_cast<int>(ranks_.size()); }
  int rank_of_device(int device) const { return ranks_[static_cast<size_t>(device)]; }
  // Global device of `stage` in `replica`.
  int device_of(int replica, int stage) const;
  // What hosted schedule device d runs on (ExecOptions::device, exec/platform/device.hpp).
  Device& device(int d) const { return *devices_.at(d); }
  // The runtimes this rank hosts: device -> stage -> runtime.
  const std::map<int, std::map<int, StageRuntime*>>& hosted() const { return by_device_; }
  // The runtime of (replica, stage) if this rank hosts it, else null.
  StageRuntime* runtime(int replica, int stage) const;
  // Which tensors cross which stage edges.
  const StageGraph& graph() const { return *graph_; }
  // A tensor shaped like producer p's output (a model layer) for one micro-batch.
  const at::Tensor& value_like(int producer) const {
    return like_.at(static_cast<size_t>(producer));
  }

 private:
  struct Program;
  const Program& program(int steps);
  // What every device worker of a window shares, but the window's gates, votes and callbacks.
  void share(WorkerShared& shared, const Program& prog, Board& board, int first_step,
             bool warmup);
  void build(std::shared_ptr<BatchSource> data, const TransportFactory& transport);
  void build_transport(const TransportFactory& factory);
  void build_runtimes(const PlanContext& ctx);

  Plan plan_;
  ExecOptions options_;
  std::unique_ptr<ControlPlane> owned_control_;  // when built from a Distributed*
  ControlPlane* control_;
  int rank_ = 0, world_ = 1;
  PipelineShape shape_;
  std::vector<int> ranks_;  // device -> rank
  std::unique_ptr<models::LayeredModel> model_;
  std::shared_ptr<BatchSource> data_;
  std::vector<at::Tensor> like_;  // output of every layer for one micro-batch
  std::unique_ptr<StageGraph> graph_;
  AbortSignal abort_;
  std::unique_ptr<Transport> transport_;
  std::map<int, std::unique_ptr<Device>> devices_;  // by hosted schedule device
  std::vector<std::unique_ptr<StageRuntime>> runtimes_;
  std::map<int, std::map<int, StageRuntime*>> by_device_;
  std::map<int, std::unique_ptr<Program>> programs_;  // by window length
  Fault fault_;
};

}  // namespace pipetwin::exec
