// Waiters (exec/platform/waiters.hpp): a change wakes exactly the threads it lets go; abort and
// timeout leave no waiter behind.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "exec/platform/abort.hpp"
#include "exec/platform/waiters.hpp"

namespace pipetwin::exec {
namespace {

using namespace std::chrono_literals;

// Two threads wait for two different flags under one mutex.
struct TwoFlags {
  std::mutex mu;
  Waiters waiters;
  AbortSignal abort{std::chrono::seconds(30)};
  bool a = false, b = false;
  std::atomic<int> done_a{0}, done_b{0};

  std::thread waiter(bool* flag, std::atomic<int>* done) {
    return std::thread([this, flag, done] {
      std::unique_lock<std::mutex> lock(mu);
      waiters.wait(
          abort, lock, [flag] { return *flag; }, "a flag");
      done->store(1);
    });
  }
  // Sets `flag` and returns how many waiters the change lets go.
  size_t set(bool* flag) {
    Waiters::Woken woken;
    {
      std::lock_guard<std::mutex> lock(mu);
      *flag = true;
      woken = waiters.collect();
    }
    Waiters::notify(woken);
    return woken.size();
  }
  size_t blocked() {
    std::lock_guard<std::mutex> lock(mu);
    return waiters.size();
  }
};

void wait_until(const std::function<bool()>& f) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!f() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(f());
}

TEST(Waiters, AChangeWakesOnlyTheWaiterItLetsGo) {
  TwoFlags s;
  std::thread ta = s.waiter(&s.a, &s.done_a), tb = s.waiter(&s.b, &s.done_b);
  wait_until([&] { return s.blocked() == 2; });
  EXPECT_EQ(s.set(&s.a), 1u);  // a's waiter only (b's condition does not hold)
  wait_until([&] { return s.done_a.load() == 1; });
  std::this_thread::sleep_for(30ms);  // longer than AbortSignal's 20 ms wait slice
  EXPECT_EQ(s.done_b.load(), 0) << "b's waiter returned while b was false";
  EXPECT_EQ(s.set(&s.b), 1u);
  wait_until([&] { return s.done_b.load() == 1; });
  ta.join();
  tb.join();
  EXPECT_EQ(s.blocked(), 0u) << "a waiter stayed registered after it returned";
}

TEST(Waiters, AReadyConditionDoesNotBlock) {
  std::mutex mu;
  Waiters w;
  AbortSignal abort;
  std::unique_lock<std::mutex> lock(mu);
  w.wait(
      abort, lock, [] { return true; }, "nothing");
  EXPECT_TRUE(w.collect().empty());
}

TEST(Waiters, AbortEndsTheWaitAndUnregisters) {
  std::mutex mu;
  Waiters w;
  AbortSignal abort(std::chrono::seconds(30));
  bool flag = false;
  std::atomic<bool> aborted{false};
  std::thread t([&] {
    std::unique_lock<std::mutex> lock(mu);
    try {
      w.wait(
          abort, lock, [&] { return flag; }, "a flag");
    } catch (const Aborted&) {
      aborted.store(true);
    }
  });
  wait_until([&] {
    std::lock_guard<std::mutex> lock(mu);
    return w.size() == 1;
  });
  abort.raise("stage 1 failed");
  t.join();
  EXPECT_TRUE(aborted.load());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(w.size(), 0u);
}

TEST(Waiters, TimeoutNamesWhatWasAwaited) {
  std::mutex mu;
  Waiters w;
  AbortSignal abort(std::chrono::milliseconds(50));
  std::unique_lock<std::mutex> lock(mu);
  try {
    w.wait(
        abort, lock, [] { return false; }, "a tensor from device 1 (tag 7)");
    FAIL() << "no timeout";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for a tensor from device 1 (tag 7)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace pipetwin::exec
