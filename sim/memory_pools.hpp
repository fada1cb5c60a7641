// Memory pools: which schedule devices draw on one physical memory, and how much they need of it.
//
// A cluster device usually has its memory to itself. Stream sets of one GPU (torchgpipe's layout
// of K partitions on one device; clusters whose device `shares_memory`) draw on the GPU's one
// memory, so a plan fits when the peaks of the schedule devices placed on that GPU add up to no
// more than it has: a one-GPU cluster gives its memory to the stages it hosts, not a K-th to
// each. The sum of the peaks is an upper bound on the peak of the sum (the devices need not peak
// together), the bound a plan can promise without timing.
//
// On a GPU a memory also holds the framework's own memory (core/framework_memory.hpp): the process
// on it needs process(tensors) = tensors / (1 - fragmentation) + workspaces + CUDA context, the
// fixed part once per memory (one process per GPU). The device kind's entry in
// hardware/frameworks.json gives the figures; CPU devices and unlisted kinds add nothing.
//
// Thread-safety: pure functions (the framework catalog is loaded once, under a mutex).
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework_memory.hpp"
#include "core/memory.hpp"

namespace pipetwin {

struct MemoryPool {
  int unit = 0;                // the cluster's memory index (Cluster::memory_of)
  std::vector<int> devices;    // schedule devices drawing on it
  double tensor_bytes = 0;     // their peaks added up (the walk's tensors: allocated bytes)
  double framework_bytes = 0;  // the framework's memory on top (0 without one)
  double need_bytes = 0;       // tensor_bytes + framework_bytes
  double capacity_bytes = 0;
  std::string framework;  // "pytorch-2.x-cuda12 on h100-sxm"; empty without one
};

// One pool per physical memory the placed devices use, in order of first use. `peaks[d]` is
// schedule device d's peak (tensors); `placement[d]` its cluster device; `fw` the framework on the
// cluster's device (null: none).
std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks, const FrameworkMemory* fw);
// The same with the framework of the cluster's device kind (framework_memory_of).
std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks);
// The same with each schedule device's peak read off the memory walk.
std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const MemoryWalk& walk);

// Each schedule device's part of its memory's framework bytes (framework_memory_of): the
// fragmentation reserve of its own peak, peaks[d] x f / (1 - f), plus an equal share of the
// context and workspaces; they add up to each pool's framework_bytes. All 0 on CPU devices.
std::vector<double> framework_bytes_by_device(const Cluster& cluster,
                                              const std::vector<int>& placement,
                                              const std::vector<double>& peaks);

// The tensor bytes one memory of the cluster holds once the framework's memory is counted
// (FrameworkMemory::allocatable_bytes of the device's memory); the device's memory without one.
double tensor_capacity_bytes(const Cluster& cluster);

// "82.10 GiB" or, with framework memory, "82.10 GiB (70.00 GiB of tensors + 12.10 GiB of
// framework memory, pytorch-2.x-cuda12 on h100-sxm: allocator reserve, workspaces, CUDA context;
// hardware/frameworks.json)".
std::string describe_need(const MemoryPool& pool);

// The pool with the most need over its capacity (the most loaded one when all fit); null when
// there is none.
const MemoryPool* tightest_pool(const std::vector<MemoryPool>& pools);

// "device 1 (h100-sxm #1)" or, for a shared memory, "devices 0, 1 (h100-sxm #0, #1)".
std::string describe_pool(const MemoryPool& pool, const Cluster& cluster,
                          const std::vector<int>& placement);

// How many physical units (GPUs, CPU cores) the placed devices occupy: what a price per GPU-hour
// is charged for.
int physical_units(const Cluster& cluster, const std::vector<int>& placement);

}  // namespace pipetwin
