// CompiledSchedule: a validated schedule with its dependencies linked, in flat arrays.
//
// "Dependency tracking and validation live once" (docs/design.md): both the simulator and the
// executor interpret a CompiledSchedule. Compiling checks that the schedule is well formed — every
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
//   BackwardInput    as Backward (the input gradient is what it computes)
//   BackwardWeight   its BackwardInput(s, j)
//   Send(act s->c)   Forward(s, j);  Send(grad s->p): Backward(s, j) or BackwardInput(s, j)
//   AllReduce        its stage's Backward(s, j) or BackwardWeight(s, j) — partially: the bucket is
//                    ready once that has produced the gradients of layers >= bucket.first_layer
//   OptimizerStep    the step's all-reduces on this device
// plus the schedule's control dependencies. A Send and its Recv, and the all-reduces of one
// bucket on all the stage's copies (PipelineShape::gradient_copies), form rendezvous groups that
// start together.
//
// Compiling is on the hot path of sweeps (the sweep target: 500 simulated points a second, each
// point a schedule of up to 1.6 x 10^5 actions), so every lookup table is a flat array indexed by
// small integers — (replica, stage, micro-batch), (replica, stage edge, payload, micro-batch),
// (stage, step, bucket) — and the dependency lists are built in one counting sort, not in
// per-action vectors or hash maps keyed by packed tuples (a heap node per entry). Dependencies keep
// the order they are listed in above, so the engines see the same graph whichever way it was built.
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
  // `check_progress` false skips the deadlock check (a timeless run of the whole schedule) for a
  // caller that runs the discrete-event engine next: the engine stalls exactly when that run
  // would, and the caller then calls check_progress() for the error (studies/sweep/evaluate.cpp).
  CompiledSchedule(Schedule schedule, const std::string& origin, bool check_progress = true);

  // Throws InputError naming the stuck streams if the schedule cannot run to completion.
  void check_progress(const std::string& origin) const;

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
  // The id of Forward / Backward / Recompute of micro-batch `mb` on `stage` of `replica`; -1 when
  // the schedule has none (only Recompute may be missing in a compiled schedule). backward_of is
  // the Backward or, when the backward is split, its BackwardInput; weight_backward_of its
  // BackwardWeight (-1: not split); release_of the one of them that ends the micro-batch's
  // backward (the BackwardWeight if split, else the Backward).
  int forward_of(int replica, int stage, int mb) const { return fwd_[slot(replica, stage, mb)]; }
  int backward_of(int replica, int stage, int mb) const { return bwd_[slot(replica, stage, mb)]; }
  int weight_backward_of(int replica, int stage, int mb) const {
    return wgt_[slot(replica, stage, mb)];
  }
  int release_of(int replica, int stage, int mb) const {
    const int w = wgt_[slot(replica, stage, mb)];
    return w >= 0 ? w : bwd_[slot(replica, stage, mb)];
  }
  int recompute_of(int replica, int stage, int mb) const { return rec_[slot(replica, stage, mb)]; }

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
  struct Links;  // the lookup tables of one compilation (compiled.cpp)

  size_t slot(int replica, int stage, int mb) const {
    const auto& sh = schedule_.shape;
    return (static_cast<size_t>(replica) * static_cast<size_t>(sh.num_stages) +
            static_cast<size_t>(stage)) *
               static_cast<size_t>(sh.micro_batches) * static_cast<size_t>(sh.iterations) +
           static_cast<size_t>(mb);
  }
  [[noreturn]] void fail(int id, const std::string& origin, const std::string& what) const;
  void flatten();
  void index_actions(Links& l, const std::string& origin);
  void index_action(Links& l, int id, const std::string& origin);
  void check_fields(const Links& l, int id, const std::string& origin) const;
  void check_complete(const Links& l, const std::string& origin) const;
  void check_steps(const Links& l, int rep, int stage, const std::string& origin) const;
  void link_transfers(Links& l, const std::string& origin);
  void link_compute(Links& l, const std::string& origin) const;
  void link_allreduces(Links& l, const std::string& origin);
  void link_control(Links& l, const std::string& origin) const;
  void collect_deps(const Links& l);
  void check_versions(const std::string& origin) const;
  [[noreturn]] void throw_deadlock(const std::vector<int32_t>& head, int completed,
                                   const std::string& origin) const;

  Schedule schedule_;
  std::vector<Action> actions_;
  std::vector<ActionRef> refs_;
  std::vector<int32_t> device_base_;  // id of a device's first action
  std::vector<int32_t> stream_of_;
  std::vector<int32_t> stream_begin_, stream_actions_;
  std::vector<int32_t> dep_begin_;
  std::vector<Dependency> deps_;
  std::vector<int32_t> group_of_, group_begin_, group_members_;
  std::vector<int32_t> fwd_, bwd_, rec_, wgt_;  // by slot(replica, stage, mb); -1: none
};

}  // namespace pipetwin
