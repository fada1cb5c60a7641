#include "core/memory_pools.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pipetwin {

std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const std::vector<double>& peaks) {
  if (placement.size() < peaks.size())
    throw std::logic_error("memory_pools: fewer placements than devices");
  std::vector<MemoryPool> pools;
  for (size_t d = 0; d < peaks.size(); ++d) {
    const int unit = cluster.memory_of(placement[d]);
    auto it = std::find_if(pools.begin(), pools.end(),
                           [&](const MemoryPool& p) { return p.unit == unit; });
    if (it == pools.end()) {
      pools.push_back({unit, {}, 0, cluster.device.memory_bytes});
      it = std::prev(pools.end());
    }
    it->devices.push_back(static_cast<int>(d));
    it->need_bytes += peaks[d];
  }
  return pools;
}

std::vector<MemoryPool> memory_pools(const Cluster& cluster, const std::vector<int>& placement,
                                     const MemoryWalk& walk) {
  std::vector<double> peaks;
  for (const auto& dm : walk.devices) peaks.push_back(dm.peak_bytes);
  return memory_pools(cluster, placement, peaks);
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
