#include "sim/memory_pools.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pipetwin {

std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks, const FrameworkMemory* fw) {
  if (placement.size() < peaks.size())
    throw std::logic_error("memory_pools: fewer placements than devices");
  std::vector<MemoryPool> pools;
  for (size_t d = 0; d < peaks.size(); ++d) {
    const int unit = cluster.memory_of(placement[d]);
    auto it = std::find_if(pools.begin(), pools.end(),
                           [&](const MemoryPool& p) { return p.unit == unit; });
    if (it == pools.end()) {
      MemoryPool p;
      p.unit = unit;
      p.capacity_bytes = cluster.device.memory_bytes;
      pools.push_back(std::move(p));
      it = std::prev(pools.end());
    }
    it->devices.push_back(static_cast<int>(d));
    it->tensor_bytes += peaks[d];
  }
  for (MemoryPool& p : pools) {
    p.need_bytes = fw ? fw->process_bytes(p.tensor_bytes) : p.tensor_bytes;
    p.framework_bytes = p.need_bytes - p.tensor_bytes;
    if (fw) p.framework = fw->stack.name + " on " + fw->device;
  }
  return pools;
}

std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks) {
  return memory_pools(cluster, placement, peaks, framework_memory_of(cluster.device));
}

std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const MemoryWalk& walk) {
  std::vector<double> peaks;
  for (const auto& dm : walk.devices) peaks.push_back(dm.peak_bytes);
  return memory_pools(cluster, placement, peaks);
}

std::vector<double> framework_bytes_by_device(const Cluster& cluster,
                                              const std::vector<int>& placement,
                                              const std::vector<double>& peaks) {
  std::vector<double> out(peaks.size(), 0.0);
  const FrameworkMemory* fw = framework_memory_of(cluster.device);
  if (fw == nullptr) return out;
  const double f = fw->stack.fragmentation.value;
  for (const MemoryPool& p : memory_pools(cluster, placement, peaks, fw)) {
    const double fixed = fw->fixed_bytes() / static_cast<double>(p.devices.size());
    for (int d : p.devices) {
      const auto i = static_cast<size_t>(d);
      out[i] = peaks[i] * f / (1 - f) + fixed;
    }
  }
  return out;
}

double tensor_capacity_bytes(const Cluster& cluster) {
  const FrameworkMemory* fw = framework_memory_of(cluster.device);
  const double memory = cluster.device.memory_bytes;
  return fw ? fw->allocatable_bytes(memory) : memory;
}

std::string describe_need(const MemoryPool& pool) {
  constexpr double kGiBytes = 1024.0 * 1024 * 1024;
  if (pool.framework_bytes <= 0) return fmt::format("{:.2f} GiB", pool.need_bytes / kGiBytes);
  return fmt::format(
      "{:.2f} GiB ({:.2f} GiB of tensors + {:.2f} GiB of framework memory, {}: allocator "
      "reserve, workspaces, CUDA context; hardware/frameworks.json)",
      pool.need_bytes / kGiBytes, pool.tensor_bytes / kGiBytes, pool.framework_bytes / kGiBytes,
      pool.framework);
}

const MemoryPool* tightest_pool(const std::vector<MemoryPool>& pools) {
  const MemoryPool* worst = nullptr;
  for (const MemoryPool& p : pools) {
    if (!worst || p.need_bytes - p.capacity_bytes > worst->need_bytes - worst->capacity_bytes)
      worst = &p;
  }
  return worst;
}

std::string describe_pool(const MemoryPool& pool, const Cluster& cluster,
                          const std::vector<int>& placement) {
  std::vector<std::string> where;
  for (int d : pool.devices) where.push_back(fmt::format("#{}", placement[static_cast<size_t>(d)]));
  if (pool.devices.size() == 1) {
    return fmt::format("device {} ({} {})", pool.devices[0], cluster.device.name, where[0]);
  }
  return fmt::format("devices {} ({} {}, one memory)", fmt::join(pool.devices, ", "),
                     cluster.device.name, fmt::join(where, ", "));
}

int physical_units(const Cluster& cluster, const std::vector<int>& placement) {
  std::set<int> units;
  for (int c : placement) units.insert(cluster.unit_of(c));
  return static_cast<int>(units.size());
}

}  // namespace pipetwin
