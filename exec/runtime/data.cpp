#include "exec/runtime/data.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "models/dataset.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::exec {

void BatchSource::configure(int samples_per_step, int replicas, int micro_batches) {
  samples_ = samples_per_step;
  replicas_ = replicas;
  micro_ = micro_batches;
  forget_steps();
}

void BatchSource::forget_steps() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

void BatchSource::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [step, batch] : cache_) batch.wait();
}

at::Tensor BatchSource::example_input() {
  return slice(example_batch().first, 0, 0);
}

std::shared_future<BatchSource::Batch> BatchSource::request(int step, std::launch how) {
  auto it = cache_.find(step);
  if (it != cache_.end()) return it->second;
  // Stages run at most a few steps apart: keep a small window.
  while (cache_.size() > 16) cache_.erase(cache_.begin());
  auto made = std::async(how, [this, step] {
    const MemoryTracker::ScopedDevice on_host(-1);  // host memory, not a stage's
    Batch batch = mini_batch(step);
    if (batch.first.size(0) != samples_) {
      throw std::logic_error(fmt::format("mini-batch {} has {} samples, expected {}", step,
                                         batch.first.size(0), samples_));
    }
    return batch;
  });
  return cache_[step] = made.share();
}

BatchSource::Batch BatchSource::cached(int step) {
  std::shared_future<Batch> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch = request(step, std::launch::deferred);
    if (prefetch_) request(step + 1, std::launch::async);
  }
  return batch.get();  // a deferred batch is made by its first reader; the others wait for it
}

at::Tensor BatchSource::slice(const at::Tensor& t, int replica, int micro) const {
  const int64_t per_replica = samples_ / replicas_;
  const int64_t per_micro = per_replica / micro_;
  return t.narrow(0, replica * per_replica + micro * per_micro, per_micro).contiguous();
}

at::Tensor BatchSource::input(int step, int replica, int micro) {
  return slice(cached(step).first, replica, micro);
}

at::Tensor BatchSource::target(int step, int replica, int micro) {
  return slice(cached(step).second, replica, micro);
}

namespace {

class Synthetic : public BatchSource {
 public:
  Synthetic(const models::LayeredModel& model, uint64_t seed) : model_(model), seed_(seed) {}
  ~Synthetic() override { drain(); }
  std::pair<at::Tensor, at::Tensor> mini_batch(int step) override {
    const uint64_t s = seed_ * 1000003ULL + static_cast<uint64_t>(step);
    const int n = samples_per_step();
    return {model_.synthetic_input(n, s), model_.synthetic_target(n, s)};
  }

 private:
  const models::LayeredModel& model_;
  uint64_t seed_;
};

class Digits : public BatchSource {
 public:
  Digits(int samples, uint64_t seed, bool tokens, bool float64) : samples_(samples), seed_(seed) {
    models::Dataset d = models::load_digits();
    if (tokens) d = models::digits_as_tokens(d);
    inputs_ = float64 && d.inputs.is_floating_point() ? d.inputs.to(at::kDouble) : d.inputs;
    labels_ = d.labels;
  }
  ~Digits() override { drain(); }
  std::pair<at::Tensor, at::Tensor> mini_batch(int step) override {
    // Samples step*B .. step*B + B - 1 of the endless sequence of seeded epochs.
    const int64_t n = labels_.size(0);
    std::vector<int64_t> idx;
    for (int64_t k = 0; k < samples_; ++k) {
      const int64_t pos = static_cast<int64_t>(step) * samples_ + k;
      idx.push_back(order(pos / n)[static_cast<size_t>(pos % n)]);
    }
    const at::Tensor i = at::tensor(idx, at::kLong);
    return {inputs_.index_select(0, i), labels_.index_select(0, i)};
  }

 private:
  const std::vector<int64_t>& order(int64_t epoch) {
    auto it = orders_.find(epoch);
    if (it != orders_.end()) return it->second;
    at::Generator gen = at::detail::createCPUGenerator(seed_ * 7919 + static_cast<uint64_t>(epoch));
    const at::Tensor perm = at::randperm(labels_.size(0), gen, at::kLong);
    std::vector<int64_t> o(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + perm.numel());
    return orders_.emplace(epoch, std::move(o)).first->second;
  }
  int samples_;
  uint64_t seed_;
  at::Tensor inputs_, labels_;
  std::map<int64_t, std::vector<int64_t>> orders_;
};

}  // namespace

std::unique_ptr<BatchSource> synthetic_batches(const models::LayeredModel& model,
                                               int samples_per_step, uint64_t seed,
                                               bool /*float64: the model's dtype*/) {
  auto s = std::make_unique<Synthetic>(model, seed);
  s->configure(samples_per_step, 1, 1);
  return s;
}

std::unique_ptr<BatchSource> digits_batches(int samples_per_step, uint64_t seed, bool as_tokens,
                                            bool float64) {
  return std::make_unique<Digits>(samples_per_step, seed, as_tokens, float64);
}

}  // namespace pipetwin::exec
