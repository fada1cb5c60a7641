// CompiledSchedule: a validated schedule with its dependencies linked, in flat arrays.
//
// "Dependency tracking and validation live once" (DESIGN): both the simulator and the executor
// interpret a CompiledSchedule. Compiling checks that the schedule is well formed — every
// micro-batch forwarded and backwarded exactly once per stage on the stage's device, recompute
// between them, every Send matched by one Recv, one optimizer step per stage and step after that
// step's backwards, the declared weight versions equal to what the order implies — and that it
// can run to completion (no deadlock under the stream semantics of action.hpp). A violation is an
// InputError naming the origin, device, position and action.
//
// Dependencies of an action (besides its stream's order):
//   Forward(s, j)    Forward(p, j) of every in-edge p on the same device, else Recv(act p->s, j)
//   Recompute(s, j)  Forward(s, j)
//   Backward(s, j)   Forward(s, j), Recompute(s, j) if any, Backward(c, j) of every out-edge c
//                    on the same device, else Recv(grad c->s, j)
//   Send(act s->c)   Forward(s, j);  Send(grad s->p): Backward(s, j)
//   AllReduce        its stage's Backward(s, j) — partially: the bucket is ready once backward
//                    has produced the gradients of layers >= bucket.first_layer
//   OptimizerStep    the step's all-reduces on this device
// plus the schedule's control dependencies. A Send and its Recv, and the all-reduces of one
// bucket on all replicas, form rendezvous groups that start together.
//
// Thread-safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

struct Dependency {
  int32_t pred = 0;
  // -1: satisfied when `pred` ends. >= 0: `pred` is a Backward; satisfied once it has produced
  // the gradients of its stage's layers >= this model layer index.
  int32_t from_layer = -1;
};

class CompiledSchedule {
 public:
  // Compiles and validates; `origin` names the source in errors ("schedule gpipe", a file path).
  CompiledSchedule(Schedule schedule, const std::string& origin);

  const Schedule& schedule() const { return schedule_; }
  const PipelineShape& shape() const { return schedule_.shape; }
  int num_actions() const { return static_cast<int>(actions_.size()); }
  int num_devices() const { return schedule_.num_devices(); }
  int num_streams() const { return num_devices() * kStreamsPerDevice; }

  const Action& action(int id) const { return actions_[static_cast<size_t>(id)]; }
  ActionRef ref(int id) const { return refs_[static_cast<size_t>(id)]; }
  int device(int id) const { return refs_[static_cast<size_t>(id)].device; }
  int replica(int id) const { return device(id) / shape().devices_per_replica; }
  int id(ActionRef r) const;
  int stream(int id) const { return stream_of_[static_cast<size_t>(id)]; }

  std::span<const int32_t> stream_actions(int stream) const {
    return span_of(stream_actions_, stream_begin_, stream);
  }
  std::span<const Dependency> deps(int id) const {
    const auto b = static_cast<size_t>(dep_begin_[static_cast<size_t>(id)]);
    const auto e = static_cast<size_t>(dep_begin_[static_cast<size_t>(id) + 1]);
    return {deps_.data() + b, e - b};
  }
  // Rendezvous group of an action (-1: none) and its members.
  int group(int id) const { return group_of_[static_cast<size_t>(id)]; }
  int num_groups() const { return static_cast<int>(group_begin_.size()) - 1; }
  std::span<const int32_t> group_members(int g) const {
    return span_of(group_members_, group_begin_, g);
  }

 private:
  static std::span<const int32_t> span_of(const std::vector<int32_t>& data,
                                          const std::vector<int32_t>& begin, int i) {
    const auto b = static_cast<size_t>(begin[static_cast<size_t>(i)]);
    const auto e = static_cast<size_t>(begin[static_cast<size_t>(i) + 1]);
    return {data.data() + b, e - b};
  }
  void flatten();
  void link(const std::string& origin);
  void check_versions(const std::string& origin) const;
  void check_progress(const std::string& origin) const;

  Schedule schedule_;
  std::vector<Action> actions_;
  std::vector<ActionRef> refs_;
  std::vector<int32_t> device_base_;  // id of a device's first action
  std::vector<int32_t> stream_of_;
  std::vector<int32_t> stream_begin_, stream_actions_;
  std::vector<int32_t> dep_begin_;
  std::vector<Dependency> deps_;
  std::vector<int32_t> group_of_, group_begin_, group_members_;
};

}  // namespace pipetwin
