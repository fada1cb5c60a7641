// TrainRun: what the Trainer's parts share (exec/train/trainer.hpp) — the plan in use, the
// options, where the run stands between windows (TrainProgress: what a checkpoint records besides
// the stages' tensors), the training data, the session, the elastic policy and the ranks' control
// plane — and the few operations on them that more than one part needs: building the session
// for a plan, setting the learning rate, and sums and agreement over the ranks. The parts
// (Checkpointer, Transitioner, AutoCache, Evaluator) each hold a reference to the one TrainRun
// the Trainer owns.
//
// Thread-safety: owned by the trainer's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/elastic/freeze_trace.hpp"
#include "core/plan.hpp"
#include "exec/platform/control_plane.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"

namespace pipetwin::exec {

struct TrainProgress {
  int64_t step = 0;          // global optimizer steps done
  int64_t epoch = 0;         // the epoch under way (epochs finished)
  int64_t epoch_step = 0;    // steps of it done
  int64_t epoch_sample = 0;  // samples of it trained
  double lr = 0;             // the learning rate in effect
  int frozen_layers = 0;
  bool cache = false;                        // AutoCache in use
  int freeze_layers = 0;                     // L of the freeze trace
  std::vector<elastic::FreezeEvent> freeze;  // the freeze trace so far
  // The current epoch so far. loss_sum is this rank's share (its last stages' per-sample
  // losses); after a resume rank 0 holds the whole partial sum.
  double loss_sum = 0;
  int64_t samples = 0, steps = 0;
  double train_s = 0, wall_s = 0, transition_s = 0;
  std::chrono::steady_clock::time_point mark;  // wall clock counted up to here
  std::vector<EpochReport> log;                // finished epochs
  int64_t last_checkpoint = -1;
};

struct TrainRun {
  // Validates the options, builds the data and the first session; InputError on a bad option.
  TrainRun(const Plan& plan, TrainOptions options, ControlPlane& control,
           TransportFactory transport);
  ~TrainRun();

  Plan plan;  // in use (a re-plan's after a transition)
  TrainOptions options;
  ControlPlane& control;
  TransportFactory transport;  // null: the control plane's
  TrainProgress progress;
  std::unique_ptr<models::LayeredModel> data_model;  // synthetic data draws from it
  std::unique_ptr<TrainData> data;
  std::unique_ptr<PipelineSession> session;
  bool session_warm = false;
  std::unique_ptr<ElasticPolicy> elastic_policy;  // an --elastic run's
  bool asynchronous = false;
  std::string fingerprint;
  std::string initial_fingerprint;  // of the plan the run started with

  int64_t steps_per_epoch() const;  // at the batch of the start
  ExecOptions session_options() const;
  // A new session for `plan` (fresh stage runtimes: the caller restores their state).
  void replace_session(const Plan& plan);
  // The learning rate of the current epoch, in every hosted stage's optimizer.
  void set_learning_rate();
  // The element-wise sum over the ranks; RunFailure naming the step when a peer fails.
  std::vector<double> sum_over_ranks(std::vector<double> values) const;
  // Rank 0's `values` on every rank; RunFailure naming the step when a peer fails.
  std::vector<double> values_of_rank0(const std::vector<double>& values) const;
  // ControlPlane::agree.
  void agree(std::exception_ptr failure, const std::string& what, bool input_error) const;
};

// The eight AutoCache counts of AutoCache::take_counts(), from `v` on.
elastic::CacheCounts cache_counts_from(const double* v);

}  // namespace pipetwin::exec
