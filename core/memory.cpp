#include "core/memory.hpp"

#include <algorithm>

namespace pipetwin {

namespace {

size_t at(int i) {
  return static_cast<size_t>(i);
}

// The compute action a Send sends the output of (its first dependency).
int producer_of_send(const CompiledSchedule& cs, int send) {
  return cs.deps(send)[0].pred;
}

// For every Send, the latest position in the receiving device's list that must be done before
// the tensor can be sent (-1: none), in one hop: the sender's compute has by then consumed the
// tensors the receiving device sent it, so their producers there are done. Longer chains of
// dependencies through third devices are left out, which can only make an arrival earlier (more
// memory counted, never less). Indexed by action id; -1 for other actions.
std::vector<int32_t> earliest_sends(const CompiledSchedule& cs) {
  std::vector<int32_t> ready(at(cs.num_actions()), -1);
  std::vector<int32_t> done(at(cs.num_devices()), -1);  // per peer device: latest position needed
  for (int p = 0; p < cs.num_devices(); ++p) {
    const int first = cs.id({p, 0});
    const auto count = static_cast<int>(cs.schedule().devices[at(p)].size());
    std::vector<std::pair<int32_t, int32_t>> sends;  // (position of the producer, send)
    for (int id = first; id < first + count; ++id) {
      if (cs.action(id).op == Op::kSend)
        sends.push_back({cs.ref(producer_of_send(cs, id)).index, id});
    }
    std::sort(sends.begin(), sends.end());
    std::fill(done.begin(), done.end(), -1);
    size_t next = 0;
    for (int id = first; id < first + count; ++id) {
      if (stream_of(cs.action(id).op) != StreamKind::kCompute) continue;
      for (const Dependency& d : cs.deps(id)) {
        if (cs.action(d.pred).op != Op::kRecv) continue;
        const int producer = producer_of_send(cs, cs.group_members(cs.group(d.pred))[0]);
        int32_t& latest = done[at(cs.device(producer))];
        latest = std::max(latest, cs.ref(producer).index);
      }
      for (; next < sends.size() && sends[next].first <= cs.ref(id).index; ++next) {
        const int send = sends[next].second;
        ready[at(send)] = done[at(cs.device(cs.group_members(cs.group(send))[1]))];
      }
    }
  }
  return ready;
}

// The memory curve of one device: its compute actions in list order.
class DeviceWalk {
 public:
  DeviceWalk(const CompiledSchedule& cs, const std::vector<StageCost>& stages,
             const std::vector<int32_t>& ready, int device, MemoryWalk& out)
      : cs_(cs),
        stages_(stages),
        device_(device),
        replica_(device / cs.shape().devices_per_replica),
        first_(cs.id({device, 0})),
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
    list_receives(ready);
  }

  void run() {
    mem_.peak_bytes = mem_.static_bytes;
    arrive(-1);
    const auto count = static_cast<int>(cs_.schedule().devices[at(device_)].size());
    for (int id = first_; id < first_ + count; ++id) step(id);
  }

 private:
  // The device's Recvs in their stream's order, each with the position in the device's list
  // after which it may arrive (never before an earlier Recv of the stream) and its bytes.
  void list_receives(const std::vector<int32_t>& ready) {
    const auto& sh = cs_.shape();
    std::vector<double> edge_bytes(at(sh.num_stages) * at(sh.num_stages), 0.0);
    for (const auto& e : sh.edges)
      edge_bytes[at(e.from) * at(sh.num_stages) + at(e.to)] = e.bytes_per_sample;
    recv_index_.assign(cs_.schedule().devices[at(device_)].size(), -1);
    int32_t arrival = -1;
    for (int32_t id :
         cs_.stream_actions(device_ * kStreamsPerDevice + static_cast<int>(StreamKind::kRecv))) {
      const Action& a = cs_.action(id);
      const bool act = a.payload == Payload::kActivation;
      const int from = act ? a.peer_stage : a.stage, to = act ? a.stage : a.peer_stage;
      arrival = std::max(arrival, ready[at(cs_.group_members(cs_.group(id))[0])]);
      const double bytes =
          edge_bytes[at(from) * at(sh.num_stages) + at(to)] * stages_[at(to)].micro_batch;
      recv_index_[at(id - first_)] = static_cast<int32_t>(receives_.size());
      receives_.push_back({arrival, bytes, false});
    }
  }

  // Tensors that may have arrived once the action at `position` is done: held until consumed.
  void arrive(int position) {
    for (; next_receive_ < receives_.size() && receives_[next_receive_].after <= position;
         ++next_receive_) {
      Receive& r = receives_[next_receive_];
      r.held = true;
      received_ += r.bytes;
    }
  }

  // A compute action takes over the tensors it consumes: its own terms count them from now on.
  void consume(int id) {
    for (const Dependency& d : cs_.deps(id)) {
      if (cs_.action(d.pred).op != Op::kRecv) continue;
      Receive& r = receives_[at(recv_index_[at(d.pred - first_)])];
      if (!r.held) continue;
      r.held = false;
      received_ -= r.bytes;
    }
  }

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

  void observe(int id) { after_[at(id)] = observe_during(0.0); }

  void step(int id) {
    const Action& a = cs_.action(id);
    const StageCost* st = a.stage >= 0 ? &stages_[at(a.stage)] : nullptr;
    const int li = a.stage >= 0 ? local_[at(a.stage)] : -1;
    if (stream_of(a.op) != StreamKind::kCompute) {
      after_[at(id)] = mem_.static_bytes + activations_ + received_ + stash();
      return;
    }
    consume(id);
    switch (a.op) {
      case Op::kForward: {
        activations_ += st->input_bytes;
        const bool saves = cs_.recompute_of(replica_, a.stage, a.micro_batch) < 0;
        if (saves) activations_ += st->saved_bytes;
        // The forward's workspace, on top of what it keeps.
        observe_during(saves ? st->forward_bytes : st->forward_nograd_bytes);
        seen_[at(li)] = 1;
        reference(li, a.version, +1);
        mem_.max_in_flight = std::max(mem_.max_in_flight, ++in_flight_);
        break;
      }
      case Op::kRecompute:
        activations_ += st->saved_bytes;
        observe_during(st->forward_bytes);
        break;
      case Op::kBackward: {
        // The backward's own working memory, on top of everything its forward kept.
        observe_during(st->backward_bytes);
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
        break;
    }
    arrive(cs_.ref(id).index);
    observe(id);
  }

  const CompiledSchedule& cs_;
  const std::vector<StageCost>& stages_;
  const int device_, replica_, first_;  // first_: id of the device's first action
  const bool stashes_;
  const int versions_;  // weight versions 0..iterations
  DeviceMemory& mem_;
  std::vector<double>& after_;
  std::vector<int> on_device_, local_;  // the device's stages; stage -> index among them
  std::vector<int> refs_, referenced_, current_;
  std::vector<char> seen_;
  double activations_ = 0;
  // Recvs of the device in stream order: after which position each may arrive, its bytes, and
  // whether it is held now (arrived, not yet consumed).
  struct Receive {
    int32_t after;
    double bytes;
    bool held;
  };
  std::vector<Receive> receives_;
  std::vector<int32_t> recv_index_;  // by id - first_: index into receives_, -1 for non-Recvs
  size_t next_receive_ = 0;
  double received_ = 0;
  int in_flight_ = 0;
};

}  // namespace

MemoryWalk walk_memory(const CompiledSchedule& cs, const std::vector<StageCost>& stages) {
  MemoryWalk out;
  out.devices.resize(static_cast<size_t>(cs.num_devices()));
  out.after_action.assign(static_cast<size_t>(cs.num_actions()), 0);
  const std::vector<int32_t> ready = earliest_sends(cs);
  for (int d = 0; d < cs.num_devices(); ++d) DeviceWalk(cs, stages, ready, d, out).run();
  return out;
}

}  // namespace pipetwin
