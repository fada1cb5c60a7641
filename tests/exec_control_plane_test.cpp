// The control plane (exec/platform/control_plane.hpp): the in-process fake with several ranks
// as threads — barrier, sums, broadcasts, gathers, agreement on failures, a rank that never
// comes — and the same algorithms over c10d, two ranks of a Gloo job on 127.0.0.1 as two threads
// of this process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/c10d_control_plane.hpp"
#include "exec/platform/distributed.hpp"
#include "exec/platform/inprocess_control_plane.hpp"
#include "exec/platform/launcher.hpp"

namespace pipetwin {
namespace {

using exec::ControlPlane;
using exec::InProcessControlPlane;

// Runs `body(rank's control plane)` on one thread per rank; rethrows the first failure.
void on_every_rank(const std::vector<ControlPlane*>& ranks,
                   const std::function<void(ControlPlane&)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failures(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*ranks[r]);
      } catch (...) {
        failures[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& f : failures) {
    if (f) std::rethrow_exception(f);
  }
}

std::vector<ControlPlane*> pointers(const std::vector<std::unique_ptr<InProcessControlPlane>>& w) {
  std::vector<ControlPlane*> out;
  for (const auto& c : w) out.push_back(c.get());
  return out;
}

// What every implementation must do, on every rank of a world of at least 2.
void exercise(ControlPlane& c) {
  const int r = c.rank(), n = c.world_size();
  c.barrier();
  // Sums, in rank order.
  const std::vector<double> sum = c.all_reduce_sum({1.0, static_cast<double>(r)});
  EXPECT_EQ(sum, (std::vector<double>{static_cast<double>(n), n * (n - 1) / 2.0}));
  // Rank 1's values everywhere.
  EXPECT_EQ(c.values_of(1, {10.0 * r, 3.0}), (std::vector<double>{10.0, 3.0}));
  // A tensor from rank 1.
  at::Tensor t = r == 1 ? at::arange(6, at::kFloat) : at::zeros({6}, at::kFloat);
  c.broadcast(t, 1);
  EXPECT_TRUE(t.equal(at::arange(6, at::kFloat)));
  // Bytes from rank 0, of a length only it knows.
  const std::string text = "a header of rank 0";
  const std::vector<uint8_t> got = c.broadcast_bytes(
      r == 0 ? std::vector<uint8_t>(text.begin(), text.end()) : std::vector<uint8_t>{}, 0);
  EXPECT_EQ(std::string(got.begin(), got.end()), text);
  // Every rank's bytes everywhere, and on rank 0 only.
  const std::vector<uint8_t> mine(static_cast<size_t>(r + 1), static_cast<uint8_t>(r));
  const auto all = c.all_gather(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    EXPECT_EQ(all[static_cast<size_t>(q)], std::vector<uint8_t>(q + 1, static_cast<uint8_t>(q)));
  const auto at0 = c.gather(mine, 0);
  EXPECT_EQ(at0.size(), r == 0 ? static_cast<size_t>(n) : 0u);
  if (r == 0) {
    EXPECT_EQ(at0, all);
  }
  // Agreement: nobody failed.
  EXPECT_NO_THROW(c.agree(nullptr, "step 1", false));
  // Rank 1 failed: it throws its own message, the others name it.
  std::exception_ptr failure;
  if (r == 1) failure = std::make_exception_ptr(std::runtime_error("disk full"));
  try {
    c.agree(failure, "checkpoint", false);
    ADD_FAILURE() << "rank " << r << ": agree did not throw";
  } catch (const RunFailure& e) {
    const std::string expected =
        r == 1 ? "rank 1: checkpoint failed: disk full"
               : fmt::format("rank {}: checkpoint failed on rank 1: disk full", r);
    EXPECT_EQ(std::string(e.what()), expected);
  }
  // As an input error.
  if (r == 0) failure = std::make_exception_ptr(InputError("bad file"));
  if (r == 1) failure = nullptr;
  EXPECT_THROW(c.agree(failure, "resume", true), InputError);
  c.barrier();
}

TEST(InProcessControlPlane, OneRankAloneReturnsAtOnce) {
  InProcessControlPlane c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_FALSE(c.multi_process());
  c.barrier();
  EXPECT_EQ(c.all_reduce_sum({1.5, 2.5}), (std::vector<double>{1.5, 2.5}));
  at::Tensor t = at::ones({3});
  c.broadcast(t, 0);
  EXPECT_TRUE(t.equal(at::ones({3})));
  EXPECT_EQ(c.all_gather({7}), (std::vector<std::vector<uint8_t>>{{7}}));
  EXPECT_EQ(c.gather({7}, 0), (std::vector<std::vector<uint8_t>>{{7}}));
  EXPECT_EQ(c.who(), "");
  EXPECT_NO_THROW(c.agree(nullptr, "x", false));
  // One rank alone: its own failure, an input error as it is, a run failure named.
  EXPECT_THROW(c.agree(std::make_exception_ptr(InputError("bad")), "resume", true), InputError);
  try {
    c.agree(std::make_exception_ptr(std::runtime_error("full")), "checkpoint", false);
    ADD_FAILURE();
  } catch (const RunFailure& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint failed: full");
  }
}

TEST(InProcessControlPlane, ThreeRanksAsThreads) {
  const auto world = InProcessControlPlane::make_world(3);
  on_every_rank(pointers(world), exercise);
}

TEST(InProcessControlPlane, ManyRoundsInFlightStayApart) {
  // Ranks run ahead of each other by up to one round: each round's parts stay its own.
  const auto world = InProcessControlPlane::make_world(4);
  on_every_rank(pointers(world), [](ControlPlane& c) {
    for (int i = 0; i < 200; ++i) {
      const std::vector<double> s = c.all_reduce_sum({static_cast<double>(i + c.rank())});
      ASSERT_EQ(s[0], 4.0 * i + 6.0);
    }
  });
}

TEST(InProcessControlPlane, ARankThatNeverComesTimesOut) {
  const auto world = InProcessControlPlane::make_world(2, std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(world[0]->barrier(), RunFailure);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(InProcessControlPlane, MakesAnInProcessTransport) {
  InProcessControlPlane c;
  exec::AbortSignal abort;
  exec::TransportSetup setup;
  setup.abort = &abort;
  setup.device_rank = {0, 0};
  const auto t = c.make_transport(setup);
  t->send(at::full({2}, 3.0), 0, 1, 5);
  EXPECT_TRUE(t->recv(0, 1, 5, at::empty({2})).equal(at::full({2}, 3.0)));
}

TEST(C10dControlPlane, TwoRanksOnLoopback) {
  if (!exec::built_with_gloo()) GTEST_SKIP() << "this build has no c10d Gloo";
  const int port = exec::free_local_port();
  std::vector<std::unique_ptr<exec::Distributed>> dist(2);
  std::vector<std::unique_ptr<exec::C10dControlPlane>> planes(2);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> failures(2);
  // The two ranks join the rendezvous at the same time (rank 0 serves the store).
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        exec::DistributedEnv env;
        env.rank = r;
        env.world_size = 2;
        env.master_port = port;
        dist[static_cast<size_t>(r)] =
            std::make_unique<exec::Distributed>(env, std::chrono::seconds(20));
        planes[static_cast<size_t>(r)] =
            std::make_unique<exec::C10dControlPlane>(*dist[static_cast<size_t>(r)]);
        exercise(*planes[static_cast<size_t>(r)]);
      } catch (...) {
        failures[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& f : failures) {
    if (f) std::rethrow_exception(f);
  }
  EXPECT_TRUE(planes[0]->multi_process());
  EXPECT_EQ(planes[1]->who(), "rank 1: ");
}

}  // namespace
}  // namespace pipetwin
