// Board: which actions of the schedule are done, for the executor's stream threads.
//
// The executor interprets the same CompiledSchedule as the simulator, with the same stream
// semantics: each stream thread takes its actions in order and starts one when every dependency
// is satisfied. A dependency is satisfied when its predecessor is done — or, for a gradient
// bucket's all-reduce, as soon as the backward it depends on has finished the bucket's lowest
// layer (the executor reports layer progress while it back-propagates).
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
#include "exec/platform/waiters.hpp"

namespace pipetwin::exec {

class Board {
 public:
  Board(const CompiledSchedule& cs, AbortSignal& abort);

  void mark_done(int id);
  // The backward `id` has produced the gradients of every layer >= `layer`.
  void mark_layer(int id, int layer);
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
  Waiters waiters_;  // the stream threads blocked in wait_dependencies
};

}  // namespace pipetwin::exec
