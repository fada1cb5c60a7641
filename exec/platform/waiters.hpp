// Waiters: threads blocked on state that one mutex guards, each woken only when what it waits for
// holds.
//
// One condition variable with notify_all wakes every blocked stream thread at every change; on a
// host whose cores all compute, each woken thread that finds nothing to do takes a core from one
// that had work, and under Linux's EEVDF scheduler the thread it displaced may then wait out a
// whole time slice of the compute thread before it runs again. We measured the in-process send
// (a map insert) take 0.5-6 ms that way on 2 cores, 1F1B on bert:tiny, with the next stage idle
// meanwhile. Here each waiter has its own condition variable and its own condition: a change
// wakes exactly the threads it lets go, after the mutex is released.
//
// Thread-safety: wait(), collect() and size() are called with the owner's mutex held (the lock
// passed to wait()); notify() without it, on what collect() returned.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/platform/abort.hpp"

namespace pipetwin::exec {

class Waiters {
 public:
  struct Entry {
    std::function<bool()> ready;
    std::condition_variable cv;
  };
  using Woken = std::vector<std::shared_ptr<Entry>>;

  // Blocks under `lock` until `ready()` (checked under the lock), honouring `abort` as
  // AbortSignal::wait does.
  template <typename Ready>
  void wait(const AbortSignal& abort, std::unique_lock<std::mutex>& lock, Ready ready,
            const std::string& what) {
    if (ready()) return;
    auto e = std::make_shared<Entry>();
    e->ready = ready;
    entries_.push_back(e);
    try {
      abort.wait(e->cv, lock, ready, what);
    } catch (...) {
      remove(e);
      throw;
    }
    remove(e);
  }

  // The waiters whose condition now holds (call with the mutex held, after the change).
  Woken collect() const {
    Woken out;
    for (const auto& e : entries_) {
      if (e->ready()) out.push_back(e);
    }
    return out;
  }

  // The number of threads blocked in wait() (call with the mutex held).
  size_t size() const { return entries_.size(); }

  // Wakes them (call after releasing the mutex: a woken thread then finds it free).
  static void notify(const Woken& woken) {
    for (const auto& e : woken) e->cv.notify_one();
  }

 private:
  void remove(const std::shared_ptr<Entry>& e) {
    entries_.erase(std::find(entries_.begin(), entries_.end(), e));
  }

  std::vector<std::shared_ptr<Entry>> entries_;
};

}  // namespace pipetwin::exec
