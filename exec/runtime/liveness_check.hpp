// LivenessCheck: asserts, action by action, that a device's stage runtimes hold what the liveness
// walk says they hold (core/schedule/liveness.hpp).
//
// The walk is the one rule of what a device keeps alive — which micro-batches keep a graph and on
// which weight version, which versions they pin, which stashed versions exist — and the executor
// acts on it (exec/runtime/worker.cpp asks it what each forward keeps). With
// ExecOptions::check_liveness on, every compute action is followed by this check: a cursor walks
// the device's list to the action, and the stages' holdings (StageRuntime::holding) must equal its
// live set — micro-batches in flight with their graph and pinned versions, and the versions alive
// with their pins. Received tensors are left out: their arrival depends on timing, and a run holds
// a subset of what the walk says (core/schedule/liveness.hpp "Received tensors").
//
// A split backward (BackwardInput I, then BackwardWeight W) frees nothing at I in the walk: the
// micro-batch keeps its graph version and its pin until W, and so must the stage, whose weight
// gradient store then holds what W needs of the graph (exec/runtime/weight_grad_store.hpp). The
// check also asserts that exactly the micro-batches whose I ran and whose W has not await their
// weight half in the stage (StageRuntime::awaiting_weight).
//
// Thread-safety: not thread-safe; one per device, used by its compute thread, the one thread that
// touches the device's stage runtimes (exec/runtime/stage.hpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/schedule/liveness.hpp"
#include "exec/runtime/stage.hpp"

namespace pipetwin::exec {

class LivenessCheck {
 public:
  LivenessCheck(const Liveness& walk, int device) : walk_(walk), cursor_(walk, device) {}

  // After the device's action at list index `index` (`action`, named in the message): throws
  // std::logic_error naming the device, the action and the difference if `stages` (the device's
  // runtimes by stage) hold anything else than the walk says.
  void after(int index, const Action& action, const std::map<int, StageRuntime*>& stages);

 private:
  const Liveness& walk_;
  LivenessCursor cursor_;
};

// What the walk's live set says each stage holds, in StageHolding's terms.
std::map<int, StageHolding> expected_holdings(const LiveSet& live);

// "" when `expected` and `held` agree; else, per stage that differs, what only the walk has and
// what only the stage holds ("stage 1: the walk only: mb 3 (no graph, pins v1); the stage only:
// mb 3 (graph v1, pins v1)").
std::string holding_difference(const std::map<int, StageHolding>& expected,
                               const std::map<int, StageHolding>& held);

// Per stage, the micro-batches of `live` whose backward is split and whose BackwardInput is at list
// index `index` of the device or before it: they await their BackwardWeight.
std::map<int, std::vector<int>> expected_awaiting(const CompiledSchedule& cs, const LiveSet& live,
                                                  int device, int index);

// "" when they agree; else per stage that differs "stage 1: awaiting backward-weight: the walk
// mb 2, mb 3; the stage mb 2".
std::string awaiting_difference(const std::map<int, std::vector<int>>& expected,
                                const std::map<int, std::vector<int>>& held);

}  // namespace pipetwin::exec
