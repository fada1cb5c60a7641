#include "core/schedule/weight_versions.hpp"

namespace pipetwin {

namespace {

// The references of every (replica, stage), walked along the compute streams: a stage's actions
// all run on one device of its replica, in that stream's order.
class VersionRefs {
 public:
  explicit VersionRefs(const CompiledSchedule& cs)
      : cs_(cs),
        mbs_(static_cast<size_t>(cs.shape().micro_batches) *
             static_cast<size_t>(cs.shape().iterations)),
        versions_(static_cast<size_t>(cs.shape().iterations) + 1),  // versions 0..iterations
        graph_(stages() * mbs_, -1),
        refs_(stages() * versions_, 0) {}

  // Updates the references for action `id`; true when it is a step that must keep the old version.
  bool apply(int id) {
    const Action& a = cs_.action(id);
    const size_t st =
        static_cast<size_t>(cs_.replica(id)) * static_cast<size_t>(cs_.shape().num_stages) +
        static_cast<size_t>(a.stage);
    switch (a.op) {
      case Op::kForward:
        if (cs_.recompute_of(cs_.replica(id), a.stage, a.micro_batch) < 0)
          hold(st, a.micro_batch, a.version);
        return false;
      case Op::kRecompute:
        drop(st, a.micro_batch);
        hold(st, a.micro_batch, a.version);
        return false;
      case Op::kBackward:
        drop(st, a.micro_batch);
        return false;
      case Op::kOptimizerStep:
        return a.version > 0 && count(st, a.version - 1) > 0;
      default:
        return false;
    }
  }

 private:
  size_t stages() const {
    return static_cast<size_t>(cs_.shape().replicas) * static_cast<size_t>(cs_.shape().num_stages);
  }
  int& graph(size_t st, int mb) { return graph_[st * mbs_ + static_cast<size_t>(mb)]; }
  int& count(size_t st, int version) {
    return refs_[st * versions_ + static_cast<size_t>(version)];
  }
  void hold(size_t st, int mb, int version) {
    graph(st, mb) = version;
    ++count(st, version);
  }
  void drop(size_t st, int mb) {
    int& v = graph(st, mb);
    if (v >= 0) --count(st, v);
    v = -1;
  }

  const CompiledSchedule& cs_;
  size_t mbs_, versions_;
  std::vector<int> graph_;  // per (replica stage, micro-batch): version its graph holds, -1: none
  std::vector<int> refs_;   // per (replica stage, version): micro-batches whose graph holds it
};

}  // namespace

std::vector<char> steps_writing_new_version(const CompiledSchedule& cs) {
  std::vector<char> out(static_cast<size_t>(cs.num_actions()), 0);
  VersionRefs refs(cs);
  for (int d = 0; d < cs.num_devices(); ++d) {
    const int compute = d * kStreamsPerDevice + static_cast<int>(StreamKind::kCompute);
    for (const int32_t id : cs.stream_actions(compute)) {
      if (refs.apply(id)) out[static_cast<size_t>(id)] = 1;
    }
  }
  return out;
}

}  // namespace pipetwin
