#include "core/memory.hpp"

#include <algorithm>

namespace pipetwin {

namespace {

size_t at(int i) {
  return static_cast<size_t>(i);
}

// The memory curve of one device: its compute actions in list order.
class DeviceWalk {
 public:
  DeviceWalk(const CompiledSchedule& cs, const std::vector<StageCost>& stages, int device,
             MemoryWalk& out)
      : cs_(cs),
        stages_(stages),
        device_(device),
        replica_(device / cs.shape().devices_per_replica),
        stashes_(cs.schedule().stashes_weights),
        versions_(cs.shape().iterations + 1),
        mem_(out.devices[at(device)]),
        after_(out.after_action) {
    on_device_ = cs.shape().stages_on(device % cs.shape().devices_per_replica);
    local_.assign(at(cs.shape().num_stages), -1);
    for (size_t i = 0; i < on_device_.size(); ++i) local_[at(on_device_[i])] = static_cast<int>(i);
    for (int s : on_device_) mem_.static_bytes += stages_[at(s)].static_bytes();
    // Per stage of the device: micro-batches in flight per weight version, versions referenced,
    // the current version, and whether the stage has been forwarded yet.
    refs_.assign(on_device_.size() * at(versions_), 0);
    referenced_.assign(on_device_.size(), 0);
    current_.assign(on_device_.size(), 0);
    seen_.assign(on_device_.size(), 0);
  }

  void run() {
    mem_.peak_bytes = mem_.static_bytes;
    const int first = cs_.id({device_, 0});
    const auto count = static_cast<int>(cs_.schedule().devices[at(device_)].size());
    for (int id = first; id < first + count; ++id) step(id);
  }

 private:
  // A forward (+1) or backward (-1) of a micro-batch that read `version` of stage `li`.
  void reference(int li, int version, int delta) {
    int& n = refs_[at(li) * at(versions_) + at(version)];
    if (n > 0) --referenced_[at(li)];
    n += delta;
    if (n > 0) ++referenced_[at(li)];
  }

  // Bytes of the extra weight versions alive now (stages in ascending order, as they are summed).
  double stash() {
    if (!stashes_) return 0.0;
    double bytes = 0;
    for (size_t li = 0; li < on_device_.size(); ++li) {
      if (!seen_[li]) continue;
      const bool has_current = refs_[li * at(versions_) + at(current_[li])] > 0;
      const int alive = referenced_[li] + (has_current ? 0 : 1);
      mem_.max_weight_versions = std::max(mem_.max_weight_versions, alive);
      bytes += (alive - 1) * stages_[at(on_device_[li])].param_bytes;
    }
    return bytes;
  }

  void observe(int id) {
    const double stash_bytes = stash();
    const double total = mem_.static_bytes + activations_ + stash_bytes;
    after_[at(id)] = total;
    if (total > mem_.peak_bytes) {
      mem_.peak_bytes = total;
      mem_.activation_bytes = activations_;
      mem_.stash_bytes = stash_bytes;
    }
  }

  void step(int id) {
    const Action& a = cs_.action(id);
    const StageCost* st = a.stage >= 0 ? &stages_[at(a.stage)] : nullptr;
    const int li = a.stage >= 0 ? local_[at(a.stage)] : -1;
    switch (a.op) {
      case Op::kForward:
        activations_ += st->input_bytes;
        if (cs_.recompute_of(replica_, a.stage, a.micro_batch) < 0) {
          activations_ += st->saved_bytes;
        }
        seen_[at(li)] = 1;
        reference(li, a.version, +1);
        mem_.max_in_flight = std::max(mem_.max_in_flight, ++in_flight_);
        break;
      case Op::kRecompute:
        activations_ += st->saved_bytes;
        break;
      case Op::kBackward: {
        activations_ -= st->input_bytes + st->saved_bytes;
        const int fwd = cs_.forward_of(replica_, a.stage, a.micro_batch);
        reference(li, cs_.action(fwd).version, -1);
        --in_flight_;
        break;
      }
      case Op::kOptimizerStep:
        current_[at(li)] = a.version;
        break;
      default:
        after_[at(id)] = mem_.static_bytes + activations_ + stash();
        return;
    }
    observe(id);
  }

  const CompiledSchedule& cs_;
  const std::vector<StageCost>& stages_;
  const int device_, replica_;
  const bool stashes_;
  const int versions_;  // weight versions 0..iterations
  DeviceMemory& mem_;
  std::vector<double>& after_;
  std::vector<int> on_device_, local_;  // the device's stages; stage -> index among them
  std::vector<int> refs_, referenced_, current_;
  std::vector<char> seen_;
  double activations_ = 0;
  int in_flight_ = 0;
};

}  // namespace

MemoryWalk walk_memory(const CompiledSchedule& cs, const std::vector<StageCost>& stages) {
  MemoryWalk out;
  out.devices.resize(static_cast<size_t>(cs.num_devices()));
  out.after_action.assign(static_cast<size_t>(cs.num_actions()), 0);
  for (int d = 0; d < cs.num_devices(); ++d) DeviceWalk(cs, stages, d, out).run();
  return out;
}

}  // namespace pipetwin
