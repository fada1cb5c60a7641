#include "core/schedule/builder.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/schedule/data_parallel.hpp"

namespace pipetwin {

ScheduleBuilder::ScheduleBuilder(std::string kind, const PipelineShape& shape)
    : kind_(std::move(kind)), shape_(shape) {
  shape_.normalize("schedule " + kind_);
  devices_.resize(static_cast<size_t>(shape_.devices_per_replica));
  emitted_.resize(devices_.size());
}

bool ScheduleBuilder::is_last_stage(int stage) const {
  for (const auto& e : shape_.edges) {
    if (e.from == stage) return false;
  }
  return true;
}

void ScheduleBuilder::emit(int device, const Action& a) {
  devices_[static_cast<size_t>(device)].push_back(a);
  emitted_[static_cast<size_t>(device)].push_back(next_emitted_++);
}

void ScheduleBuilder::order_receives_by_sends() {
  using Key = std::tuple<int, int, int, int>;  // payload, sending stage, receiving stage, mb
  std::map<Key, int64_t> send_emitted;
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (size_t i = 0; i < devices_[d].size(); ++i) {
      const Action& a = devices_[d][i];
      if (a.op != Op::kSend) continue;
      send_emitted[{static_cast<int>(a.payload), a.stage, a.peer_stage, a.micro_batch}] =
          emitted_[d][i];
    }
  }
  for (size_t d = 0; d < devices_.size(); ++d) {
    auto& list = devices_[d];
    std::vector<size_t> slots;
    std::vector<std::pair<int64_t, size_t>> receives;  // (send's emission, old index)
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.op != Op::kRecv) continue;
      const auto it =
          send_emitted.find({static_cast<int>(a.payload), a.peer_stage, a.stage, a.micro_batch});
      slots.push_back(i);
      receives.emplace_back(it == send_emitted.end() ? -1 : it->second, i);
    }
    std::stable_sort(receives.begin(), receives.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    const std::vector<Action> old(list);
    std::map<int32_t, int32_t> moved;  // old index -> new index
    for (size_t k = 0; k < slots.size(); ++k) {
      list[slots[k]] = old[receives[k].second];
      moved[static_cast<int32_t>(receives[k].second)] = static_cast<int32_t>(slots[k]);
    }
    for (auto& c : control_) {
      for (ActionRef* ref : {&c.before, &c.after}) {
        if (ref->device != static_cast<int32_t>(d)) continue;
        if (auto it = moved.find(ref->index); it != moved.end()) ref->index = it->second;
      }
    }
  }
}

void ScheduleBuilder::compute(Op op, int stage, int mb) {
  Action a;
  a.op = op;
  a.stage = stage;
  a.micro_batch = mb;
  a.step = mb / M();
  emit(shape_.device_of(stage), a);
}

void ScheduleBuilder::recv_activations(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.to != stage || shape_.device_of(e.from) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage), Action{Op::kRecv, Payload::kActivation, stage, mb, e.from, -1,
                                         mb / M(), -1});
  }
}

void ScheduleBuilder::send_activations(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.from != stage || shape_.device_of(e.to) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage), Action{Op::kSend, Payload::kActivation, stage, mb, e.to, -1,
                                         mb / M(), -1});
  }
}

void ScheduleBuilder::recv_gradients(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.from != stage || shape_.device_of(e.to) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage), Action{Op::kRecv, Payload::kGradient, stage, mb, e.to, -1,
                                         mb / M(), -1});
  }
}

void ScheduleBuilder::send_gradients(int stage, int mb) {
  for (const auto& e : shape_.edges) {
    if (e.to != stage || shape_.device_of(e.from) == shape_.device_of(stage)) continue;
    emit(shape_.device_of(stage), Action{Op::kSend, Payload::kGradient, stage, mb, e.from, -1,
                                         mb / M(), -1});
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

void ScheduleBuilder::recompute(int stage, int mb) { compute(Op::kRecompute, stage, mb); }

void ScheduleBuilder::optimizer_step(int stage, int step) {
  Action a;
  a.op = Op::kOptimizerStep;
  a.stage = stage;
  a.step = step;
  emit(shape_.device_of(stage), a);
}

ActionRef ScheduleBuilder::last_on_stage_device(int stage) const {
  const int d = shape_.device_of(stage);
  return {d, static_cast<int32_t>(devices_[static_cast<size_t>(d)].size()) - 1};
}

void ScheduleBuilder::control(ActionRef before, ActionRef after) {
  control_.push_back({before, after});
}

namespace {

// Versions: OptimizerStep writes ++version of its stage; Forward reads the current version;
// Backward and Recompute read the forward's version (stashed) or the current one.
void assign_versions(std::vector<Action>& list, int num_stages, bool stashes) {
  std::vector<int32_t> current(static_cast<size_t>(num_stages), 0);
  std::map<std::pair<int, int>, int32_t> forward_version;  // (stage, mb) -> version
  for (auto& a : list) {
    auto& cur = current[static_cast<size_t>(a.stage)];
    switch (a.op) {
      case Op::kForward:
        a.version = cur;
        forward_version[{a.stage, a.micro_batch}] = cur;
        break;
      case Op::kBackward:
      case Op::kRecompute: {
        auto it = forward_version.find({a.stage, a.micro_batch});
        a.version = (stashes && it != forward_version.end()) ? it->second : cur;
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
  if (!shape_.one_stage_per_device()) order_receives_by_sends();
  for (auto& list : devices_) assign_versions(list, shape_.num_stages, stashes_weights);
  ReplicatedLists lists = replicate_data_parallel(devices_, shape_);
  s.devices = std::move(lists.devices);
  const int per = shape_.devices_per_replica;
  for (int r = 0; r < shape_.replicas; ++r) {
    for (const auto& c : control_) {
      auto map = [&](ActionRef ref) {
        return ActionRef{r * per + ref.device,
                         lists.index_map[static_cast<size_t>(ref.device)][static_cast<size_t>(ref.index)]};
      };
      s.control.push_back({map(c.before), map(c.after)});
    }
  }
  return s;
}

bool ScheduleBuilder::recomputes(int mb) const {
  switch (shape_.checkpoint) {
    case Checkpoint::kNone: return false;
    case Checkpoint::kAlways: return true;
    case Checkpoint::kExceptLast: return mb % M() != M() - 1;
  }
  return false;
}

}  // namespace pipetwin
