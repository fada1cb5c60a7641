// The memory walk: one device's list of a compiled schedule walked in order with the liveness
// rule (core/schedule/liveness.hpp), stopping at the points where what it holds can peak.
//
// The walk is written once and counts in whatever its Tally counts: core/memory.cpp adds bytes
// (walk_memory(), a device's memory curve and peak), core/partition/range_terms.cpp counts
// inputs, graphs, stashed versions and received tensors per stage (StageMemory: the points a
// partitioner prices any candidate stage at, docs/partition-memory.md). The two therefore take
// the same steps and observe the same points, and a stage priced by the counts equals the walk's
// bytes (tests/partition_memory_test.cpp).
//
// The steps, per action of the device in list order (docs/design.md "Cost model terms"):
//   transfer   Send, Recv, AllReduce: the Recvs that may have arrived after it are held from now
//              on. Not an observation point: what arrives is still held at the next compute.
//   compute    it takes over the received tensors it consumes (they leave the received count:
//              its own terms count them from now on); then, by kind,
//                Forward         + the stage input kept for backward, + the graph when it keeps
//                                one (no Recompute follows); observed while it runs with the
//                                forward's working memory (or the no-grad one when it keeps
//                                nothing);
//                Recompute       + the graph; observed while it runs (forward working memory);
//                BackwardInput   observed while it runs (backward working memory); frees
//                                nothing: the weight half still needs the graph;
//                Backward, BackwardWeight  observed while it runs (backward working memory,
//                                on top of everything its forward kept); then - input and graph;
//              then the Recvs that may have arrived after it are held, and it is observed again,
//              idle (no working memory).
// Stashed weight versions are the cursor's (versions_alive - 1 per stage), read at each point.
//
// A Tally provides (all called in walk order; `cursor` is the device's, as of the call):
//   void received(std::span<const int32_t> recvs, int sign);  // held (+1) or taken over (-1)
//   void keep_input(int stage);   // a Forward keeps its stage input
//   void keep_graph(int stage);   // a Forward or Recompute keeps its graph
//   void release(int stage);      // a Backward or BackwardWeight frees input and graph
//   void during(const LivenessCursor& cursor, int id, WalkPass pass, int stage);
//   void after_compute(const LivenessCursor& cursor, int id);   // the idle point after it
//   void after_transfer(const LivenessCursor& cursor, int id);  // not an observation point
//
// Thread-safety: walk_device() is a pure function of its arguments; one Tally per call.
#pragma once

#include <cstdint>
#include <span>

#include "core/schedule/liveness.hpp"

namespace pipetwin {

// The pass running at an observation point, whose working memory counts there.
enum class WalkPass : uint8_t { kIdle, kForward, kForwardNoGrad, kBackward };

// Walks device `device` of `lv`'s schedule, reporting to `tally` (see above).
template <class Tally>
void walk_device(const Liveness& lv, int device, Tally& tally) {
  LivenessCursor cursor(lv, device);
  tally.received(cursor.arrived(), +1);
  while (!cursor.done()) {
    const int id = cursor.next_id();
    const Action& a = lv.schedule().action(id);
    if (stream_of(a.op) != StreamKind::kCompute) {
      cursor.start();
      tally.received(cursor.finish(), +1);
      tally.after_transfer(cursor, id);
      continue;
    }
    tally.received(cursor.start(), -1);
    switch (a.op) {
      case Op::kForward: {
        tally.keep_input(a.stage);
        const bool saves = lv.keeps_graph(id);
        if (saves) tally.keep_graph(a.stage);
        tally.during(cursor, id, saves ? WalkPass::kForward : WalkPass::kForwardNoGrad, a.stage);
        break;
      }
      case Op::kRecompute:
        tally.keep_graph(a.stage);
        tally.during(cursor, id, WalkPass::kForward, a.stage);
        break;
      case Op::kBackwardInput:
        tally.during(cursor, id, WalkPass::kBackward, a.stage);
        break;
      case Op::kBackward:
      case Op::kBackwardWeight:
        tally.during(cursor, id, WalkPass::kBackward, a.stage);
        tally.release(a.stage);
        break;
      default:
        break;
    }
    tally.received(cursor.finish(), +1);
    tally.after_compute(cursor, id);
  }
}

}  // namespace pipetwin
