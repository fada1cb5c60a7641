// Executor: runs a Plan for real with LibTorch — the same schedule the simulator predicts.
//
// It builds the plan's model (the plan names it), checks that the plan matches it (layer names,
// stage graph) and fits the device memory, generates and validates the plan's schedule, gives
// every stage of every hosted device a StageRuntime, and lets one DeviceWorker per device run the
// device's action list (worker.hpp). Devices are threads of this process (in-process transport),
// or spread over the ranks of a c10d job (Gloo on CPU): each rank hosts a block of devices. The
// result is a measured Timeline and the Metrics computed from it by the same code as for a
// prediction, the loss per step, and the final weights. The set-up and the run are a
// PipelineSession running one window (session.hpp); `pipetwin train` runs many (trainer.hpp).
//
// Thread-safety: execute_plan() may be called from one thread at a time per process (the memory
// tracker's counters are per process).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/metrics.hpp"
#include "core/plan.hpp"
#include "core/timeline.hpp"
#include "exec/platform/control_plane.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/loss_scaler.hpp"
#include "exec/runtime/optimizer.hpp"

namespace pipetwin::models {
class TpComm;
}

namespace pipetwin::exec {

class Distributed;

struct ExecOptions {
  int iterations = 0;  // 0: the plan's default
  uint64_t seed = 1;   // model weights and synthetic data
  OptimizerConfig optimizer;
  bool float64 = false;
  // Autocast mixed precision (exec/runtime/autocast.hpp): kBFloat16 or kHalf over float32 weights;
  // Undefined: none. Excludes float64. kHalf needs a CUDA device and a synchronous schedule.
  at::ScalarType autocast = at::ScalarType::Undefined;
  // Dynamic loss scaling (exec/runtime/loss_scaler.hpp): always on with kHalf; tests may turn it on
  // for other dtypes.
  bool loss_scaling = false;
  LossScalerConfig loss_scaler;
  Precision precision() const { return {float64, autocast}; }
  // Where the stages run: "cpu", "cuda" (schedule devices spread over the visible GPUs; one GPU
  // hosts them all as stream sets) or "cuda:I" (all on GPU I). exec/platform/device.hpp.
  std::string device = "cpu";
  int threads_per_stage = 1;                  // intra-op threads of each stage's compute thread
  bool pin_threads = true;                    // pin stage compute threads to cores
  std::chrono::milliseconds timeout{120000};  // longest wait for a peer
  std::string data = "synthetic";             // "synthetic", "digits" or "digits-tokens"
  bool check_memory = true;  // refuse plans predicted not to fit, before allocating
  bool warmup = true;        // one untimed forward/backward per stage before the clock starts
  // Record each optimizer step's per-layer gradient norms (StageRuntime; the elastic trainer).
  bool track_gradient_norms = false;
  // After every compute action, check that the stages hold what the schedule's liveness walk says
  // (exec/runtime/liveness_check.hpp); a difference fails the run. Off in runs, on in tests.
  bool check_liveness = false;
  // With check_liveness: check against the walk of this schedule (same shape) instead of the
  // plan's own; a test of the check names another one to see it fail. Empty: the plan's.
  std::string check_liveness_against;
  // Tensor parallelism (Plan::tensor_parallel, plan.tp() > 1): this rank's group, through which
  // its stages' shards communicate (models/tensor_parallel_model.hpp). execute_plan(plan, options,
  // dist) sets it from the job's layout (exec/platform/tp_comm.hpp); null: t = 1.
  std::shared_ptr<models::TpComm> tp_comm;
};

struct ExecResult {
  Timeline timeline;  // every device's events (on rank 0 of a distributed run)
  Metrics metrics;
  std::vector<double>
      step_loss;  // mean per-sample loss of each step (from this rank's last stages)
  // Final parameters of the stages hosted here, replica 0 first: (replica, stage) -> tensors.
  // A stage replicated within the pipeline (PipelineShape::stage_replicas) is its first copy's.
  std::map<std::pair<int, int>, std::vector<at::Tensor>> parameters;
  // The other copies of replicated stages hosted here: (replica, stage, copy k >= 1) -> tensors.
  std::map<std::tuple<int, int, int>, std::vector<at::Tensor>> stage_copies;
  // With tensor parallelism, the parameters are this rank's shards, of group member tp_rank.
  int tp_rank = 0;
};

// `dist` null: a single process hosting every device. With plan.tp() = t > 1 the job has
// dp x devices_per_replica x t ranks, rank (replica * devices_per_replica + device) * t + tp_rank
// running schedule device `device`'s shard tp_rank (exec/platform/tp_comm.hpp: each tp_rank's
// ranks form a slice that runs the pipeline as a job of their own); the result is the slice's,
// and the job's rank 0 (slice 0's rank 0) holds the timeline and reports.
ExecResult execute_plan(const Plan& plan, const ExecOptions& options, Distributed* dist = nullptr);
// The same over a given control plane (and transport: null, the one `control` makes).
ExecResult execute_plan(const Plan& plan, const ExecOptions& options, ControlPlane& control,
                        TransportFactory transport = nullptr);

// The rank hosting schedule device `device` out of `devices`, with `world` ranks: contiguous
// blocks, so a rank holds whole replicas when the replica count is a multiple of the ranks.
int device_rank(int device, int devices, int world);

}  // namespace pipetwin::exec
