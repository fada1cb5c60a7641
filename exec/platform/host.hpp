// Host set-up shared by everything that computes on CPU threads: the executor's stage threads
// and the profiler.
//
// configure_compute_thread() gives the calling thread `threads` intra-op threads (ATen's OpenMP
// pool and OpenBLAS's own pool, which ATen's setting does not reach) and pins it to one core, so
// stages do not oversubscribe the cores. tune_malloc() keeps glibc from returning freed activation
// buffers to the kernel after every micro-batch: with the default dynamic mmap threshold, buffers
// of a few MB alternate between mmap and the heap and a layer's time becomes bimodal (page faults
// on every fresh mapping); we measured up to 2x on ViT-tiny layers before this setting. It also
// keeps every thread in glibc's main arena (a thread arena unmaps a heap that empties: 27x on
// one layer, host.cpp); call it before threads allocate (the CLI does at start).
//
// Thread-safety: configure_compute_thread() affects the calling thread only; tune_malloc() and
// start_autograd_workers() are process-wide and idempotent, call them before starting stage
// threads.
#pragma once

#include <c10/core/Device.h>

namespace pipetwin::exec {

void configure_compute_thread(int threads, int core, bool pin);

// Pins the calling thread to the core-th CPU this process may use (modulo their number).
void pin_to_core(int core);

// A transfer thread (send, receive, all-reduce) asks the kernel for a short time slice. Since
// Linux 6.12 (EEVDF custom slices) a waking thread with a shorter slice preempts the running one
// at once; with the default slice it waits until the compute thread on its core has run out its
// own (RUN_TO_PARITY): we measured sends of a few microseconds take 1-6 ms that way, holding the
// next stage idle. Older kernels ignore the request.
inline constexpr unsigned long kTransferSliceNs = 100'000;
void configure_transfer_thread();

// LibTorch's autograd engine runs the backward of GPU tensors on one worker thread per GPU, which
// it starts at the process's first backward, from whichever thread runs it, and a thread inherits
// its creator's CPU affinity: started by a pinned stage thread, the worker that runs every stage's
// backward on the GPU would share that stage's core with its forwards. (On an H200, ViT-B/16
// under 1F1B on two stream sets: stage 0's backward took 27 ms beside stage 1's forward, 8.5 ms
// alone, and that forward 15 ms against 10.) Starts the workers now with all the cores this process
// may use, whatever the calling thread's own affinity, which it keeps. Once per process; a backward
// of one element on `device`.
void start_autograd_workers(const c10::Device& device);

// Number of cores this process may run on (at least 1).
int usable_cores();

void tune_malloc();

}  // namespace pipetwin::exec
