#include "exec/trainer.hpp"
#include "exec/autocast.hpp"

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
#include "exec/checkpoint.hpp"
#include "exec/session.hpp"
#include "exec/train_data.hpp"
#include "exec/trainer_progress.hpp"
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

Trainer::Trainer(const Plan& plan, TrainOptions options, Distributed* dist)
    : plan_(plan), options_(std::move(options)), dist_(dist), progress_(new Progress) {
  options_.validate();
  if (options_.elastic) {
    elastic_ = std::make_unique<ElasticPolicy>(plan, *options_.elastic);
    if (options_.elastic->unit == elastic::FreezeUnit::kStep) {
      options_.policy_interval_steps = options_.elastic->interval;
    }
  }
  asynchronous_ = schedule_info(plan.schedule).asynchronous;
  const at::ScalarType dtype = options_.exec.float64 ? at::kDouble : at::kFloat;
  data_model_ = std::make_unique<models::LayeredModel>(
      models::build_model(plan.model, dtype, options_.exec.seed));
  TrainDataOptions d;
  d.kind = options_.exec.data;
  d.batch = plan.batch_size;
  d.seed = options_.exec.seed;
  d.float64 = options_.exec.float64;
  d.steps_per_epoch = options_.steps_per_epoch;
  d.eval_batches = options_.eval_batches;
  data_ = std::make_unique<TrainData>(make_train_data(d, *data_model_));
  const int64_t spe = data_->steps_per_epoch;
  if (asynchronous_ &&
      (options_.checkpoint_every_steps % spe != 0 || options_.max_steps % spe != 0 ||
       options_.policy_interval_steps % spe != 0)) {
    throw InputError(fmt::format(
        "--checkpoint-every/--max-steps: schedule {} is asynchronous, so the pipeline drains only "
        "at epoch ends; give multiples of the {} steps of an epoch (or --checkpoint-every epoch)",
        plan.schedule, spe));
  }
  session_ = std::make_unique<PipelineSession>(plan_, session_options(), dist_, data_->train);
  fingerprint_ = initial_fingerprint_ =
      plan_fingerprint(plan_, precision_tag(options_.exec.precision()));
  if (!options_.checkpoint_dir.empty()) {
    std::filesystem::create_directories(options_.checkpoint_dir);
    if (!options_.resume && read_manifest(options_.checkpoint_dir)) {
      throw InputError(fmt::format(
          "{}/{}: a checkpoint is there already; pass --resume to continue it, or choose "
          "another --checkpoint-dir",
          options_.checkpoint_dir, kManifestName));
    }
  }
  int layers = 0;
  try {
    layers = elastic::TransformerLayers::from_profile(plan.profile).layers();
  } catch (const InputError&) {
    layers = 0;  // nothing could freeze: the trace stays empty
  }
  progress_->freeze_layers = layers;
  progress_->freeze.push_back({0, 0, 0, 0});
  options_.autocache.validate();
  open_activation_store();
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const {
  return progress_->step;
}

int64_t Trainer::steps_per_epoch() const {
  return data_->steps_per_epoch;
}

int64_t Trainer::epoch() const {
  return progress_->epoch;
}

int Trainer::frozen_layers() const {
  return progress_->frozen_layers;
}

bool Trainer::finished() const {
  return progress_->epoch >= options_.epochs ||
         (options_.max_steps > 0 && progress_->step >= options_.max_steps);
}

int64_t Trainer::epoch_steps_left() const {
  if (data_->epochs) return data_->epochs->steps_left(plan_.dp, plan_.batch_size / plan_.dp);
  return steps_per_epoch() - progress_->epoch_step;
}

int64_t Trainer::next_boundary() const {
  const int64_t s = progress_->step;
  auto next_multiple = [s](int64_t k) { return (s / k + 1) * k; };
  int64_t end = s + epoch_steps_left();
  if (options_.max_steps > 0) end = std::min(end, options_.max_steps);
  if (!asynchronous_) {
    if (options_.checkpoint_every_steps > 0) {
      end = std::min(end, next_multiple(options_.checkpoint_every_steps));
    }
    if ((policy_ || elastic_) && options_.policy_interval_steps > 0) {
      end = std::min(end, next_multiple(options_.policy_interval_steps));
    }
  }
  return end;
}

void Trainer::set_learning_rate() {
  double lr = options_.exec.optimizer.lr;
  if (options_.lr_decay_every > 0) {
    lr *= std::pow(options_.lr_decay,
                   static_cast<double>(progress_->epoch / options_.lr_decay_every));
  }
  progress_->lr = lr;
  for (const auto& [d, stages] : session_->hosted()) {
    for (const auto& [s, rt] : stages) rt->optimizer().set_lr(lr);
  }
}

void Trainer::run_steps(int64_t end) {
  set_learning_rate();
  Progress& p = *progress_;
  const int64_t first = p.step, n = end - first;
  if (data_->epochs) data_->epochs->draw(first, n, plan_.dp, plan_.batch_size / plan_.dp);
  const bool warmup = options_.exec.warmup && !session_warm_;
  const WindowResult w = session_->run_window(static_cast<int>(first), static_cast<int>(n), warmup);
  session_warm_ = true;
  for (double l : w.step_loss_sum) p.loss_sum += l;
  p.samples += n * plan_.batch_size;
  p.steps += n;
  p.epoch_step += n;
  p.epoch_sample += n * plan_.batch_size;
  p.train_s += w.seconds;
  p.step = end;
  if (elastic_) collect_gradient_norms(n);
}

void Trainer::begin_epoch() {
  Progress& p = *progress_;
  ++p.epoch;
  p.epoch_step = 0;
  p.epoch_sample = 0;
  if (data_->epochs) data_->epochs->begin_epoch(static_cast<int>(p.epoch));
}

TrainResult Trainer::run() {
  if (options_.resume) resume();
  progress_->mark = std::chrono::steady_clock::now();
  while (!finished()) {
    const bool stepped = epoch_steps_left() > 0;
    if (stepped) {
      run_steps(next_boundary());
    } else if (progress_->epoch_step == 0) {
      throw InputError(
          fmt::format("plan: batch_size: {} samples a step leave no full step in an "
                      "epoch of the training data",
                      plan_.batch_size));
    }
    const int64_t s = progress_->step;
    const bool epoch_end = epoch_steps_left() == 0;
    if (epoch_end) finish_epoch();
    const bool policy_point = options_.policy_interval_steps > 0
                                  ? stepped && s % options_.policy_interval_steps == 0
                                  : epoch_end;
    // Not after the last epoch; but at --max-steps, yes: a run split there and resumed must
    // re-plan where the uninterrupted run does.
    if (policy_point && progress_->epoch < options_.epochs) {
      std::optional<Transition> t;
      if (elastic_) {
        t = elastic_decision(epoch_end);
      } else if (policy_) {
        t = policy_(*this, s);
      }
      if (t) apply(*t);
    }
    if (checkpoint_due(epoch_end)) checkpoint();
  }
  if (!options_.checkpoint_dir.empty() && progress_->last_checkpoint != progress_->step) {
    checkpoint();
  }
  write_outputs();
  close_activation_store();
  result_.epochs = progress_->log;
  result_.steps = progress_->step;
  result_.last_checkpoint = progress_->last_checkpoint;
  for (const auto& [d, stages] : session_->hosted()) {
    for (const auto& [s, rt] : stages) {
      result_.parameters[{d / session_->shape().devices_per_replica, s}] = rt->parameters();
    }
  }
  return result_;
}

void Trainer::finish_epoch() {
  double eval[4] = {0, 0, 0, 0};  // loss sum, correct, predictions, samples
  evaluate(eval);
  std::vector<double> local = {progress_->loss_sum, eval[0], eval[1], eval[2], eval[3]};
  const std::vector<double> counts = take_cache_counts();  // AutoCache's work in the epoch
  local.insert(local.end(), counts.begin(), counts.end());
  const std::vector<double> g = sum_over_ranks(std::move(local));
  Progress& p = *progress_;
  EpochReport r;
  r.epoch = static_cast<int>(p.epoch);
  r.step = p.step;
  r.K = plan_.num_stages();
  r.dp = plan_.dp;
  r.M = plan_.chunks;
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
  if (store_) r.cache_stats = cache_counts_from(g.data() + 5);
  p.log.push_back(r);
  p.loss_sum = 0;
  p.samples = p.steps = 0;
  p.train_s = p.wall_s = p.transition_s = 0;
  begin_epoch();
  write_outputs();
  if (options_.verbose && session_->rank() == 0) {
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
  if (session_->rank() != 0) return;
  const Progress& p = *progress_;
  if (!options_.log.empty()) {
    std::string lines;
    for (const auto& r : p.log) lines += r.to_json().dump() + "\n";
    write_file_atomic(options_.log, lines);
  }
  if (!options_.epoch_log.empty()) {
    elastic::EpochLog log;
    log.source = "measured";
    log.model = plan_.model;
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
      e.time_s = r.train_s + r.transition_s;
      e.throughput_samples_per_s = e.time_s > 0 ? static_cast<double>(r.samples) / e.time_s : 0;
      e.loss = r.eval_loss;
      e.accuracy = r.eval_accuracy;
      e.cache = r.cache;
      e.cache_stats = r.cache_stats;
      log.epochs.push_back(e);
    }
    elastic::save_epoch_log(log, options_.epoch_log);
  }
  if (!options_.freeze_trace.empty()) {
    elastic::FreezeTrace t;
    t.model = plan_.model;
    t.layers = p.freeze_layers;
    if (elastic_) t.alpha = elastic_->options().alpha;
    t.source = "executor";
    t.events = p.freeze;
    elastic::save_freeze_trace(t, options_.freeze_trace);
  }
}

void Trainer::apply(const Transition& t) {
  const Progress& p = *progress_;
  if (t.plan.model != plan_.model) {
    throw InputError(
        fmt::format("elastic transition: the new plan must keep the model ({}, not {})",
                    plan_.model, t.plan.model));
  }
  if (t.frozen_layers < p.frozen_layers || t.frozen_layers > p.freeze_layers) {
    throw InputError(fmt::format(
        "elastic transition: frozen_layers must be in {}..{} (layers do not thaw; {} given)",
        p.frozen_layers, p.freeze_layers, t.frozen_layers));
  }
  Transition checked = t;
  checked.plan.frozen_layers = t.frozen_layers == 0
                                   ? 0
                                   : elastic::TransformerLayers::from_profile(t.plan.profile)
                                         .frozen_profile_layers(t.frozen_layers);
  checked.plan.validate("elastic transition: plan");
  carry_out(checked);
}

}  // namespace pipetwin::exec
