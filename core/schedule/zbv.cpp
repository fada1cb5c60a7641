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
#include "core/schedule/generators.hpp"
#include "core/schedule/v_device.hpp"

namespace pipetwin {

namespace {

void emit_device(VDevice& v, int D, int r, int M) {
  for (int k = 0; k < 2 * (D - r) - 1; ++k) v.F(0);
  for (int k = 0; k < r; ++k) {
    v.F(1);
    v.F(0);
  }
  for (int k = 0; k < D - r; ++k) {
    v.F(1);
    v.I(1);
    v.W(1);
  }
  while (v.forwards(1) < v.forwards(0) || v.forwards(0) < M) {
    if (v.forwards(0) < M) v.F(0);
    v.I(0);
    v.W(0);
    v.F(1);
    v.I(1);
    v.W(1);
  }
  for (int k = 0; k < r; ++k) {
    v.I(0);
    v.I(1);
  }
  for (int k = 0; k < D - r; ++k) {
    v.I(0);
    v.W(0);
  }
  while (v.weights_waiting(1)) v.W(1);
  while (v.weights_waiting(0)) v.W(0);
}

}  // namespace

Schedule make_zbv(const PipelineShape& shape) {
  return make_v_schedule("zbv", shape, emit_device);
}

}  // namespace pipetwin
