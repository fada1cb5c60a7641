// Board: which actions of the schedule are done, for the executor's stream threads.
//
// The executor interprets the same CompiledSchedule as the simulator, with the same stream
// semantics: each stream thread takes its actions in order and starts one when every dependency
// is satisfied. A dependency is satisfied when its predecessor is done — or, for a gradient
// bucket's all-reduce, as soon as the backward it depends on has finished the bucket's lowest
// layer (the executor reports layer progress while it back-propagates).
//
// Each done action (and each layer a backward reports) leaves the Mark its lane's work reached
// there (exec/platform/device.hpp): an action's thread makes its lane wait for the marks of its
// dependencies (dependency_marks) instead of its host waiting for their work, which is how a GPU
// lane orders itself after the lanes it reads from.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/schedule/compiled.hpp"
#include "exec/platform/abort.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/waiters.hpp"

namespace pipetwin::exec {

class Board {
 public:
  Board(const CompiledSchedule& cs, AbortSignal& abort);

  // `end`: where the action's work ends on its lane (null: nothing to wait for).
  void mark_done(int id, std::shared_ptr<const Mark> end = nullptr);
  // The backward `id` has produced the gradients of every layer >= `layer`, by `at` on its lane.
  void mark_layer(int id, int layer, std::shared_ptr<const Mark> at = nullptr);
  // The marks of `id`'s dependencies (satisfied ones): the end of each finished predecessor, or
  // the latest layer mark of a backward still running.
  std::vector<std::shared_ptr<const Mark>> dependency_marks(int id);
  bool done(int id) const {
    return done_[static_cast<size_t>(id)].load(std::memory_order_acquire) != 0;
  }
  // Blocks until all dependencies of `id` are satisfied (or abort/timeout).
  void wait_dependencies(int id);

 private:
  bool satisfied(const Dependency& d) const;

  const CompiledSchedule& cs_;
  AbortSignal& abort_;
  std::unique_ptr<std::atomic<uint8_t>[]> done_;
  std::unique_ptr<std::atomic<int>[]> lowest_layer_done_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const Mark>> marks_;  // per action, under mu_
  Waiters waiters_;  // the stream threads blocked in wait_dependencies
};

}  // namespace pipetwin::exec
