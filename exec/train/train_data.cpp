#include "exec/train/train_data.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "models/dataset.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::exec {

EpochBatches::EpochBatches(at::Tensor inputs, at::Tensor labels, uint64_t seed)
    : inputs_(std::move(inputs)),
      labels_(std::move(labels)),
      sampler_(static_cast<long>(labels_.size(0)), 1, seed) {}

int EpochBatches::epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.epoch();
}

int64_t EpochBatches::consumed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.consumed();
}

int64_t EpochBatches::steps_left(int replicas, int batch) const {
  std::lock_guard<std::mutex> lock(mu_);
  return (samples() - sampler_.consumed()) / (static_cast<int64_t>(replicas) * batch);
}

void EpochBatches::draw(int64_t first_step, int64_t steps, int replicas, int batch) {
  forget_steps();  // before taking mu_: cached() takes the base's lock, then mini_batch() ours
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t per_step = static_cast<int64_t>(replicas) * batch;
  if (steps > (samples() - sampler_.consumed()) / per_step) {
    throw std::logic_error(fmt::format("data: {} steps of {} samples asked, epoch {} has {} left",
                                       steps, per_step, sampler_.epoch(),
                                       samples() - sampler_.consumed()));
  }
  first_step_ = first_step;
  drawn_replicas_ = replicas;
  drawn_.clear();
  for (int64_t k = 0; k < steps; ++k) {
    const elastic::ElasticSampler::Step st = sampler_.next_step(replicas, batch);
    std::vector<int64_t> ids;
    for (const auto& r : st.ids) ids.insert(ids.end(), r.begin(), r.end());
    drawn_.push_back(std::move(ids));
  }
}

void EpochBatches::begin_epoch(int epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  sampler_.begin_epoch(epoch);
}

elastic::ElasticSampler::Position EpochBatches::position() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.position();
}

void EpochBatches::restore(const elastic::ElasticSampler::Position& p) {
  std::lock_guard<std::mutex> lock(mu_);
  sampler_.restore(p);
}

std::vector<int64_t> EpochBatches::replica_ids(int step, int replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t k = step - first_step_;
  if (k < 0 || k >= static_cast<int64_t>(drawn_.size())) return {};
  const auto& ids = drawn_[static_cast<size_t>(k)];
  const size_t per = ids.size() / static_cast<size_t>(drawn_replicas_);
  const auto first = ids.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(replica));
  return std::vector<int64_t>(first, first + static_cast<std::ptrdiff_t>(per));
}

at::Tensor EpochBatches::sample_inputs(int64_t first, int64_t n) const {
  return inputs_.narrow(0, first, n);
}

std::pair<at::Tensor, at::Tensor> EpochBatches::example_batch() {
  const int64_t n = std::min<int64_t>(samples_per_step(), samples());
  return {inputs_.narrow(0, 0, n), labels_.narrow(0, 0, n)};
}

std::pair<at::Tensor, at::Tensor> EpochBatches::mini_batch(int step) {
  std::vector<int64_t> idx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t k = step - first_step_;
    if (k < 0 || k >= static_cast<int64_t>(drawn_.size())) {
      throw std::logic_error(fmt::format("data: step {} was not drawn (steps {}..{} were)", step,
                                         first_step_,
                                         first_step_ + static_cast<int64_t>(drawn_.size()) - 1));
    }
    idx = drawn_[static_cast<size_t>(k)];
  }
  const at::Tensor i = at::tensor(idx, at::kLong);
  return {inputs_.index_select(0, i), labels_.index_select(0, i)};
}

namespace {

TrainData digits_data(const TrainDataOptions& o) {
  models::Dataset d = models::load_digits();
  if (o.kind == "digits-tokens") d = models::digits_as_tokens(d);
  at::Tensor inputs =
      o.float64 && d.inputs.is_floating_point() ? d.inputs.to(at::kDouble) : d.inputs;
  std::vector<int64_t> train_idx, held_idx;
  for (int64_t i = 0; i < d.size(); ++i) (i % 5 == 4 ? held_idx : train_idx).push_back(i);
  const at::Tensor ti = at::tensor(train_idx, at::kLong), hi = at::tensor(held_idx, at::kLong);
  if (o.batch > static_cast<int>(train_idx.size())) {
    throw InputError(fmt::format("plan: batch_size: {} is more than the {} training samples of {}",
                                 o.batch, train_idx.size(), o.kind));
  }
  TrainData out;
  auto epochs = std::make_unique<EpochBatches>(inputs.index_select(0, ti),
                                               d.labels.index_select(0, ti), o.seed);
  out.epochs = epochs.get();
  out.steps_per_epoch = epochs->samples() / o.batch;
  out.train = std::move(epochs);
  const at::Tensor held_in = inputs.index_select(0, hi), held_y = d.labels.index_select(0, hi);
  for (int64_t b = 0; b < held_in.size(0); b += o.batch) {
    const int64_t n = std::min<int64_t>(o.batch, held_in.size(0) - b);
    out.eval.emplace_back(held_in.narrow(0, b, n), held_y.narrow(0, b, n));
  }
  out.description =
      fmt::format("{}: {} train, {} held out", o.kind, train_idx.size(), held_idx.size());
  return out;
}

}  // namespace

TrainData make_train_data(const TrainDataOptions& o, const models::LayeredModel& model) {
  if (o.kind == "digits" || o.kind == "digits-tokens") return digits_data(o);
  if (o.kind != "synthetic") {
    throw InputError(
        fmt::format("--data: expected digits, digits-tokens or synthetic, got \"{}\"", o.kind));
  }
  if (o.steps_per_epoch < 1) {
    throw InputError(
        fmt::format("--steps-per-epoch must be positive ({} given)", o.steps_per_epoch));
  }
  if (o.eval_batches < 1) {
    throw InputError(fmt::format("--eval-batches must be positive ({} given)", o.eval_batches));
  }
  TrainData out;
  out.train = synthetic_batches(model, o.batch, o.seed, o.float64);
  out.steps_per_epoch = o.steps_per_epoch;
  // Held out: batches from seeds no training step uses (training step s uses seed * 1000003 + s).
  for (int b = 0; b < o.eval_batches; ++b) {
    const uint64_t s = ~(o.seed * 1000003ULL + static_cast<uint64_t>(b));
    out.eval.emplace_back(model.synthetic_input(o.batch, s), model.synthetic_target(o.batch, s));
  }
  out.description = fmt::format("synthetic: {} steps per epoch, {} held-out batches",
                                o.steps_per_epoch, o.eval_batches);
  return out;
}

}  // namespace pipetwin::exec
