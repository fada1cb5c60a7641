#include "exec/train_data.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "models/dataset.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::exec {

EpochBatches::EpochBatches(at::Tensor inputs, at::Tensor labels, int samples_per_step,
                           uint64_t seed)
    : inputs_(std::move(inputs)),
      labels_(std::move(labels)),
      samples_per_step_(samples_per_step),
      seed_(seed) {}

const std::vector<int64_t>& EpochBatches::order_locked(int64_t epoch) {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  // Stages run at most a window apart: forget epochs long past.
  while (!orders_.empty() && orders_.begin()->first < epoch - 1) orders_.erase(orders_.begin());
  at::Generator gen = at::detail::createCPUGenerator(seed_ * 7919 + static_cast<uint64_t>(epoch));
  const at::Tensor perm = at::randperm(samples(), gen, at::kLong);
  std::vector<int64_t> o(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + perm.numel());
  return orders_.emplace(epoch, std::move(o)).first->second;
}

std::vector<int64_t> EpochBatches::order(int64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  return order_locked(epoch);
}

void EpochBatches::set_order(int64_t epoch, std::vector<int64_t> order) {
  std::lock_guard<std::mutex> lock(mu_);
  orders_[epoch] = std::move(order);
}

std::pair<at::Tensor, at::Tensor> EpochBatches::mini_batch(int step) {
  const int64_t per_epoch = steps_per_epoch();
  const int64_t epoch = step / per_epoch, first = (step % per_epoch) * samples_per_step_;
  std::vector<int64_t> idx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& o = order_locked(epoch);
    idx.assign(o.begin() + first, o.begin() + first + samples_per_step_);
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
                                               d.labels.index_select(0, ti), o.batch, o.seed);
  out.epochs = epochs.get();
  out.steps_per_epoch = epochs->steps_per_epoch();
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
