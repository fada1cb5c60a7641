// exec/platform/host.hpp: starting autograd's per-GPU workers leaves the caller's pin alone.
#include "exec/platform/host.hpp"

#include <pthread.h>
#include <sched.h>

#include <thread>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace pipetwin {
namespace {

// The workers are started with every core this process may use, from a thread that may be
// pinned (a stage thread): the calling thread is unpinned only for the start and keeps its own
// pin after, and autograd still works (on the CPU, which has no per-device workers, the call only
// runs its one-element backward; the GPU side runs in the CUDA session, scripts/gpu/session.sh).
TEST(Host, StartingAutogradWorkersKeepsTheCallersPin) {
  std::thread t([] {
    exec::pin_to_core(0);
    cpu_set_t before, after;
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
    exec::start_autograd_workers(c10::Device(c10::kCPU));
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
    EXPECT_EQ(CPU_COUNT(&after), 1);
    const at::Tensor x = at::ones({2}).set_requires_grad(true);
    (x * 3).sum().backward();
    EXPECT_TRUE(at::equal(x.grad(), at::full({2}, 3.0)));
  });
  t.join();
}

}  // namespace
}  // namespace pipetwin
