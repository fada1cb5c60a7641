// ScheduleBuilder: what schedule generators use to write a schedule.
//
// A generator states, device by device, the order of compute actions (forward, backward,
// recompute, optimizer step) of replica 0. The builder adds the point-to-point transfers a stage
// needs — Recv right before the action that consumes the tensor, Send right after the action that
// produces it, one per stage edge that crosses devices (a skip edge travels straight from producer
// to consumer) — and, in finish(), fills in weight versions and steps, copies the pipeline onto
// every data-parallel replica and inserts the bucketed all-reduce before each optimizer step
// (data_parallel.hpp).
//
// Transfer order. On a plain chain with one stage per device the builder keeps the generator's
// order: each Recv right before its consumer, each Send right after its producer. A skip edge
// (torchgpipe's portals: a skipped tensor travels once, producer -> consumer, its gradient
// consumer -> producer), several consumers of one stage (T5's encoder output feeding every decoder
// stage) or several stages on one device (mixed-pipe, FTPipe Section 4.1) let one device send to,
// and receive from, several peers in orders that need not agree; with rendezvous transfers on one
// send and one receive stream per device that can deadlock. finish() then sorts every device's
// send and receive streams by the time each transfer takes place in an idealised run of the
// schedule (transfer_order.hpp), which provably cannot deadlock and keeps compute orders as the
// generator wrote them.
//
// Thread-safety: not thread-safe; one builder per generator call. ComputeOrderOnly is per thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

// While one lives on a thread, ScheduleBuilder::finish() there leaves every device's send and
// receive streams in the generator's order (transfer_order.hpp is skipped): for a caller that
// reads only the compute streams, which that ordering never changes (StageMemory::most_graphs,
// the graphs each stage holds). The schedule may deadlock as it stands; it is not for running.
class ComputeOrderOnly {
 public:
  ComputeOrderOnly();
  ~ComputeOrderOnly();
  ComputeOrderOnly(const ComputeOrderOnly&) = delete;
  ComputeOrderOnly& operator=(const ComputeOrderOnly&) = delete;

 private:
  bool before_;
};

class ScheduleBuilder {
 public:
  ScheduleBuilder(std::string kind, const PipelineShape& shape);

  const PipelineShape& shape() const { return shape_; }
  int M() const { return shape_.micro_batches; }
  int K() const { return shape_.num_stages; }
  int N() const { return shape_.iterations; }
  int total_micro_batches() const { return shape_.micro_batches * shape_.iterations; }
  bool is_last_stage(int stage) const;  // a stage whose output is the loss (no outgoing edge)
  // Longest path (in stage edges) from `stage` to a last stage: FTPipe's depth, "graph distance
  // from the output" (Section 4); K - 1 - stage on a chain.
  int depth(int stage) const;
  // Devices on the longest path after `stage` (PipelineShape::stage_replicas counted): depth(s)
  // without replicated stages. A stage keeps that many micro-batches, plus one per replica of its
  // own, in flight for every device downstream to have work — PipeDream's NOAM, "number of
  // optimal active mini-batches" (SOSP'19 Section 3.3), for the input stage.
  int devices_after(int stage) const;
  // Whether micro-batch `mb` is checkpointed (recomputed before its backward) under the shape's
  // checkpoint mode; "except_last" spares the last micro-batch of each mini-batch (torchgpipe).
  bool recomputes(int mb) const;

  // Forward with its transfers: Recv(activation) per incoming cross-device edge, Forward,
  // Send(activation) per outgoing cross-device edge.
  void forward(int stage, int mb);
  // Backward with its transfers: Recv(gradient) per outgoing cross-device edge, Backward,
  // Send(gradient) per incoming cross-device edge.
  void backward(int stage, int mb);
  // A split backward (action.hpp): BackwardInput with the backward's transfers, and later its
  // BackwardWeight, which has none.
  void backward_input(int stage, int mb);
  void backward_weight(int stage, int mb);
  void recompute(int stage, int mb);
  // backward() / backward_input(), preceded by the recompute when `mb` is checkpointed.
  void checkpointed_backward(int stage, int mb);
  void checkpointed_backward_input(int stage, int mb);
  void optimizer_step(int stage, int step);

  // The pieces of forward()/backward(), for generators that place transfers themselves.
  void compute(Op op, int stage, int mb);
  void recv_activations(int stage, int mb);
  void send_activations(int stage, int mb);
  void recv_gradients(int stage, int mb);
  void send_gradients(int stage, int mb);

  // The action most recently emitted on the device that hosts `stage` (replica 0).
  ActionRef last_on_stage_device(int stage) const;
  // `before` must finish before `after` starts (same device).
  void control(ActionRef before, ActionRef after);

  // Completes the schedule: versions (backward and recompute read the forward's weights when
  // `stashes_weights`, else the current ones), data-parallel replicas and all-reduce buckets.
  Schedule finish(bool stashes_weights);

 private:
  void emit(int device, const Action& a);

  std::string kind_;
  PipelineShape shape_;
  std::vector<std::vector<Action>> devices_;  // replica 0
  std::vector<ControlDep> control_;
  mutable std::vector<int> depth_;          // per stage, filled on first use
  mutable std::vector<int> devices_after_;  // per stage, filled on first use
};

}  // namespace pipetwin
