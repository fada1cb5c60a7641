// Trainer: a training run of a plan over epochs — the executor side of `pipetwin train`
// (PipeTransformer's baseline mode: the same model with Pipe + DDP and no freezing), with its
// per-epoch log, freeze trace and atomic checkpoints so a killed run resumes, and its faults.
//
// The trainer keeps one PipelineSession (exec/runtime/session.hpp) for the whole run, so weights
// and optimizer state live in the stage runtimes from step to step, and runs the plan's schedule
// window after window. Window boundaries are the points where the trainer needs every stage
// quiet: epoch ends (evaluation, log), checkpoints, the step limit, and elastic decisions. For a
// synchronous schedule a window boundary changes nothing (each step ends with a flush anyway),
// so checkpoints may fall on any step; for an asynchronous schedule (PipeDream, FTPipe...) the
// pipeline drains at a boundary, so the trainer keeps boundaries at epoch ends only and refuses
// step-granular checkpoints or limits that are not whole epochs: a resumed run then drains at
// exactly the points the uninterrupted run did, and reproduces it bit for bit.
//
// Epochs: a finite data set is walked by the elastic sampler (exec/train/train_data.hpp): an epoch
// ends when fewer samples are left than a step takes, so when a re-plan changes the data-parallel
// width, the steps of an epoch change with it; synthetic data has `steps_per_epoch` steps per
// epoch whatever the width.
//
// Per epoch it evaluates the held-out split on the current weights (replica 0's stages, in
// stage order, activations passed between ranks over the session's transport; dropout off) and
// records epoch, step, K, DP width, M, frozen layers, learning rate, samples/s, train loss (mean
// per-sample loss of the epoch's steps), eval loss and accuracy, training, transition and wall
// time. Rank 0 writes, atomically after every epoch: the log (JSON lines), optionally the same
// epochs as a "pipetwin.elastic_log" (core/elastic/epoch_log.hpp, so `pipetwin simulate
// --elastic` output lines up with it) and a "pipetwin.freeze_trace" (an event at the start, and
// one at every change of the frozen count, at the epoch and sample where it took effect).
//
// Checkpoints (exec/train/checkpoint.hpp) hold everything the next step depends on: every hosted
// stage's weights, buffers and optimizer state, the step, the epoch and the sampler's position
// in it, the default CPU generator's state, the dropout key base (the
// seed; keys are (seed, replica, global micro-batch), so the step fixes them), the learning-rate
// schedule and its position, the frozen boundary and the freeze trace, the epoch's partial sums
// and the log so far. Every rank writes its own file; the ranks agree over the world group that
// all files are durable before rank 0 writes the manifest, and agree again that the manifest is
// written, so a failure on any rank (a full disk) ends the run on every rank with the failing
// rank's message and leaves the previous checkpoint as the one named. Resuming validates the
// manifest and this rank's file against the plan and the options, and the ranks agree that every
// rank loaded before training goes on.
//
// Checkpoints also hold the current plan and the elastic policy's state, so a run resumes after
// a transition with the plan it had then (the manifest's fingerprint is the current plan's).
//
// Fewer ranks: an elastic run may resume on fewer ranks than wrote the checkpoint (a rank was
// lost and `train --on-rank-loss continue` restarted the job without it): every rank reads every
// rank file, the policy re-plans AutoDP for the devices left, and each layer's state is restored
// by name into the new plan (exec/train/fewer_ranks.cpp). Any other change of world is refused.
//
// Tensor parallelism (plan.tp() = t > 1, models/tensor_parallel_model.hpp): the ranks of one
// tp_rank form a slice that trains the pipeline on its shards (exec/platform/tp_comm.hpp), and a
// slice is a job of its own to the trainer: it checkpoints into checkpoint_dir/tp<k>/ (files,
// manifest and protocol as above, each rank file holding its shard), and only tp_rank 0 writes
// the log, the epoch log and the freeze trace. The slices of a checkpoint agree over the
// tensor-parallel groups before any slice removes its previous checkpoint, and a resume checks
// that every slice's manifest names the same step: a crash between two slices' manifests is
// refused on resume in one line, naming both steps. Elastic training is refused.
//
// Elastic training (PipeTransformer): with TrainOptions::elastic the trainer owns an
// ElasticPolicy (exec/train/elastic_policy.hpp). The stage runtimes record every optimizer step's
// per-layer gradient norms; after each window the trainer sums them over the ranks and feeds
// the policy; at the policy's freeze steps (epoch ends, or every `interval` steps) Equation 1
// gives the new frozen count, the ranks agree on it (rank 0's), and if it grew, AutoPipe and
// AutoDP give the new plan. set_policy() installs any other function the trainer asks at epoch
// ends (or every `policy_interval_steps`). Either way a Transition — a new plan (K, M,
// partition, DP width) and a frozen layer count, never smaller — goes to apply(): every layer's
// state moves from the rank that holds it to every rank (exec/train/state_exchange.hpp: weights,
// buffers, optimizer state), a new session is built for the new plan (its stage runtimes freeze
// the plan's frozen layers, exec/runtime/stage.hpp), and the state is restored by name. Step,
// epoch, sampler position and learning-rate position are the trainer's and carry over as they are
// (every rank keeps the same). A failure during a transition (a peer that dies: collectives fail
// or time out) ends the run on every rank with a RunFailure naming the transition. PIPETWIN_FAULT
// `transition=S` fires in the transition after step S, once the first stage's state has crossed.
//
// AutoCache (PipeTransformer Section 3.4; exec/runtime/activation_store.hpp): on a finite data set
// the trainer opens the machine's ActivationStore at the start (the machine's first process creates
// the files, the others open them after a barrier; a model whose F_frozen output per sample
// differs between boundaries gets none), hands it to the workers through the training data, and
// at every transition sets its boundary (the plan's frozen layers) and whether it is used: with
// --autocache auto the elastic policy's cost-model decision (Transition::cache, the same on
// every rank), on: whenever layers are frozen, off: never (and no store). Each epoch's cache work
// (hits, stale, misses, bytes read per tier, entries another process wrote) is summed over the
// ranks into the log. At the end, after a barrier, the first process removes the files (also
// when the run throws; a killed run leaves them, see activation_store.hpp). A resumed run
// starts with an empty cache (the entries of the killed job are gone), and checkpoints record
// only whether the cache was on.
//
// Parts (each its own class, sharing one TrainRun: exec/train/train_run.hpp): Checkpointer
// (checkpoints and resume), Transitioner (elastic decisions and transitions), AutoCache (the
// activation store), Evaluator (the held-out split). The Trainer itself walks the epochs: windows
// up to the next boundary, the epoch's log, the policy's points, the checkpoints' points.
//
// Thread-safety: one thread drives a Trainer.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/elastic/epoch_log.hpp"
#include "core/json_io.hpp"
#include "core/plan.hpp"
#include "exec/platform/control_plane.hpp"
#include "exec/runtime/activation_store.hpp"
#include "exec/runtime/executor.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"

namespace pipetwin::exec {

class AutoCache;
class Checkpointer;
class Distributed;
class Evaluator;
class PipelineSession;
class Transitioner;
struct TensorParallelJob;
struct TrainRun;
struct TrainData;
}  // namespace pipetwin::exec
namespace pipetwin::models {
struct LayeredModel;
}
namespace pipetwin::exec {

struct TrainOptions {
  ExecOptions exec;  // seed, optimizer, dtype, threads, timeout; exec.data names the data set
  int epochs = 1;
  int64_t max_steps = 0;    // stop after this many global steps (0: no limit)
  int steps_per_epoch = 8;  // synthetic data only
  int eval_batches = 4;     // synthetic data only
  double lr_decay = 1.0;    // StepLR: lr = exec.optimizer.lr * lr_decay^(epoch / lr_decay_every)
  int lr_decay_every = 0;   // epochs; 0: constant
  std::string checkpoint_dir;
  int checkpoint_every_steps = 0;  // 0: not by steps
  bool checkpoint_every_epoch = false;
  bool resume = false;                    // continue from checkpoint_dir's manifest
  std::string log;                        // JSON lines, one per epoch (rank 0)
  std::string epoch_log;                  // "pipetwin.elastic_log" (.csv: CSV); empty: none
  std::string freeze_trace;               // "pipetwin.freeze_trace"; empty: none
  int policy_interval_steps = 0;          // 0: the policy is asked at epoch ends
  bool verbose = false;                   // print one line per epoch on rank 0
  std::optional<ElasticOptions> elastic;  // PipeTransformer: freeze, AutoPipe, AutoDP
  CacheOptions autocache;                 // AutoCache: --autocache, --cache-dir, ...

  void validate() const;  // InputError naming the flag
};

struct EpochReport {
  int epoch = 0;
  int64_t step = 0;  // global steps done at the epoch's end
  int K = 1, dp = 1, M = 1, frozen_layers = 0;
  int64_t steps = 0, samples = 0;
  double lr = 0;
  double train_s = 0;       // in training windows
  double transition_s = 0;  // in transitions (re-plans) during the epoch
  double wall_s = 0;        // the whole epoch: windows, evaluation, checkpoints
  double samples_per_s = 0;
  double train_loss = 0, eval_loss = 0;
  std::optional<double> eval_accuracy;              // none for regression
  bool cache = false;                               // AutoCache on at the end of the epoch
  std::optional<elastic::CacheCounts> cache_stats;  // when the run has a cache

  Json to_json() const;
  static EpochReport from_json(const JsonView& v);
};

struct TrainResult {
  std::vector<EpochReport> epochs;  // all of the run's epochs, also those before a resume
  int64_t steps = 0;                // global steps done
  int64_t resumed_from = -1;        // the checkpoint's step, -1: a fresh run
  int64_t last_checkpoint = -1;     // the step of the last checkpoint written, -1: none
  // Final weights of the stages hosted here: (replica, stage) -> tensors (parameters()).
  std::map<std::pair<int, int>, std::vector<at::Tensor>> parameters;
};

class Trainer {
 public:
  // (trainer, global steps done) -> a transition to apply now, or none.
  using Policy = std::function<std::optional<Transition>(const Trainer&, int64_t step)>;

  // `dist` null: one process hosting every device. With plan.tp() > 1, the job's ranks are laid
  // out as execute_plan's (exec/runtime/executor.hpp): this rank trains its slice's pipeline on
  // its shards (see "Tensor parallelism" above).
  Trainer(const Plan& plan, TrainOptions options, Distributed* dist = nullptr);
  // Over a given control plane (it outlives the trainer) and transport (null: the one `control`
  // makes, for every session of the run).
  Trainer(const Plan& plan, TrainOptions options, ControlPlane& control,
          TransportFactory transport = nullptr);
  ~Trainer();

  TrainResult run();

  void set_policy(Policy policy) { policy_ = std::move(policy); }
  void apply(const Transition& transition);

  const Plan& plan() const;
  int64_t step() const;
  int64_t steps_per_epoch() const;  // at the batch of the start
  int64_t epoch() const;            // the epoch under way (epochs finished)
  int frozen_layers() const;
  const ElasticPolicy* elastic() const;
  // The machine's AutoCache store (null: none); tests count frozen-layer passes through it.
  ActivationStore* activation_store() const;

 private:
  void init(const Plan& plan, TrainOptions options, ControlPlane& control,
            TransportFactory transport);
  int64_t next_boundary() const;
  int64_t epoch_steps_left() const;
  bool finished() const;
  void run_steps(int64_t end);
  void finish_epoch();
  void begin_epoch();
  void write_outputs() const;

  std::unique_ptr<TensorParallelJob> tp_job_;    // plan.tp() > 1: this rank's slice and group
  std::unique_ptr<ControlPlane> owned_control_;  // when built from a Distributed*
  std::unique_ptr<TrainRun> run_;
  std::unique_ptr<AutoCache> cache_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Transitioner> transitioner_;
  Policy policy_;
  TrainResult result_;
};

}  // namespace pipetwin::exec
