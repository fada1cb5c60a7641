// The in-process transport (exec/platform/inprocess_transport.hpp): messages matched by tag
// whatever the order they are sent and received in, several threads at once, the sum
// all-reduce among a stage's replicas (in device order, every replica with the same result), and
// a receive that nobody sends to ending with the abort signal's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "exec/platform/abort.hpp"
#include "exec/platform/inprocess_transport.hpp"

namespace pipetwin {
namespace {

using exec::AbortSignal;
using exec::InProcessTransport;

TEST(InProcessTransport, MatchesMessagesByTagInAnyOrder) {
  AbortSignal abort;
  InProcessTransport t(abort);
  for (int64_t tag = 0; tag < 5; ++tag) t.send(at::full({3}, static_cast<double>(tag)), 0, 1, tag);
  for (int64_t tag = 4; tag >= 0; --tag) {
    const at::Tensor got = t.recv(0, 1, tag, at::empty({3}));
    EXPECT_TRUE(got.equal(at::full({3}, static_cast<double>(tag)))) << tag;
  }
}

TEST(InProcessTransport, ReceiverWaitsForItsSender) {
  AbortSignal abort;
  InProcessTransport t(abort);
  std::thread receiver([&] {
    const at::Tensor got = t.recv(2, 3, 77, at::empty({2, 2}));
    EXPECT_TRUE(got.equal(at::eye(2)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.send(at::eye(2), 2, 3, 77);
  receiver.join();
}

TEST(InProcessTransport, ManyThreadsManyMessages) {
  AbortSignal abort;
  InProcessTransport t(abort);
  constexpr int kPairs = 4, kMessages = 50;
  std::vector<std::thread> threads;
  for (int p = 0; p < kPairs; ++p) {
    threads.emplace_back([&, p] {
      for (int m = 0; m < kMessages; ++m)
        t.send(at::full({4}, p * 1000.0 + m), 2 * p, 2 * p + 1, m);
    });
    threads.emplace_back([&, p] {
      for (int m = kMessages - 1; m >= 0; --m) {
        const at::Tensor got = t.recv(2 * p, 2 * p + 1, m, at::empty({4}));
        EXPECT_EQ(got[0].item<double>(), p * 1000.0 + m);
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(InProcessTransport, AllReduceSumsAmongReplicas) {
  AbortSignal abort;
  InProcessTransport t(abort);
  const std::vector<int> replicas = {1, 4, 7};  // one stage's devices in three replicas
  std::vector<std::vector<at::Tensor>> grads(replicas.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < replicas.size(); ++i) {
    grads[i] = {at::full({2}, static_cast<double>(i + 1), at::kDouble),
                at::full({3}, 10.0 * static_cast<double>(i), at::kDouble)};
    threads.emplace_back([&, i] {
      for (int64_t step = 0; step < 3; ++step) {
        std::vector<at::Tensor> g = {grads[i][0].clone(), grads[i][1].clone()};
        t.allreduce_sum(g, replicas, replicas[i], 100 + step);
        EXPECT_TRUE(g[0].equal(at::full({2}, 6.0, at::kDouble)));
        EXPECT_TRUE(g[1].equal(at::full({3}, 30.0, at::kDouble)));
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(InProcessTransport, AllReducesOfTwoStagesDoNotMix) {
  AbortSignal abort;
  InProcessTransport t(abort);
  // Stage 0 on devices {0, 2}, stage 1 on {1, 3}, the same tag.
  std::vector<std::thread> threads;
  for (int d = 0; d < 4; ++d) {
    threads.emplace_back([&, d] {
      const std::vector<int> set = d % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
      std::vector<at::Tensor> g = {at::full({1}, static_cast<double>(d), at::kDouble)};
      t.allreduce_sum(g, set, d, 9);
      EXPECT_EQ(g[0].item<double>(), d % 2 == 0 ? 2.0 : 4.0);
    });
  }
  for (auto& th : threads) th.join();
}

TEST(InProcessTransport, AReceiveNobodySendsTimesOut) {
  AbortSignal abort(std::chrono::milliseconds(100));
  InProcessTransport t(abort);
  EXPECT_ANY_THROW(t.recv(0, 1, 3, at::empty({1})));
}

}  // namespace
}  // namespace pipetwin
