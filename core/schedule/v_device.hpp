// One device of a V-shape schedule, for the generators that write them (zbv.cpp, dualpipev.cpp).
//
// In the V layout (virtual_stages.hpp) device r of D hosts two model chunks: chunk 0 is stage r
// (the way down), chunk 1 stage 2D - 1 - r (the way back). A V schedule is written per device as
// a sequence of passes per chunk — "F of chunk 0", "I of chunk 1", "W" — each taking that chunk's
// next micro-batch in order. VDevice keeps those counters and the weight halves waiting to run:
// W(c) runs chunk c's oldest waiting one, W() the oldest of either chunk (DualPipe's
// WeightGradStore, a FIFO queue).
//
// Thread-safety: not thread-safe; one per generator call and device.
#pragma once

#include <deque>
#include <string>
#include <utility>

#include "core/schedule/builder.hpp"

namespace pipetwin {

class VDevice {
 public:
  VDevice(ScheduleBuilder& b, int rank, int step);

  void F(int chunk);  // forward
  void B(int chunk);  // whole backward
  void I(int chunk);  // input half; its weight half waits
  void W(int chunk);  // the chunk's oldest waiting weight half
  void W();           // the oldest waiting weight half of either chunk
  int forwards(int chunk) const { return forwards_[chunk]; }
  bool weights_waiting(int chunk) const;
  void optimizer_steps();  // both chunks' step, after their last backward

 private:
  ScheduleBuilder& b_;
  int stage_[2];
  int step_, base_;
  int forwards_[2] = {0, 0}, backwards_[2] = {0, 0};
  std::deque<std::pair<int, int>> waiting_;  // (chunk, micro-batch) of weight halves, oldest first
};

// The schedule `name` on a V-shape `shape`: each mini-batch, emit(v, rank) writes device rank's
// passes, then VDevice steps both chunks. Checks the shape with schedule_refusal.
template <typename EmitDevice>
Schedule make_v_schedule(const std::string& name, const PipelineShape& shape, EmitDevice emit);

}  // namespace pipetwin

#include "core/schedule/v_device_inl.hpp"
