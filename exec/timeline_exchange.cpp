#include "exec/timeline_exchange.hpp"

#include <algorithm>

namespace pipetwin::exec {

Timeline gather_timeline(Distributed& dist, const Timeline& local) {
  const std::string text = timeline_to_chrome_trace(local).dump();
  dist.store().set("pipetwin/timeline/" + std::to_string(dist.rank()),
                   std::vector<uint8_t>(text.begin(), text.end()));
  if (dist.rank() != 0) return local;
  Timeline merged = local;
  for (int r = 1; r < dist.world_size(); ++r) {
    const std::string key = "pipetwin/timeline/" + std::to_string(r);
    dist.store().wait({key}, dist.timeout());
    const auto bytes = dist.store().get(key);
    const Json doc = Json::parse(std::string(bytes.begin(), bytes.end()));
    const Timeline part = timeline_from_chrome_trace(JsonView(doc, "rank " + std::to_string(r)));
    for (const auto& e : part.events) merged.events.push_back(e);
    for (size_t d = 0; d < part.memory.size() && d < merged.memory.size(); ++d) {
      if (!part.memory[d].empty()) merged.memory[d] = part.memory[d];
    }
    for (size_t d = 0; d < part.peak_memory_bytes.size() && d < merged.peak_memory_bytes.size();
         ++d) {
      merged.peak_memory_bytes[d] =
          std::max(merged.peak_memory_bytes[d], part.peak_memory_bytes[d]);
    }
  }
  return merged;
}

}  // namespace pipetwin::exec
