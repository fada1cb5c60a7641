// DualPipeV: DeepSeek-V3's DualPipe in its V form ("DeepSeek-V3 Technical Report", 2024, Section
// 3.2.1, Figure 5; the order of deepseek-ai/DualPipe's dualpipev.py).
//
// Each of D devices hosts two chunks in a V (virtual_stages.hpp): device d runs stage d (chunk 0)
// and stage 2D - 1 - d (chunk 1). DualPipe's point is "overlapping the forward and backward
// computation-communication phases" of two micro-batches: its main step is F&B, the forward of
// one chunk next to the backward of the other. The IR runs a device's computations one after the
// other, and a transfer already overlaps computation on its own stream, so an F&B here is the
// forward followed by the backward. Device r, in the reference's eight steps:
//   1 (D - r - 1) 2 times F chunk 0          5 D - r - 1 times B chunk 1, F&B (chunk 1, 0)
//   2 r + 1 times F chunk 0, F chunk 1        6 r + 1 times B chunk 1, B chunk 0, split into I
//   3 D - r - 1 times I chunk 1, W, F chunk 1   (W queued) from the middle on
//   4 M - 2D + r + 1 times F&B (chunk 0, 1),  7 D - r - 1 times W, I chunk 0
//     F&B (chunk 1, 0)                        8 r + 1 times W
// where W runs the oldest queued weight-gradient half (the reference's WeightGradStore) and the
// backwards outside the zero-bubble steps are whole. Needs M >= 2D micro-batches, as the
// reference asserts. Synchronous: each stage steps after its last backward.
#include "core/schedule/generators.hpp"
#include "core/schedule/v_device.hpp"

namespace pipetwin {

namespace {

// F&B: the forward of one chunk next to the backward of the other.
void forward_backward(VDevice& v, int forward_chunk, int backward_chunk) {
  v.F(forward_chunk);
  v.B(backward_chunk);
}

// Step 6: r + 1 times a backward of chunk 1 and one of chunk 0, split from the middle on.
void backwards_both(VDevice& v, int r) {
  bool split = false;
  const int n = r + 1;
  for (int i = 0; i < n; ++i) {
    if (i == n / 2 && r % 2 == 1) split = true;
    split ? v.I(1) : v.B(1);
    if (i == n / 2 && r % 2 == 0) split = true;
    split ? v.I(0) : v.B(0);
  }
}

void emit_device(VDevice& v, int D, int r, int M) {
  for (int i = 0; i < (D - r - 1) * 2; ++i) v.F(0);  // 1
  for (int i = 0; i < r + 1; ++i) {                  // 2
    v.F(0);
    v.F(1);
  }
  for (int i = 0; i < D - r - 1; ++i) {  // 3
    v.I(1);
    v.W();
    v.F(1);
  }
  for (int i = 0; i < M - 2 * D + r + 1; ++i) {  // 4
    forward_backward(v, 0, 1);
    forward_backward(v, 1, 0);
  }
  for (int i = 0; i < D - r - 1; ++i) {  // 5
    v.B(1);
    forward_backward(v, 1, 0);
  }
  backwards_both(v, r);                  // 6
  for (int i = 0; i < D - r - 1; ++i) {  // 7
    v.W();
    v.I(0);
  }
  for (int i = 0; i < r + 1; ++i) v.W();  // 8
}

}  // namespace

Schedule make_dualpipev(const PipelineShape& shape) {
  return make_v_schedule("dualpipev", shape, emit_device);
}

}  // namespace pipetwin
