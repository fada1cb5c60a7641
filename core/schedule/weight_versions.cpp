#include "core/schedule/weight_versions.hpp"

#include <algorithm>

namespace pipetwin {

namespace {

// The references of one device's stages, walked along its compute stream.
class VersionRefs {
 public:
  explicit VersionRefs(const CompiledSchedule& cs)
      : cs_(cs),
        mbs_(static_cast<size_t>(cs.shape().micro_batches) *
             static_cast<size_t>(cs.shape().iterations)),
        graph_(static_cast<size_t>(cs.shape().num_stages) * mbs_, -1) {}

  // Updates the references for action `id`; true when it is a step that must keep the old version.
  bool apply(int id) {
    const Action& a = cs_.action(id);
    switch (a.op) {
      case Op::kForward:
        if (cs_.recompute_of(cs_.replica(id), a.stage, a.micro_batch) < 0)
          hold(a.stage, a.micro_batch, a.version);
        return false;
      case Op::kRecompute:
        drop(a.stage, a.micro_batch);
        hold(a.stage, a.micro_batch, a.version);
        return false;
      case Op::kBackward:
        drop(a.stage, a.micro_batch);
        return false;
      case Op::kOptimizerStep:
        return a.version > 0 && count(a.stage, a.version - 1) > 0;
      default:
        return false;
    }
  }

 private:
  int& graph(int stage, int mb) {
    return graph_[static_cast<size_t>(stage) * mbs_ + static_cast<size_t>(mb)];
  }
  int& count(int stage, int version) {
    const auto i = static_cast<size_t>(stage) * versions_per_stage() + static_cast<size_t>(version);
    if (i >= refs_.size()) refs_.resize(std::max(i + 1, 2 * refs_.size()), 0);
    return refs_[i];
  }
  size_t versions_per_stage() const {
    return static_cast<size_t>(cs_.shape().iterations) + 1;  // versions 0..iterations
  }
  void hold(int stage, int mb, int version) {
    graph(stage, mb) = version;
    ++count(stage, version);
  }
  void drop(int stage, int mb) {
    int& v = graph(stage, mb);
    if (v >= 0) --count(stage, v);
    v = -1;
  }

  const CompiledSchedule& cs_;
  size_t mbs_;
  std::vector<int> graph_;  // per (stage, micro-batch): the version its graph holds, -1: none
  std::vector<int> refs_;   // per (stage, version): micro-batches whose graph holds it
};

}  // namespace

std::vector<char> steps_writing_new_version(const CompiledSchedule& cs) {
  std::vector<char> out(static_cast<size_t>(cs.num_actions()), 0);
  for (int d = 0; d < cs.num_devices(); ++d) {
    VersionRefs refs(cs);
    const int compute = d * kStreamsPerDevice + static_cast<int>(StreamKind::kCompute);
    for (const int32_t id : cs.stream_actions(compute)) {
      if (refs.apply(id)) out[static_cast<size_t>(id)] = 1;
    }
  }
  return out;
}

}  // namespace pipetwin
