#include "core/memory.hpp"

#include <algorithm>
#include <span>

#include "core/schedule/liveness.hpp"

namespace pipetwin {

namespace {

size_t at(int i) {
  return static_cast<size_t>(i);
}

// Bytes of the tensor each Recv brings (by action id; 0 for other actions).
std::vector<double> received_bytes(const CompiledSchedule& cs,
                                   const std::vector<StageCost>& stages) {
  const auto& sh = cs.shape();
  std::vector<double> edge_bytes(at(sh.num_stages) * at(sh.num_stages), 0.0);
  for (const auto& e : sh.edges)
    edge_bytes[at(e.from) * at(sh.num_stages) + at(e.to)] = e.bytes_per_sample;
  std::vector<double> out(at(cs.num_actions()), 0.0);
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    if (a.op != Op::kRecv) continue;
    const bool act = a.payload == Payload::kActivation;
    const int from = act ? a.peer_stage : a.stage, to = act ? a.stage : a.peer_stage;
    out[at(id)] = edge_bytes[at(from) * at(sh.num_stages) + at(to)] * stages[at(to)].micro_batch;
  }
  return out;
}

// The memory curve of one device: the liveness walk (core/schedule/liveness.hpp) in list order,
// with the bytes of what it keeps alive.
class DeviceWalk {
 public:
  DeviceWalk(const Liveness& lv, const std::vector<StageCost>& stages,
             const std::vector<double>& recv_bytes, int device, MemoryWalk& out)
      : lv_(lv),
        cursor_(lv, device),
        stages_(stages),
        recv_bytes_(recv_bytes),
        mem_(out.devices[at(device)]),
        after_(out.after_action) {
    const auto& sh = lv.schedule().shape();
    on_device_ = sh.stages_on(device % sh.devices_per_replica);
    for (int s : on_device_) mem_.static_bytes += stages_[at(s)].static_bytes();
  }

  void run() {
    mem_.peak_bytes = mem_.static_bytes;
    received_ += bytes_of(cursor_.arrived());
    while (!cursor_.done()) step(cursor_.next_id());
  }

 private:
  double bytes_of(std::span<const int32_t> recvs) const {
    double b = 0;
    for (const int32_t id : recvs) b += recv_bytes_[at(id)];
    return b;
  }

  // Bytes of the extra weight versions alive now (stages in ascending order, as they are summed).
  double stash() {
    double bytes = 0;
    for (const int s : on_device_) {
      const int alive = cursor_.versions_alive(s);
      mem_.max_weight_versions = std::max(mem_.max_weight_versions, alive);
      bytes += (alive - 1) * stages_[at(s)].param_bytes;
    }
    return bytes;
  }

  // The bytes in use with `working` more held by the running action; a new peak is recorded.
  double observe_during(double working) {
    const double stash_bytes = stash();
    const double total = mem_.static_bytes + activations_ + received_ + stash_bytes + working;
    if (total > mem_.peak_bytes) {
      mem_.peak_bytes = total;
      mem_.activation_bytes = activations_;
      mem_.received_bytes = received_;
      mem_.stash_bytes = stash_bytes;
      mem_.working_bytes = working;
    }
    return total;
  }

  // While the action runs: the walk's state before it ends (a backward still holds its graph).
  void during(int id) {
    const Action& a = lv_.schedule().action(id);
    const StageCost* st = a.stage >= 0 ? &stages_[at(a.stage)] : nullptr;
    switch (a.op) {
      case Op::kForward: {
        activations_ += st->input_bytes;
        const bool saves = lv_.keeps_graph(id);
        if (saves) activations_ += st->saved_bytes;
        // The forward's workspace, on top of what it keeps.
        observe_during(saves ? st->forward_bytes : st->forward_nograd_bytes);
        break;
      }
      case Op::kRecompute:
        activations_ += st->saved_bytes;
        observe_during(st->forward_bytes);
        break;
      case Op::kBackwardInput:  // frees nothing: the weight half still needs the graph
        observe_during(st->backward_bytes);
        break;
      case Op::kBackward:
      case Op::kBackwardWeight:
        // The backward's own working memory, on top of everything its forward kept.
        observe_during(st->backward_bytes);
        activations_ -= st->input_bytes + st->saved_bytes;
        break;
      default:
        break;
    }
  }

  void step(int id) {
    if (stream_of(lv_.schedule().action(id).op) != StreamKind::kCompute) {
      cursor_.start();
      received_ += bytes_of(cursor_.finish());
      after_[at(id)] = mem_.static_bytes + activations_ + received_ + stash();
      return;
    }
    // A compute action takes over the tensors it consumes: its own terms count them from now on.
    received_ -= bytes_of(cursor_.start());
    during(id);
    received_ += bytes_of(cursor_.finish());
    mem_.max_in_flight = std::max(mem_.max_in_flight, cursor_.in_flight());
    after_[at(id)] = observe_during(0.0);
  }

  const Liveness& lv_;
  LivenessCursor cursor_;
  const std::vector<StageCost>& stages_;
  const std::vector<double>& recv_bytes_;
  DeviceMemory& mem_;
  std::vector<double>& after_;
  std::vector<int> on_device_;  // the device's stages, ascending
  double activations_ = 0;
  double received_ = 0;  // tensors received ahead of their consumer
};

MemoryWalk walk(const Liveness& lv, const std::vector<StageCost>& stages) {
  const CompiledSchedule& cs = lv.schedule();
  MemoryWalk out;
  out.devices.resize(static_cast<size_t>(cs.num_devices()));
  out.after_action.assign(static_cast<size_t>(cs.num_actions()), 0);
  const std::vector<double> recv_bytes = received_bytes(cs, stages);
  for (int d = 0; d < cs.num_devices(); ++d) DeviceWalk(lv, stages, recv_bytes, d, out).run();
  return out;
}

}  // namespace

MemoryWalk walk_memory(const CompiledSchedule& cs, const std::vector<StageCost>& stages) {
  return walk(Liveness(cs), stages);
}

MemoryWalk walk_memory(const CompiledSchedule& cs, const std::vector<StageCost>& stages,
                       const std::vector<double>& start, const std::vector<double>& end) {
  return walk(Liveness(cs, start, end), stages);
}

}  // namespace pipetwin
