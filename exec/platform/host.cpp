#include "exec/platform/host.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

namespace pipetwin::exec {

namespace {

// OpenBLAS keeps its own thread pool; ATen's set_num_threads does not reach it.
void set_blas_threads(int n) {
  using Fn = void (*)(int);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn != nullptr) fn(n);
}

// The CPUs the process may use, read once at start-up, before any thread is pinned (a thread
// started by a pinned thread inherits its single CPU).
cpu_set_t initial_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) CPU_SET(0, &set);
  return set;
}

const cpu_set_t kAllowed = initial_affinity();

}  // namespace

int usable_cores() {
  const int n = CPU_COUNT(&kAllowed);
  return n > 0 ? n : 1;
}

void configure_compute_thread(int threads, int core, bool pin) {
  at::init_num_threads();
  at::set_num_threads(threads);
  set_blas_threads(threads);
  if (pin) pin_to_core(core);
}

void pin_to_core(int core) {
  // Pin to the core-th CPU this process may use (not CPU number `core`: under taskset or a
  // container's cpuset the allowed CPUs need not start at 0).
  int want = core % usable_cores();
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &kAllowed)) continue;
    if (want-- == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      return;
    }
  }
}

void start_autograd_workers(const c10::Device& device) {
  static std::once_flag once;
  std::call_once(once, [&device] {
    cpu_set_t mine;
    const bool got = pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine) == 0;
    pthread_setaffinity_np(pthread_self(), sizeof(kAllowed), &kAllowed);
    {
      const at::AutoGradMode grad(true);
      const at::Tensor x =
          at::ones({1}, at::TensorOptions().device(device)).set_requires_grad(true);
      (x * 2).sum().backward();
    }
    if (got) pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);
  });
}

void configure_transfer_thread() {
  // struct sched_attr of sched_setattr(2), which glibc 2.36 does not wrap.
  struct Attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  attr.size = sizeof(attr);
  attr.sched_policy = SCHED_OTHER;
  attr.sched_runtime = kTransferSliceNs;
  // Refused by kernels before 6.12 (no custom slices) or by a seccomp filter: nothing to do then.
  (void)syscall(SYS_sched_setattr, 0, &attr, 0u);
}

void tune_malloc() {
  // Fixed thresholds switch off glibc's dynamic mmap threshold (see the header). 32 MiB is the
  // largest mmap threshold glibc accepts on 64-bit (mallopt refuses more and changes nothing).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // One arena: a thread's own arena is a chain of mmapped heaps of at most 64 MiB, and one that
  // becomes wholly free is unmapped at once, whatever the trim threshold; a buffer that lands in
  // a fresh heap then costs page faults on every use. Seen here: bert:tiny's 15 MiB embedding
  // gradient took 47 ms instead of 1.7 ms per backward at micro-batch 2 (3,500 page faults per
  // backward), in the profiler's thread. The main arena grows by brk and keeps what it has.
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace pipetwin::exec
