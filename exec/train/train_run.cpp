#include "exec/train/train_run.hpp"

#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/elastic/transformer_layers.hpp"
#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/train_data.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

TrainRun::TrainRun(const Plan& plan_in, TrainOptions options_in, ControlPlane& control_in,
                   TransportFactory transport_in)
    : plan(plan_in),
      options(std::move(options_in)),
      control(control_in),
      transport(std::move(transport_in)) {
  options.validate();
  if (options.elastic) {
    elastic_policy = std::make_unique<ElasticPolicy>(plan, *options.elastic);
    if (options.elastic->unit == elastic::FreezeUnit::kStep) {
      options.policy_interval_steps = options.elastic->interval;
    }
  }
  asynchronous = schedule_info(plan.schedule).asynchronous;
  const at::ScalarType dtype = options.exec.float64 ? at::kDouble : at::kFloat;
  data_model = std::make_unique<models::LayeredModel>(
      models::build_model(plan.model, dtype, options.exec.seed));
  TrainDataOptions d;
  d.kind = options.exec.data;
  d.batch = plan.batch_size;
  d.seed = options.exec.seed;
  d.float64 = options.exec.float64;
  d.steps_per_epoch = options.steps_per_epoch;
  d.eval_batches = options.eval_batches;
  data = std::make_unique<TrainData>(make_train_data(d, *data_model));
  const int64_t spe = data->steps_per_epoch;
  if (asynchronous && (options.checkpoint_every_steps % spe != 0 || options.max_steps % spe != 0 ||
                       options.policy_interval_steps % spe != 0)) {
    throw InputError(fmt::format(
        "--checkpoint-every/--max-steps: schedule {} is asynchronous, so the pipeline drains only "
        "at epoch ends; give multiples of the {} steps of an epoch (or --checkpoint-every epoch)",
        plan.schedule, spe));
  }
  session =
      std::make_unique<PipelineSession>(plan, session_options(), control, data->train, transport);
  fingerprint = initial_fingerprint =
      plan_fingerprint(plan, precision_tag(options.exec.precision()));
  if (!options.checkpoint_dir.empty()) {
    std::filesystem::create_directories(options.checkpoint_dir);
    if (!options.resume && read_manifest(options.checkpoint_dir)) {
      throw InputError(fmt::format(
          "{}/{}: a checkpoint is there already; pass --resume to continue it, or choose "
          "another --checkpoint-dir",
          options.checkpoint_dir, kManifestName));
    }
  }
  int layers = 0;
  try {
    layers = elastic::TransformerLayers::from_profile(plan.profile).layers();
  } catch (const InputError&) {
    layers = 0;  // nothing could freeze: the trace stays empty
  }
  progress.freeze_layers = layers;
  progress.freeze.push_back({0, 0, 0, 0});
  options.autocache.validate();
}

TrainRun::~TrainRun() = default;

int64_t TrainRun::steps_per_epoch() const {
  return data->steps_per_epoch;
}

ExecOptions TrainRun::session_options() const {
  ExecOptions o = options.exec;
  o.track_gradient_norms = elastic_policy != nullptr;
  return o;
}

void TrainRun::replace_session(const Plan& next_plan) {
  auto next = std::make_unique<PipelineSession>(next_plan, session_options(), control, data->train,
                                                transport);
  session = std::move(next);
  session_warm = false;
  plan = next_plan;
  fingerprint = plan_fingerprint(plan, precision_tag(options.exec.precision()));
}

void TrainRun::set_learning_rate() {
  double lr = options.exec.optimizer.lr;
  if (options.lr_decay_every > 0) {
    lr *= std::pow(options.lr_decay, static_cast<double>(progress.epoch / options.lr_decay_every));
  }
  progress.lr = lr;
  for (const auto& [d, stages] : session->hosted()) {
    for (const auto& [s, rt] : stages) rt->optimizer().set_lr(lr);
  }
}

std::vector<double> TrainRun::sum_over_ranks(std::vector<double> values) const {
  try {
    return control.all_reduce_sum(std::move(values));
  } catch (const std::exception& e) {
    throw RunFailure(fmt::format("{}step {}: waiting for the other ranks: {}", control.who(),
                                 progress.step, e.what()));
  }
}

std::vector<double> TrainRun::values_of_rank0(const std::vector<double>& values) const {
  try {
    return control.values_of(0, values);
  } catch (const std::exception& e) {
    throw RunFailure(fmt::format("{}step {}: waiting for the other ranks: {}", control.who(),
                                 progress.step, e.what()));
  }
}

void TrainRun::agree(std::exception_ptr failure, const std::string& what, bool input_error) const {
  control.agree(failure, what, input_error);
}

}  // namespace pipetwin::exec
