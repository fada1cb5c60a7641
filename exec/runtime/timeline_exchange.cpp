#include "exec/runtime/timeline_exchange.hpp"

#include <algorithm>

namespace pipetwin::exec {

Timeline gather_timeline(ControlPlane& control, const Timeline& local) {
  if (control.world_size() == 1) return local;
  const std::string text = timeline_to_chrome_trace(local).dump();
  const auto parts = control.gather(std::vector<uint8_t>(text.begin(), text.end()), 0);
  if (control.rank() != 0) return local;
  Timeline merged = local;
  for (int r = 1; r < control.world_size(); ++r) {
    const auto& bytes = parts[static_cast<size_t>(r)];
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
