// The order of the transfer streams: which Send and which Recv each device's copy streams run
// first, so that a schedule whose stage graph is not a plain chain cannot deadlock.
//
// Why it is needed. Each device has one send and one receive stream that run their transfers in
// list order, and a Send meets its Recv in a rendezvous (action.hpp). A generator places a Recv
// right before the action that consumes it and a Send right after the action that produces it,
// one per cross-device stage edge, in the order of the edge list. On a chain that order is
// consistent. A skip edge breaks it: torchgpipe's portals make a skipped tensor travel once,
// straight from producer to consumer ("With portals, the tensor is directly copied to device 3.
// The gradient flows in the exact reverse direction in the backward pass", torchgpipe Section
// 3.3.1, Figure 6). With U-Net stages 0 -> 1 -> 2 and a skip 0 -> 2 the backward has stage 2
// send gradients to stage 0 and to stage 1 while stage 0 expects the gradient of stage 1 first.
// Stage 2's send stream then waits for stage 0's receive stream, which waits for stage 1's
// backward, which waits for the gradient queued behind the first send: a cycle (how the U-Net and T5
// plans deadlocked before this rule).
//
// The rule. We run the schedule once in idealised time — every compute action takes a nominal
// time (forward 1, recompute 1, backward 2, optimizer step 0: the usual backward = 2 x forward;
// the builder has no cost model), compute streams keep the generator's order, but transfers are
// instantaneous and unordered (each happens the moment its Send's producer and the control
// dependencies of both ends are done). A transfer x gets the key
//     (t(x), n(x), seq(x))
// t = when it happened, n = when its earliest dependent started (the consumer's need), seq = the
// order in which the run finalised it. Every device's send stream and receive stream are then
// sorted by this key; compute streams and the list slots of each stream stay as they were.
// Among transfers that become ready together (one producer, several consumers) the one needed
// first goes first; a receive stream takes tensors in the order they were produced.
//
// Why it cannot deadlock. Give every compute action c the key (start(c), start(c), seq(c)).
// Along every constraint of the real run — a data or control dependency, a compute stream's
// order, and now the transfer streams' orders — the key strictly increases (times never decrease
// along a dependency, n(x) <= start of every dependent, and seq breaks ties in dependency order;
// producers take time >= 1). So the constraint graph is acyclic, and the earliest unfinished
// action in key order can always start: its predecessors on every stream and its dependencies
// have smaller keys and are done. The idealised run itself completes whenever the generator's
// compute order is sound; when it does not, the lists are left alone and compiling the schedule
// reports the deadlock.
//
// Where a paper leaves the detail open (torchgpipe uses separate copy streams per portal; we have
// one send and one receive stream per device), this is our choice. Plans whose stages form a plain
// chain with one stage per device keep the generator's order, which is the one the papers'
// figures show and which the closed-form tests pin; the builder applies this rule to all others.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

// One stage per device and every stage edge joins consecutive stages s -> s+1.
bool is_plain_chain(const PipelineShape& shape);

// Reorders the send and receive streams of `devices` (replica 0, one list per device of the
// normalised `shape`) by the key above and rewrites `control` to the moved indices. Returns
// whether any action moved.
bool order_transfers_by_ideal_time(const PipelineShape& shape,
                                   std::vector<std::vector<Action>>& devices,
                                   std::vector<ControlDep>& control);

}  // namespace pipetwin
