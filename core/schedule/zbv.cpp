// ZB-V: zero-bubble V-shape schedule at 1F1B's memory (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, Section 6, Figure 8; the order of PyTorch's ScheduleZBVZeroBubble).
//
// Each of D devices hosts two chunks in a V (virtual_stages.hpp): device d runs stage d on the
// way down and stage 2D - 1 - d on the way back, so the last stage sits with the first and the
// loss's gradient starts back at once. Backwards are split into I and W. Device d (rank r):
//   warm-up  2(D - r) - 1 forwards of chunk 0; r times F chunk 1, F chunk 0; D - r times
//            F, I, W of chunk 1;
//   steady   while forwards remain: F, I, W of chunk 0, then F, I, W of chunk 1;
//   cool-down r times I chunk 0, I chunk 1; D - r times I chunk 0 and the oldest waiting W of
//            chunk 0; then the W's left, chunk 1's first.
// Each device holds at most 2D chunk-micro-batches of activations, D micro-batches of its whole
// share: 1F1B's peak (the paper's p M_B); with f = b = w per chunk the steady state has no bubble
// (tests/schedule_zero_bubble_test.cpp). Needs M >= 2D - 1 (the warm-up of device 0).
// Synchronous: each stage steps after its last W; gradients equal GPipe's.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

// One device's passes over one mini-batch, counting micro-batches per chunk (0: down, 1: back).
class VDevice {
 public:
  VDevice(ScheduleBuilder& b, int D, int rank, int base)
      : b_(b), stage_{rank, 2 * D - 1 - rank}, base_(base) {}
  void F(int c) { b_.forward(stage_[c], base_ + f_[c]++); }
  void I(int c) { b_.checkpointed_backward_input(stage_[c], base_ + i_[c]++); }
  void W(int c) { b_.backward_weight(stage_[c], base_ + w_[c]++); }
  void FIW(int c) {
    F(c);
    I(c);
    W(c);
  }
  int forwards(int c) const { return f_[c]; }
  bool weights_left(int c) const { return w_[c] < i_[c]; }
  void steps(int step) {
    b_.optimizer_step(stage_[0], step);
    b_.optimizer_step(stage_[1], step);
  }

 private:
  ScheduleBuilder& b_;
  int stage_[2];
  int base_;
  int f_[2] = {0, 0}, i_[2] = {0, 0}, w_[2] = {0, 0};
};

void emit_device(ScheduleBuilder& b, int D, int r, int step) {
  const int M = b.M();
  VDevice v(b, D, r, step * M);
  for (int k = 0; k < 2 * (D - r) - 1; ++k) v.F(0);
  for (int k = 0; k < r; ++k) {
    v.F(1);
    v.F(0);
  }
  for (int k = 0; k < D - r; ++k) v.FIW(1);
  while (v.forwards(1) < v.forwards(0) || v.forwards(0) < M) {
    if (v.forwards(0) < M) v.F(0);
    v.I(0);
    v.W(0);
    v.FIW(1);
  }
  for (int k = 0; k < r; ++k) {
    v.I(0);
    v.I(1);
  }
  for (int k = 0; k < D - r; ++k) {
    v.I(0);
    v.W(0);
  }
  while (v.weights_left(1)) v.W(1);
  while (v.weights_left(0)) v.W(0);
  v.steps(step);
}

}  // namespace

Schedule make_zbv(const PipelineShape& shape) {
  ScheduleBuilder b("zbv", shape);
  require_runnable("zbv", b.shape());
  const int D = b.shape().devices_per_replica;
  for (int step = 0; step < b.N(); ++step) {
    for (int r = 0; r < D; ++r) emit_device(b, D, r, step);
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
