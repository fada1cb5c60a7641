#include "exec/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/elastic/epoch_log.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "core/elastic/transformer_layers.hpp"
#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "exec/platform/c10d_control_plane.hpp"
#include "exec/platform/tp_comm.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/auto_cache.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/checkpointer.hpp"
#include "exec/train/evaluator.hpp"
#include "exec/train/train_data.hpp"
#include "exec/train/train_run.hpp"
#include "exec/train/transitioner.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void TrainOptions::validate() const {
  exec.optimizer.validate();
  require_positive("--epochs", epochs);
  if (max_steps < 0) {
    throw InputError(fmt::format("--max-steps must not be negative ({} given)", max_steps));
  }
  if (checkpoint_every_steps < 0) {
    throw InputError(
        fmt::format("--checkpoint-every must be positive ({} given)", checkpoint_every_steps));
  }
  if (!(lr_decay > 0) || lr_decay > 1) {
    throw InputError(fmt::format("--lr-decay must be in (0, 1] ({} given)", lr_decay));
  }
  if (lr_decay_every < 0) {
    throw InputError(
        fmt::format("--lr-decay-every must not be negative ({} given)", lr_decay_every));
  }
  if ((checkpoint_every_steps > 0 || checkpoint_every_epoch || resume) && checkpoint_dir.empty()) {
    throw InputError("--checkpoint-every and --resume need --checkpoint-dir");
  }
  if (elastic) elastic->validate();
}

Trainer::Trainer(const Plan& plan, TrainOptions options, Distributed* dist) {
  if (plan.tp() > 1 && dist != nullptr) {
    if (options.elastic) {
      throw InputError(fmt::format(
          "--elastic: not supported with tensor parallelism (tensor_parallel size {})", plan.tp()));
    }
    tp_job_ = std::make_unique<TensorParallelJob>(
        join_tensor_parallel(*dist, plan.tp(), plan.dp * plan.devices_per_replica()));
    options.exec.tp_comm = tp_job_->comm;
    // Each slice is a job of its own: its checkpoint folder; tp_rank 0's outputs.
    if (!options.checkpoint_dir.empty())
      options.checkpoint_dir += fmt::format("/tp{}", tp_job_->tp_rank);
    if (tp_job_->tp_rank > 0) {
      options.log.clear();
      options.epoch_log.clear();
      options.freeze_trace.clear();
      options.verbose = false;
    }
    owned_control_ = std::make_unique<C10dControlPlane>(*tp_job_->slice);
  } else {
    owned_control_ = make_control_plane(dist);
  }
  init(plan, std::move(options), *owned_control_, nullptr);
}

Trainer::Trainer(const Plan& plan, TrainOptions options, ControlPlane& control,
                 TransportFactory transport) {
  init(plan, std::move(options), control, std::move(transport));
}

void Trainer::init(const Plan& plan, TrainOptions options, ControlPlane& control,
                   TransportFactory transport) {
  run_ = std::make_unique<TrainRun>(plan, std::move(options), control, std::move(transport));
  cache_ = std::make_unique<AutoCache>(*run_);
  evaluator_ = std::make_unique<Evaluator>(*run_);
  checkpointer_ = std::make_unique<Checkpointer>(*run_, *cache_);
  transitioner_ = std::make_unique<Transitioner>(*run_, *cache_);
  cache_->open();
}

Trainer::~Trainer() = default;

const Plan& Trainer::plan() const {
  return run_->plan;
}

int64_t Trainer::step() const {
  return run_->progress.step;
}

int64_t Trainer::steps_per_epoch() const {
  return run_->steps_per_epoch();
}

int64_t Trainer::epoch() const {
  return run_->progress.epoch;
}

int Trainer::frozen_layers() const {
  return run_->progress.frozen_layers;
}

const ElasticPolicy* Trainer::elastic() const {
  return run_->elastic_policy.get();
}

ActivationStore* Trainer::activation_store() const {
  return cache_->store();
}

bool Trainer::finished() const {
  return run_->progress.epoch >= run_->options.epochs ||
         (run_->options.max_steps > 0 && run_->progress.step >= run_->options.max_steps);
}

int64_t Trainer::epoch_steps_left() const {
  if (run_->data->epochs)
    return run_->data->epochs->steps_left(run_->plan.dp, run_->plan.batch_size / run_->plan.dp);
  return run_->steps_per_epoch() - run_->progress.epoch_step;
}

int64_t Trainer::next_boundary() const {
  const int64_t s = run_->progress.step;
  auto next_multiple = [s](int64_t k) { return (s / k + 1) * k; };
  int64_t end = s + epoch_steps_left();
  if (run_->options.max_steps > 0) end = std::min(end, run_->options.max_steps);
  if (!run_->asynchronous) {
    if (run_->options.checkpoint_every_steps > 0) {
      end = std::min(end, next_multiple(run_->options.checkpoint_every_steps));
    }
    if ((policy_ || run_->elastic_policy) && run_->options.policy_interval_steps > 0) {
      end = std::min(end, next_multiple(run_->options.policy_interval_steps));
    }
  }
  return end;
}

void Trainer::run_steps(int64_t end) {
  run_->set_learning_rate();
  TrainProgress& p = run_->progress;
  const int64_t first = p.step, n = end - first;
  if (run_->data->epochs)
    run_->data->epochs->draw(first, n, run_->plan.dp, run_->plan.batch_size / run_->plan.dp);
  const bool warmup = run_->options.exec.warmup && !run_->session_warm;
  const WindowResult w =
      run_->session->run_window(static_cast<int>(first), static_cast<int>(n), warmup);
  run_->session_warm = true;
  for (double l : w.step_loss_sum) p.loss_sum += l;
  p.samples += n * run_->plan.batch_size;
  p.steps += n;
  p.epoch_step += n;
  p.epoch_sample += n * run_->plan.batch_size;
  p.train_s += w.seconds;
  p.step = end;
  if (run_->elastic_policy) transitioner_->collect_gradient_norms(n);
}

void Trainer::begin_epoch() {
  TrainProgress& p = run_->progress;
  ++p.epoch;
  p.epoch_step = 0;
  p.epoch_sample = 0;
  if (run_->data->epochs) run_->data->epochs->begin_epoch(static_cast<int>(p.epoch));
}

TrainResult Trainer::run() {
  if (run_->options.resume) result_.resumed_from = checkpointer_->resume();
  run_->progress.mark = std::chrono::steady_clock::now();
  while (!finished()) {
    const bool stepped = epoch_steps_left() > 0;
    if (stepped) {
      run_steps(next_boundary());
    } else if (run_->progress.epoch_step == 0) {
      throw InputError(
          fmt::format("plan: batch_size: {} samples a step leave no full step in an "
                      "epoch of the training data",
                      run_->plan.batch_size));
    }
    const int64_t s = run_->progress.step;
    const bool epoch_end = epoch_steps_left() == 0;
    if (epoch_end) finish_epoch();
    const bool policy_point = run_->options.policy_interval_steps > 0
                                  ? stepped && s % run_->options.policy_interval_steps == 0
                                  : epoch_end;
    // Not after the last epoch; but at --max-steps, yes: a run split there and resumed must
    // re-plan where the uninterrupted run does.
    if (policy_point && run_->progress.epoch < run_->options.epochs) {
      std::optional<Transition> t;
      if (run_->elastic_policy) {
        t = transitioner_->elastic_decision(epoch_end);
      } else if (policy_) {
        t = policy_(*this, s);
      }
      if (t) apply(*t);
    }
    if (checkpointer_->due(epoch_end)) checkpointer_->write();
  }
  if (!run_->options.checkpoint_dir.empty() &&
      run_->progress.last_checkpoint != run_->progress.step) {
    checkpointer_->write();
  }
  write_outputs();
  cache_->close();
  result_.epochs = run_->progress.log;
  result_.steps = run_->progress.step;
  result_.last_checkpoint = run_->progress.last_checkpoint;
  for (const auto& [d, stages] : run_->session->hosted()) {
    for (const auto& [s, rt] : stages) {
      result_.parameters[{d / run_->session->shape().devices_per_replica, s}] = rt->parameters();
    }
  }
  return result_;
}

void Trainer::finish_epoch() {
  double eval[4] = {0, 0, 0, 0};  // loss sum, correct, predictions, samples
  evaluator_->evaluate(eval);
  std::vector<double> local = {run_->progress.loss_sum, eval[0], eval[1], eval[2], eval[3]};
  const std::vector<double> counts = cache_->take_counts();  // AutoCache's work in the epoch
  local.insert(local.end(), counts.begin(), counts.end());
  const std::vector<double> g = run_->sum_over_ranks(std::move(local));
  TrainProgress& p = run_->progress;
  EpochReport r;
  r.epoch = static_cast<int>(p.epoch);
  r.step = p.step;
  r.K = run_->plan.num_stages();
  r.dp = run_->plan.dp;
  r.M = run_->plan.chunks;
  r.frozen_layers = p.frozen_layers;
  r.steps = p.steps;
  r.samples = p.samples;
  r.lr = p.lr;
  r.train_s = p.train_s;
  r.transition_s = p.transition_s;
  p.wall_s += seconds_since(p.mark);
  p.mark = std::chrono::steady_clock::now();
  r.wall_s = p.wall_s;
  r.samples_per_s = p.train_s > 0 ? static_cast<double>(p.samples) / p.train_s : 0;
  r.train_loss = p.samples > 0 ? g[0] / static_cast<double>(p.samples) : 0;
  r.eval_loss = g[4] > 0 ? g[1] / g[4] : 0;
  if (g[3] > 0) r.eval_accuracy = g[2] / g[3];
  r.cache = p.cache;
  if (cache_->store()) r.cache_stats = cache_counts_from(g.data() + 5);
  p.log.push_back(r);
  p.loss_sum = 0;
  p.samples = p.steps = 0;
  p.train_s = p.wall_s = p.transition_s = 0;
  begin_epoch();
  write_outputs();
  if (run_->options.verbose && run_->session->rank() == 0) {
    std::printf(
        "epoch %d  step %lld  K=%d dp=%d M=%d frozen=%d  lr %.4g  %.1f samples/s  train loss "
        "%.4f  eval loss %.4f%s  (%.2f s)\n",
        r.epoch, static_cast<long long>(r.step), r.K, r.dp, r.M, r.frozen_layers, r.lr,
        r.samples_per_s, r.train_loss, r.eval_loss,
        r.eval_accuracy ? fmt::format("  accuracy {:.4f}", *r.eval_accuracy).c_str() : "",
        r.wall_s);
    std::fflush(stdout);
  }
}

void Trainer::write_outputs() const {
  if (run_->session->rank() != 0) return;
  const TrainProgress& p = run_->progress;
  if (!run_->options.log.empty()) {
    std::string lines;
    for (const auto& r : p.log) lines += r.to_json().dump() + "\n";
    write_file_atomic(run_->options.log, lines);
  }
  if (!run_->options.epoch_log.empty()) {
    elastic::EpochLog log;
    log.source = "measured";
    log.model = run_->plan.model;
    for (const auto& r : p.log) {
      elastic::EpochRecord e;
      e.epoch = r.epoch;
      e.frozen_layers = r.frozen_layers;
      e.K = r.K;
      e.dp = r.dp;
      e.chunks = r.M;
      e.steps = r.steps;
      e.samples = r.samples;
      e.compute_s = r.train_s;
      e.transition_s = r.transition_s;
      elastic::complete_epoch_row(e);
      e.loss = r.eval_loss;
      e.accuracy = r.eval_accuracy;
      e.cache = r.cache;
      e.cache_stats = r.cache_stats;
      log.epochs.push_back(e);
    }
    elastic::save_epoch_log(log, run_->options.epoch_log);
  }
  if (!run_->options.freeze_trace.empty()) {
    elastic::FreezeTrace t;
    t.model = run_->plan.model;
    t.layers = p.freeze_layers;
    if (run_->elastic_policy) t.alpha = run_->elastic_policy->options().alpha;
    t.source = "executor";
    t.events = p.freeze;
    elastic::save_freeze_trace(t, run_->options.freeze_trace);
  }
}

void Trainer::apply(const Transition& t) {
  transitioner_->apply(t);
}

}  // namespace pipetwin::exec
