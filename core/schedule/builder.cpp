#include "core/schedule/builder.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "core/schedule/data_parallel.hpp"
#include "core/schedule/transfer_order.hpp"

namespace pipetwin {

namespace {

thread_local bool compute_order_only = false;

}  // namespace

ComputeOrderOnly::ComputeOrderOnly() : before_(compute_order_only) {
  compute_order_only = true;
}

ComputeOrderOnly::~ComputeOrderOnly() {
  compute_order_only = before_;
}

ScheduleBuilder::ScheduleBuilder(std::string kind, const PipelineShape& shape)
    : kind_(std::move(kind)), shape_(shape) {
  shape_.normalize("schedule " + kind_);
  devices_.resize(static_cast<size_t>(shape_.devices_per_replica));
}

bool ScheduleBuilder::is_last_stage(int stage) const {
  for (const auto& e : shape_.edges) {
    if (e.from == stage) return false;
  }
  return true;
}

int ScheduleBuilder::depth(int stage) const {
  // Stage edges go forward (from < to), so depths fill in from the last stage down.
  if (depth_.empty()) {
    depth_.assign(static_cast<size_t>(K()), 0);
    for (int s = K() - 1; s >= 0; --s) {
      for (const auto& e : shape_.edges) {
        if (e.from == s) {
          depth_[static_cast<size_t>(s)] =
              std::max(depth_[static_cast<size_t>(s)], depth_[static_cast<size_t>(e.to)] + 1);
        }
      }
    }
  }
  return depth_[static_cast<size_t>(stage)];
}

int ScheduleBuilder::devices_after(int stage) const {
  if (devices_after_.empty()) {
    devices_after_.assign(static_cast<size_t>(K()), 0);
    for (int s = K() - 1; s >= 0; --s) {
      for (const auto& e : shape_.edges) {
        if (e.from != s) continue;
        auto& d = devices_after_[static_cast<size_t>(s)];
        d = std::max(d, devices_after_[static_cast<size_t>(e.to)] + shape_.replicas_of(e.to));
      }
    }
  }
  return devices_after_[static_cast<size_t>(stage)];
}

void ScheduleBuilder::emit(int device, const Action& a) {
  devices_[static_cast<size_t>(device)].push_back(a);
}

void ScheduleBuilder::compute(Op op, int stage, int mb) {
  Action a;
  a.op = op;
  a.stage = stage;
  a.micro_batch = mb;
  a.step = mb / M();
  emit(shape_.device_of(stage, mb), a);
}

void ScheduleBuilder::recv_activations(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.to != stage || shape_.device_of(e.from) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage, mb),
         Action{Op::kRecv, Payload::kActivation, stage, mb, e.from, -1, mb / M(), -1});
  }
}

void ScheduleBuilder::send_activations(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.from != stage || shape_.device_of(e.to) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage, mb),
         Action{Op::kSend, Payload::kActivation, stage, mb, e.to, -1, mb / M(), -1});
  }
}

void ScheduleBuilder::recv_gradients(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.from != stage || shape_.device_of(e.to) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage, mb),
         Action{Op::kRecv, Payload::kGradient, stage, mb, e.to, -1, mb / M(), -1});
  }
}

void ScheduleBuilder::send_gradients(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.to != stage || shape_.device_of(e.from) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage, mb),
         Action{Op::kSend, Payload::kGradient, stage, mb, e.from, -1, mb / M(), -1});
  }
}

void ScheduleBuilder::forward(int stage, int mb) {
  recv_activations(stage, mb);
  compute(Op::kForward, stage, mb);
  send_activations(stage, mb);
}

void ScheduleBuilder::backward(int stage, int mb) {
  recv_gradients(stage, mb);
  compute(Op::kBackward, stage, mb);
  send_gradients(stage, mb);
}

void ScheduleBuilder::backward_input(int stage, int mb) {
  recv_gradients(stage, mb);
  compute(Op::kBackwardInput, stage, mb);
  send_gradients(stage, mb);
}

void ScheduleBuilder::backward_weight(int stage, int mb) {
  compute(Op::kBackwardWeight, stage, mb);
}

void ScheduleBuilder::checkpointed_backward(int stage, int mb) {
  if (recomputes(mb)) recompute(stage, mb);
  backward(stage, mb);
}

void ScheduleBuilder::checkpointed_backward_input(int stage, int mb) {
  if (recomputes(mb)) recompute(stage, mb);
  backward_input(stage, mb);
}

void ScheduleBuilder::recompute(int stage, int mb) {
  compute(Op::kRecompute, stage, mb);
}

void ScheduleBuilder::optimizer_step(int stage, int step) {
  Action a;
  a.op = Op::kOptimizerStep;
  a.stage = stage;
  a.step = step;
  // Every replica of the stage steps (schedule.hpp).
  for (int k = 0; k < shape_.replicas_of(stage); ++k) emit(shape_.device_of(stage) + k, a);
}

ActionRef ScheduleBuilder::last_on_stage_device(int stage) const {
  if (shape_.replicas_of(stage) > 1) {
    throw std::logic_error("ScheduleBuilder: a replicated stage has no single device");
  }
  const int d = shape_.device_of(stage);
  return {d, static_cast<int32_t>(devices_[static_cast<size_t>(d)].size()) - 1};
}

void ScheduleBuilder::control(ActionRef before, ActionRef after) {
  control_.push_back({before, after});
}

namespace {

// Versions: OptimizerStep writes ++version of its stage; Forward reads the current version;
// Backward and Recompute read the forward's version (stashed) or the current one.
// The forward's version is kept by (stage, micro-batch) in a flat table (-1: no forward yet).
void assign_versions(std::vector<Action>& list, int num_stages, bool stashes) {
  std::vector<int32_t> current(static_cast<size_t>(num_stages), 0);
  int micro_batches = 1;
  for (const Action& a : list) micro_batches = std::max(micro_batches, a.micro_batch + 1);
  std::vector<int32_t> forward_version(
      static_cast<size_t>(num_stages) * static_cast<size_t>(micro_batches), -1);
  auto slot = [&](const Action& a) {
    return static_cast<size_t>(a.stage) * static_cast<size_t>(micro_batches) +
           static_cast<size_t>(a.micro_batch);
  };
  for (auto& a : list) {
    auto& cur = current[static_cast<size_t>(a.stage)];
    switch (a.op) {
      case Op::kForward:
        a.version = cur;
        forward_version[slot(a)] = cur;
        break;
      case Op::kBackward:
      case Op::kBackwardInput:
      case Op::kBackwardWeight:
      case Op::kRecompute: {
        const int32_t forward = forward_version[slot(a)];
        a.version = (stashes && forward >= 0) ? forward : cur;
        break;
      }
      case Op::kOptimizerStep:
        a.version = ++cur;
        break;
      default:
        break;
    }
  }
}

}  // namespace

Schedule ScheduleBuilder::finish(bool stashes_weights) {
  Schedule s;
  s.kind = kind_;
  s.shape = shape_;
  s.stashes_weights = stashes_weights;
  for (auto& list : devices_) assign_versions(list, shape_.num_stages, stashes_weights);
  if (!compute_order_only && !is_plain_chain(shape_))
    order_transfers_by_ideal_time(shape_, devices_, control_);
  ReplicatedLists lists = replicate_data_parallel(devices_, shape_);
  s.devices = std::move(lists.devices);
  const int per = shape_.devices_per_replica;
  for (int r = 0; r < shape_.replicas; ++r) {
    for (const auto& c : control_) {
      auto map = [&](ActionRef ref) {
        return ActionRef{
            r * per + ref.device,
            lists.index_map[static_cast<size_t>(ref.device)][static_cast<size_t>(ref.index)]};
      };
      s.control.push_back({map(c.before), map(c.after)});
    }
  }
  return s;
}

bool ScheduleBuilder::recomputes(int mb) const {
  switch (shape_.checkpoint) {
    case Checkpoint::kNone:
      return false;
    case Checkpoint::kAlways:
      return true;
    case Checkpoint::kExceptLast:
      return mb % M() != M() - 1;
  }
  return false;
}

}  // namespace pipetwin
