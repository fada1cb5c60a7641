// What each device holds alive at every action of a compiled schedule, walked once.
//
// "Which micro-batch reads which weight version, and what stays alive until when" is one rule,
// read off the schedule alone (list order, no timing) and shared by the memory walk
// (core/memory.hpp adds bytes to it), the choice of in-place or new-buffer optimizer steps
// (core/schedule/weight_versions.hpp) and the executor, which can assert at every action that it
// holds exactly what this walk says (exec/runtime/liveness_check.hpp).
//
// The rule, per device, in its list order (the compute stream keeps that order; docs/design.md
// "The schedule IR"), for every (stage, micro-batch) of the device:
//
//   Forward(s, j)    keeps the stage input until Backward(s, j). Without a later Recompute(s, j)
//                    it also keeps its graph (the saved activations), built on the version it
//                    reads. With one it keeps only the input: torchgpipe's checkpointing "computes
//                    as usual function in the forward pass without storing intermediate activation
//                    maps but the inputs" (torchgpipe Section 3.2.4).
//   Recompute(s, j)  rebuilds the graph on the version the IR declares for it: "this function
//                    constructs a local computation graph for backward by recomputing the function
//                    using the stored inputs" (torchgpipe Section 3.2.4). Under weight stashing
//                    that is the forward's version; without (FTPipe, Features Replay) the current
//                    one: "recomputation implies that the gradients are computed on up-to-date
//                    parameters" (FTPipe Section 4.2.1), "we use the delayed inputs and the latest
//                    weight to recompute the forward pass" (EPFL report Section 2.3).
//   Backward(s, j)   frees the input and the graph.
//   BackwardInput(s, j) and BackwardWeight(s, j), a backward split in two (action.hpp): the first
//                    frees nothing, the second frees what Backward frees. What the weight
//                    gradients need — the inputs of the stage's weighted operators and the
//                    gradients of their outputs — stays alive until W runs; the walk counts the
//                    whole graph for it, as Qi et al. (2024) count a micro-batch's activation
//                    memory M_B until its W in their Table 1 (the executor holds a subset:
//                    exec/runtime/weight_grad_store.hpp).
//
// Weight versions. A micro-batch pins a version of its stage while it will still read it:
//   - its graph pins the version the graph was built on, from the Forward or Recompute that built
//     it until its Backward (the executor's graph references those weights);
//   - between a checkpointed Forward and its Recompute it pins the version the Recompute declares
//     when that version is already written at the Forward (weight stashing: the recompute must
//     find it), and none otherwise (it will read the weights current when it runs).
// PipeDream's weight stashing: "we need to use the same version of the model parameters for the
// forward and backward pass of a given mini-batch ... we need to store the intermediate state
// (inputs, activation and weights)"; "for device k, it needs to store K - k + 1 intermediate
// states" (EPFL report Section 2.4). A stage holds its current version and every pinned one. An
// OptimizerStep writes the new version beside the old one while the old one is pinned (a stash),
// else over it in place; a stashed version is freed when the last micro-batch pinning it releases
// it. The IR may declare anything the order implies (compiled.hpp checks it); where a Backward
// declares another version than its graph holds the executor refuses, so the walk keeps the
// graph's.
//
// Received tensors. A Recv's tensor is held from the earliest point it can arrive until the
// compute action that consumes it. Receive streams take a tensor as soon as its sender has it
// (torchgpipe's copy streams, Section 3.2.3), so "earliest" is read off the lists: right after the
// last action of this device that the sender's compute has consumed the output of (one hop: longer
// chains through third devices are left out, which can only make an arrival earlier), and never
// before an earlier Recv of the same stream. A run therefore holds a subset of what the walk says.
// Given a run's start times (the simulator's, or a measured timeline's), a Recv's tensor is held
// instead from the compute action of its device that is running when its copy starts (the buffer
// is allocated then): the first compute action in list order that has not ended by that time,
// never earlier than the list-read point. That is what that run holds, not an upper bound: on a
// GPipe step whose next stage is as fast as this one, one or two output gradients wait, not M.
//
// Use: Liveness holds what the whole schedule shares (arrivals, consumers); a LivenessCursor walks
// one device, action by action, in O(1) amortized per action and keeps its counts in flat arrays
// (the memory walk runs once per sweep point); live_set() / expected_after() list what is alive,
// for assertions and tests.
//
// Thread-safety: Liveness is immutable after construction (concurrent reads are safe); a
// LivenessCursor is not thread-safe (one per walking thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/schedule/compiled.hpp"

namespace pipetwin {

// A (stage, micro-batch) forwarded on the device and not yet backwarded.
struct LiveMicroBatch {
  int stage = -1;
  int micro_batch = -1;
  int forward = -1;        // action id of its Forward (the input is kept since)
  int built_by = -1;       // Forward or Recompute that built its graph; -1: no graph (checkpointed)
  int graph_version = -1;  // version the graph was built on; -1: no graph
  int pinned_version =
      -1;             // version it keeps alive (the graph's, or a stash a Recompute will read)
  int freed_by = -1;  // its Backward (its BackwardWeight when split)
  bool operator==(const LiveMicroBatch&) const = default;
};

// A received tensor held ahead of its use.
struct LiveReceive {
  int recv = -1;      // the Recv's action id
  int consumer = -1;  // the compute action that takes it over (and frees it)
  bool operator==(const LiveReceive&) const = default;
};

// A weight version a stage of the device holds.
struct LiveVersion {
  int stage = -1;
  int version = -1;
  bool current = false;
  int pinned_by = 0;  // micro-batches in flight that pin it
  // Non-current versions: the Backward after which it is freed (the last pin's release).
  // Current: -1 (it lives until a step replaces it and nothing pins it).
  int freed_by = -1;
  bool operator==(const LiveVersion&) const = default;
};

struct LiveSet {
  std::vector<LiveMicroBatch> micro_batches;  // by (stage, micro-batch)
  std::vector<LiveReceive> received;          // by Recv id
  std::vector<LiveVersion> versions;          // by (stage, version)
  bool operator==(const LiveSet&) const = default;
};

class Liveness {
 public:
  explicit Liveness(const CompiledSchedule& cs);
  // Arrivals read off a run (see above): `start` and `end` by action id, in seconds.
  Liveness(const CompiledSchedule& cs, const std::vector<double>& start,
           const std::vector<double>& end);

  const CompiledSchedule& schedule() const { return cs_; }
  // Forward `id` keeps its graph (no Recompute of its micro-batch follows).
  bool keeps_graph(int forward) const;
  // The version micro-batch of Forward `id` pins from it until its Recompute (see above); for a
  // Forward that keeps its graph, the forward's version; -1: none.
  int pinned_after_forward(int forward) const;
  // Recv `id`: the position in its device's list after which its tensor may be held (-1: from the
  // start), and the compute action that consumes it.
  int arrives_after(int recv) const { return arrival_[static_cast<size_t>(recv)]; }
  int consumer_of(int recv) const { return consumer_[static_cast<size_t>(recv)]; }
  // A device's Recvs in the order they arrive (their stream's order).
  std::span<const int32_t> arrivals(int device) const;

 private:
  const CompiledSchedule& cs_;
  std::vector<int32_t> arrival_, consumer_;  // by action id; -1 for non-Recvs
};

// One device's walk. start() then finish() apply its next action; the state in between is what
// holds while the action runs.
class LivenessCursor {
 public:
  LivenessCursor(const Liveness& lv, int device);

  int device() const { return device_; }
  bool done() const { return next_ >= count_; }
  int position() const { return next_ - 1; }  // list index of the last action applied; -1: none
  int next_id() const { return first_ + next_; }

  // The next action starts: it takes over the received tensors it consumes (returned: Recv ids).
  std::span<const int32_t> start();
  // It ends: its graph, pin and version changes apply; returns the Recvs that may have arrived
  // after it (they are held from now on).
  std::span<const int32_t> finish();
  // Recvs that arrived at the last finish() (after construction: those held from the start).
  std::span<const int32_t> arrived() const { return arrived_; }
  // Applies every action up to and including list index `index`.
  void advance_through(int index);

  // Now: micro-batches in flight (forwarded, not backwarded) over the device's stages, weight
  // versions `stage` holds (current + stashed), whether `version` of `stage` is pinned.
  int in_flight() const { return in_flight_; }
  int versions_alive(int stage) const;
  bool pinned(int stage, int version) const;
  int graphs(int stage) const { return graphs_[local(stage)]; }
  // Everything alive now (allocates; for assertions and tests).
  LiveSet live_set() const;

 private:
  size_t local(int stage) const { return static_cast<size_t>(local_[static_cast<size_t>(stage)]); }
  size_t mb_slot(int stage, int mb) const { return local(stage) * mbs_ + static_cast<size_t>(mb); }
  int& refs(int stage, int version) {
    return refs_[local(stage) * versions_ + static_cast<size_t>(version)];
  }
  void pin(int stage, int mb, int version);
  void unpin(int stage, int mb);
  void apply(int id);
  void finish_arrivals();

  const Liveness& lv_;
  const CompiledSchedule& cs_;
  const int device_, replica_, first_, count_;
  int next_ = 0;
  size_t mbs_, versions_;
  std::vector<int> stages_, local_;  // the device's stages ascending; stage -> index among them
  // Per (local stage, micro-batch): Forward id (-1: not in flight), graph builder, pinned version.
  std::vector<int32_t> forward_, built_, pin_;
  std::vector<int> refs_;                           // per (local stage, version): pins
  std::vector<int> referenced_, current_, graphs_;  // per local stage
  int in_flight_ = 0;
  size_t next_arrival_ = 0;
  std::vector<char> held_;  // by Recv id - first_
  std::vector<int32_t> consumed_, arrived_;
};

// What the device holds after the action at list index `index` (-1: before its first action).
LiveSet expected_after(const Liveness& lv, int device, int index);

// Most graphs (saved activations) `stage` holds at once on its device `device`.
int most_graphs(const Liveness& lv, int device, int stage);

}  // namespace pipetwin
