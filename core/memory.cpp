#include "core/memory.hpp"

#include <map>
#include <unordered_set>

namespace pipetwin {

namespace {

uint64_t key(int stage, int mb) {
  return (static_cast<uint64_t>(stage) << 32) | static_cast<uint32_t>(mb);
}

}  // namespace

MemoryWalk walk_memory(const CompiledSchedule& cs, const std::vector<StageCost>& stages) {
  const auto& sh = cs.shape();
  MemoryWalk out;
  out.devices.resize(static_cast<size_t>(cs.num_devices()));
  out.after_action.assign(static_cast<size_t>(cs.num_actions()), 0);
  const bool stashes = cs.schedule().stashes_weights;
  for (int d = 0; d < cs.num_devices(); ++d) {
    const int local = d % sh.devices_per_replica;
    DeviceMemory& mem = out.devices[static_cast<size_t>(d)];
    const auto on_device = sh.stages_on(local);
    for (int s : on_device) mem.static_bytes += stages[static_cast<size_t>(s)].static_bytes();
    const int first = cs.id({d, 0});
    const auto count = static_cast<int>(cs.schedule().devices[static_cast<size_t>(d)].size());
    std::unordered_set<uint64_t> recomputed;
    for (int i = 0; i < count; ++i) {
      const Action& a = cs.action(first + i);
      if (a.op == Op::kRecompute) recomputed.insert(key(a.stage, a.micro_batch));
    }
    // Per stage: references to each weight version by micro-batches in flight, and the current.
    std::map<int, std::map<int, int>> refs;
    std::map<int, int> current;
    std::map<uint64_t, int> forward_version;
    double activations = 0;
    int in_flight = 0;
    auto stash = [&]() {
      if (!stashes) return 0.0;
      double bytes = 0;
      for (const auto& [stage, versions] : refs) {
        int alive = 0;
        bool has_current = false;
        for (const auto& [v, n] : versions) {
          if (n > 0) {
            ++alive;
            has_current = has_current || v == current[stage];
          }
        }
        if (!has_current) ++alive;
        mem.max_weight_versions = std::max(mem.max_weight_versions, alive);
        bytes += (alive - 1) * stages[static_cast<size_t>(stage)].param_bytes;
      }
      return bytes;
    };
    auto observe = [&](int id) {
      const double stash_bytes = stash();
      const double total = mem.static_bytes + activations + stash_bytes;
      out.after_action[static_cast<size_t>(id)] = total;
      if (total > mem.peak_bytes) {
        mem.peak_bytes = total;
        mem.activation_bytes = activations;
        mem.stash_bytes = stash_bytes;
      }
    };
    mem.peak_bytes = mem.static_bytes;
    for (int i = 0; i < count; ++i) {
      const int id = first + i;
      const Action& a = cs.action(id);
      const StageCost* st = a.stage >= 0 ? &stages[static_cast<size_t>(a.stage)] : nullptr;
      switch (a.op) {
        case Op::kForward:
          activations += st->input_bytes;
          if (!recomputed.count(key(a.stage, a.micro_batch))) activations += st->saved_bytes;
          forward_version[key(a.stage, a.micro_batch)] = a.version;
          ++refs[a.stage][a.version];
          mem.max_in_flight = std::max(mem.max_in_flight, ++in_flight);
          break;
        case Op::kRecompute:
          activations += st->saved_bytes;
          break;
        case Op::kBackward:
          activations -= st->input_bytes + st->saved_bytes;
          --refs[a.stage][forward_version[key(a.stage, a.micro_batch)]];
          --in_flight;
          break;
        case Op::kOptimizerStep:
          current[a.stage] = a.version;
          break;
        default:
          out.after_action[static_cast<size_t>(id)] = mem.static_bytes + activations + stash();
          continue;
      }
      observe(id);
    }
  }
  return out;
}

}  // namespace pipetwin
