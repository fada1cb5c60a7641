// AbortSignal: how one failing thread or rank stops everyone else instead of leaving them hung.
//
// The first failure records its message and wakes every waiter; all blocking waits in the
// executor (dependencies, mailboxes, collectives) wait in short slices, check the signal and
// throw Aborted when it is raised, and give up with a timeout error after `timeout`.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

namespace pipetwin::exec {

class Aborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AbortSignal {
 public:
  explicit AbortSignal(std::chrono::milliseconds timeout = std::chrono::seconds(300))
      : timeout_(timeout) {}

  // Records the first failure; later ones are ignored.
  void raise(const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (raised_) return;
      raised_ = true;
      message_ = message;
    }
    flag_.store(true);
  }
  bool raised() const { return flag_.load(std::memory_order_relaxed); }
  std::string message() const {
    std::lock_guard<std::mutex> lock(mu_);
    return message_;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Throws Aborted if raised.
  void check() const {
    if (raised()) throw Aborted("stopped because another worker failed: " + message());
  }

  // Waits on `cv` under `lock` until `ready()`; checks the signal every slice; throws on abort or
  // after the timeout, naming `what` is waited for.
  template <typename Ready>
  void wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Ready ready,
            const std::string& what) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!ready()) {
      check();
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("timed out after " + std::to_string(timeout_.count() / 1000) +
                                 " s waiting for " + what);
      }
      cv.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

 private:
  std::chrono::milliseconds timeout_;
  std::atomic<bool> flag_{false};
  mutable std::mutex mu_;
  bool raised_ = false;
  std::string message_;
};

}  // namespace pipetwin::exec
