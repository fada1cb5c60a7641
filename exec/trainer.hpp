// Trainer: a training run of a plan over epochs — the executor side of `pipetwin train`
// (issue 4, baseline mode: "the same model with Pipe + DDP and no freezing", with its per-epoch
// log, freeze trace and atomic checkpoints so a killed run resumes; issue 7, faults).
//
// The trainer keeps one PipelineSession (exec/session.hpp) for the whole run, so weights and
// optimizer state live in the stage runtimes from step to step, and runs the plan's schedule
// window after window. Window boundaries are the points where the trainer needs every stage
// quiet: epoch ends (evaluation, log), checkpoints, the step limit, and elastic decisions. For a
// synchronous schedule a window boundary changes nothing (each step ends with a flush anyway),
// so checkpoints may fall on any step; for an asynchronous schedule (PipeDream, FTPipe...) the
// pipeline drains at a boundary, so the trainer keeps boundaries at epoch ends only and refuses
// step-granular checkpoints or limits that are not whole epochs: a resumed run then drains at
// exactly the points the uninterrupted run did, and reproduces it bit for bit.
//
// Per epoch it evaluates the held-out split on the current weights (replica 0's stages, in
// stage order, activations passed between ranks over the session's transport; dropout off) and
// records epoch, step, K, DP width, M, frozen layers, learning rate, samples/s, train loss (mean
// per-sample loss of the epoch's steps), eval loss and accuracy, training and wall time. Rank 0
// writes, atomically after every epoch: the log (JSON lines), optionally the same epochs as a
// "pipetwin.elastic_log" (core/elastic/epoch_log.hpp, so `pipetwin simulate --elastic` output
// lines up with it) and a "pipetwin.freeze_trace" (for the baseline one event: 0 frozen layers
// from step 0).
//
// Checkpoints (exec/checkpoint.hpp) hold everything the next step depends on: every hosted
// stage's weights, buffers and optimizer state, the step (hence epoch and sampler position),
// the current epoch's data order, the default CPU generator's state, the dropout key base (the
// seed; keys are (seed, replica, global micro-batch), so the step fixes them), the learning-rate
// schedule and its position, the frozen boundary and the freeze trace, the epoch's partial sums
// and the log so far. Every rank writes its own file; the ranks agree over the world group that
// all files are durable before rank 0 writes the manifest, and agree again that the manifest is
// written, so a failure on any rank (a full disk) ends the run on every rank with the failing
// rank's message and leaves the previous checkpoint as the one named. Resuming validates the
// manifest and this rank's file against the plan and the options, and the ranks agree that every
// rank loaded before training goes on.
//
// Elastic hook: set_policy() installs a function the trainer asks at every epoch end (or every
// `policy_interval_steps`); it may return a Transition — a new plan (K, M, partition, DP width)
// and a frozen layer count. apply() then captures the state of every layer by name
// (capture_stage), builds a new session for the new plan and restores the state into it by name
// (restore_stage), so weights, optimizer state, step, sampler position and learning-rate position
// carry over. Implemented in one process; across processes the layer state must first move
// between ranks (AutoDP's "newly active processes receive weights, optimizer state, ..."), which
// is left to the elastic work, as is freezing inside the stage runtimes: apply() refuses a frozen
// layer count other than the current one (it records the count and the freeze trace only).
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

#include "core/json_io.hpp"
#include "core/plan.hpp"
#include "exec/checkpoint.hpp"
#include "exec/executor.hpp"

namespace pipetwin::exec {

class Distributed;
class PipelineSession;
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
  bool resume = false;            // continue from checkpoint_dir's manifest
  std::string log;                // JSON lines, one per epoch (rank 0)
  std::string epoch_log;          // "pipetwin.elastic_log" (.csv: CSV); empty: none
  std::string freeze_trace;       // "pipetwin.freeze_trace"; empty: none
  int policy_interval_steps = 0;  // 0: the policy is asked at epoch ends
  bool verbose = false;           // print one line per epoch on rank 0

  void validate() const;  // InputError naming the flag
};

struct EpochReport {
  int epoch = 0;
  int64_t step = 0;  // global steps done at the epoch's end
  int K = 1, dp = 1, M = 1, frozen_layers = 0;
  int64_t steps = 0, samples = 0;
  double lr = 0;
  double train_s = 0;  // in training windows
  double wall_s = 0;   // the whole epoch: windows, evaluation, checkpoints
  double samples_per_s = 0;
  double train_loss = 0, eval_loss = 0;
  std::optional<double> eval_accuracy;  // none for regression

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

struct Transition {
  Plan plan;
  int frozen_layers = 0;
};

class Trainer {
 public:
  // (trainer, global steps done) -> a transition to apply now, or none.
  using Policy = std::function<std::optional<Transition>(const Trainer&, int64_t step)>;

  // `dist` null: one process hosting every device.
  Trainer(const Plan& plan, TrainOptions options, Distributed* dist = nullptr);
  ~Trainer();

  TrainResult run();

  void set_policy(Policy policy) { policy_ = std::move(policy); }
  void apply(const Transition& transition);

  const Plan& plan() const { return plan_; }
  int64_t step() const;
  int64_t steps_per_epoch() const;
  int frozen_layers() const;

 private:
  struct Progress;
  int64_t next_boundary() const;
  bool finished() const;
  void run_steps(int64_t end);
  void finish_epoch();
  void evaluate(double sums[4]);
  void write_outputs() const;
  void set_learning_rate();
  bool checkpoint_due() const;
  void checkpoint();
  RankState capture_state();  // this rank's part of a checkpoint
  Manifest gather_manifest(const ManifestFile& mine) const;
  void resume();
  Json progress_json() const;
  void restore_progress(const JsonView& v);
  std::vector<double> sum_over_ranks(std::vector<double> values) const;
  // Every rank says whether its part of `what` succeeded; if any failed, every rank throws:
  // the failing rank its own exception, the others RunFailure (InputError if `input_error`)
  // with the first failing rank's message.
  void agree(std::exception_ptr failure, const std::string& what, bool input_error) const;

  Plan plan_;
  TrainOptions options_;
  Distributed* dist_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<models::LayeredModel> data_model_;  // synthetic data draws from it
  std::unique_ptr<TrainData> data_;
  std::unique_ptr<PipelineSession> session_;
  bool session_warm_ = false;
  Policy policy_;
  bool asynchronous_ = false;
  std::string fingerprint_;
  TrainResult result_;
};

}  // namespace pipetwin::exec
