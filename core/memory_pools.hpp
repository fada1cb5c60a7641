// Memory pools: which schedule devices draw on one physical memory, and how much they need of it.
//
// A cluster device usually has its memory to itself. Stream sets of one GPU (torchgpipe's layout
// of K partitions on one device; clusters whose device `shares_memory`) draw on the GPU's one
// memory, so a plan fits when the peaks of the schedule devices placed on that GPU add up to no
// more than it has: a one-GPU cluster gives its memory to the stages it hosts, not a K-th to
// each. The sum of the peaks is an upper bound on the peak of the sum (the devices need not peak
// together), the bound a plan can promise without timing.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/memory.hpp"

namespace pipetwin {

struct MemoryPool {
  int unit = 0;              // the cluster's memory index (Cluster::memory_of)
  std::vector<int> devices;  // schedule devices drawing on it
  double need_bytes = 0;     // their peaks added up
  double capacity_bytes = 0;
};

// One pool per physical memory the placed devices use, in order of first use. `peaks[d]` is
// schedule device d's peak; `placement[d]` its cluster device.
std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks);
// The same with each schedule device's peak read off the memory walk.
std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const MemoryWalk& walk);

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
