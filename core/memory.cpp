#include "core/memory.hpp"

#include <algorithm>
#include <span>

#include "core/memory_walk.hpp"
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

// The memory curve of one device: the memory walk (core/memory_walk.hpp) in bytes.
class ByteTally {
 public:
  ByteTally(const Liveness& lv, const std::vector<StageCost>& stages,
            const std::vector<double>& recv_bytes, int device, MemoryWalk& out)
      : stages_(stages),
        recv_bytes_(recv_bytes),
        mem_(out.devices[at(device)]),
        after_(out.after_action) {
    const auto& sh = lv.schedule().shape();
    on_device_ = sh.stages_on(device % sh.devices_per_replica);
    for (int s : on_device_) mem_.static_bytes += stages_[at(s)].static_bytes();
    mem_.peak_bytes = mem_.static_bytes;
  }

  void received(std::span<const int32_t> recvs, int sign) {
    double b = 0;
    for (const int32_t id : recvs) b += recv_bytes_[at(id)];
    received_ += sign * b;
  }
  void keep_input(int stage) { activations_ += stages_[at(stage)].input_bytes; }
  void keep_graph(int stage) { activations_ += stages_[at(stage)].saved_bytes; }
  void release(int stage) {
    activations_ -= stages_[at(stage)].input_bytes + stages_[at(stage)].saved_bytes;
  }
  // While a compute action runs: its working memory on top of what is held.
  void during(const LivenessCursor& cursor, int, WalkPass pass, int stage) {
    const StageCost& st = stages_[at(stage)];
    observe(cursor, pass == WalkPass::kForward         ? st.forward_bytes
                    : pass == WalkPass::kForwardNoGrad ? st.forward_nograd_bytes
                                                       : st.backward_bytes);
  }
  void after_compute(const LivenessCursor& cursor, int id) {
    mem_.max_in_flight = std::max(mem_.max_in_flight, cursor.in_flight());
    after_[at(id)] = observe(cursor, 0.0);
  }
  void after_transfer(const LivenessCursor& cursor, int id) {
    after_[at(id)] = mem_.static_bytes + activations_ + received_ + stash(cursor);
  }

 private:
  // Bytes of the extra weight versions alive now (stages in ascending order, as they are summed).
  double stash(const LivenessCursor& cursor) {
    double bytes = 0;
    for (const int s : on_device_) {
      const int alive = cursor.versions_alive(s);
      mem_.max_weight_versions = std::max(mem_.max_weight_versions, alive);
      bytes += (alive - 1) * stages_[at(s)].param_bytes;
    }
    return bytes;
  }

  // The bytes in use with `working` more held by the running action; a new peak is recorded.
  double observe(const LivenessCursor& cursor, double working) {
    const double stash_bytes = stash(cursor);
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
  for (int d = 0; d < cs.num_devices(); ++d) {
    ByteTally tally(lv, stages, recv_bytes, d, out);
    walk_device(lv, d, tally);
  }
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
