#include "exec/runtime/weight_grad_store.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace pipetwin::exec {

c10::intrusive_ptr<models::DeferredWeightGrads> WeightGradStore::record(int mb) {
  Entry& e = entries_[mb];
  e.grads = c10::make_intrusive<models::DeferredWeightGrads>();
  e.input_done = false;
  return e.grads;
}

std::vector<at::Tensor> WeightGradStore::input_half(
    int mb, const std::function<std::vector<at::Tensor>()>& backprop) {
  auto it = entries_.find(mb);
  if (it == entries_.end()) {
    throw std::logic_error(fmt::format(
        "backward-input of micro-batch {}: its forward did not record for a split backward", mb));
  }
  models::DeferredWeightGrads& grads = *it->second.grads;
  grads.set_deferring(true);
  std::vector<at::Tensor> out;
  try {
    out = backprop();
  } catch (...) {
    grads.set_deferring(false);
    throw;
  }
  grads.set_deferring(false);
  it->second.input_done = true;
  return out;
}

void WeightGradStore::weight_half(int mb, const std::vector<int>& layers,
                                  const std::function<void(int)>& on_layer_done) {
  auto it = entries_.find(mb);
  if (it == entries_.end() || !it->second.input_done) {
    throw std::logic_error(
        fmt::format("backward-weight of micro-batch {} before its backward-input", mb));
  }
  models::DeferredWeightGrads& grads = *it->second.grads;
  for (int l : grads.layers()) {
    if (std::find(layers.begin(), layers.end(), l) == layers.end()) {
      throw std::logic_error(fmt::format(
          "backward-weight of micro-batch {}: deferred work of layer {}, not a trained layer here",
          mb, l));
    }
  }
  for (int l : layers) {
    grads.run(l);
    if (on_layer_done) on_layer_done(l);
  }
  entries_.erase(it);
}

std::vector<int> WeightGradStore::awaiting() const {
  std::vector<int> out;
  for (const auto& [mb, e] : entries_) {
    if (e.input_done) out.push_back(mb);
  }
  return out;
}

bool WeightGradStore::awaits(int mb) const {
  auto it = entries_.find(mb);
  return it != entries_.end() && it->second.input_done;
}

int WeightGradStore::pending(int mb) const {
  auto it = entries_.find(mb);
  return it == entries_.end() ? 0 : it->second.grads->pending();
}

int64_t WeightGradStore::bytes() const {
  int64_t sum = 0;
  for (const auto& [mb, e] : entries_) sum += e.grads->bytes();
  return sum;
}

}  // namespace pipetwin::exec
