#include "core/schedule/v_device.hpp"

#include <algorithm>

namespace pipetwin {

VDevice::VDevice(ScheduleBuilder& b, int rank, int step)
    : b_(b),
      stage_{rank, 2 * b.shape().devices_per_replica - 1 - rank},
      step_(step),
      base_(step * b.M()) {}

void VDevice::F(int chunk) {
  b_.forward(stage_[chunk], base_ + forwards_[chunk]++);
}

void VDevice::B(int chunk) {
  b_.checkpointed_backward(stage_[chunk], base_ + backwards_[chunk]++);
}

void VDevice::I(int chunk) {
  const int mb = base_ + backwards_[chunk]++;
  b_.checkpointed_backward_input(stage_[chunk], mb);
  waiting_.emplace_back(chunk, mb);
}

void VDevice::W(int chunk) {
  const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                               [chunk](const auto& w) { return w.first == chunk; });
  b_.backward_weight(stage_[chunk], it->second);
  waiting_.erase(it);
}

void VDevice::W() {
  b_.backward_weight(stage_[waiting_.front().first], waiting_.front().second);
  waiting_.pop_front();
}

bool VDevice::weights_waiting(int chunk) const {
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [chunk](const auto& w) { return w.first == chunk; });
}

void VDevice::optimizer_steps() {
  b_.optimizer_step(stage_[0], step_);
  b_.optimizer_step(stage_[1], step_);
}

}  // namespace pipetwin
