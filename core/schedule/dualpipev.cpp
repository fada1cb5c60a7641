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
#include <deque>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

class DualDevice {
 public:
  DualDevice(ScheduleBuilder& b, int D, int rank, int base)
      : b_(b), stage_{rank, 2 * D - 1 - rank}, base_(base) {}
  void F(int c) { b_.forward(stage_[c], base_ + f_[c]++); }
  // A backward of chunk c: whole, or its input half with the weight half queued (zero bubble).
  void B(int c, bool zero_bubble = false) {
    const int mb = base_ + b_count_[c]++;
    if (!zero_bubble) {
      b_.checkpointed_backward(stage_[c], mb);
      return;
    }
    b_.checkpointed_backward_input(stage_[c], mb);
    queued_.emplace_back(stage_[c], mb);
  }
  void W() {
    b_.backward_weight(queued_.front().first, queued_.front().second);
    queued_.pop_front();
  }
  void FB(int forward_chunk, int backward_chunk) {
    F(forward_chunk);
    B(backward_chunk);
  }
  void steps(int step) {
    b_.optimizer_step(stage_[0], step);
    b_.optimizer_step(stage_[1], step);
  }

 private:
  ScheduleBuilder& b_;
  int stage_[2];
  int base_;
  int f_[2] = {0, 0}, b_count_[2] = {0, 0};
  std::deque<std::pair<int, int>> queued_;  // (stage, micro-batch) of queued weight halves
};

void emit_device(ScheduleBuilder& b, int D, int r, int step) {
  DualDevice v(b, D, r, step * b.M());
  for (int i = 0; i < (D - r - 1) * 2; ++i) v.F(0);  // 1
  for (int i = 0; i < r + 1; ++i) {                   // 2
    v.F(0);
    v.F(1);
  }
  for (int i = 0; i < D - r - 1; ++i) {  // 3
    v.B(1, true);
    v.W();
    v.F(1);
  }
  for (int i = 0; i < b.M() - 2 * D + r + 1; ++i) {  // 4
    v.FB(0, 1);
    v.FB(1, 0);
  }
  for (int i = 0; i < D - r - 1; ++i) {  // 5
    v.B(1);
    v.FB(1, 0);
  }
  bool zero_bubble = false;  // 6: the second half of these backwards are split
  const int step6 = r + 1;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && r % 2 == 1) zero_bubble = true;
    v.B(1, zero_bubble);
    if (i == step6 / 2 && r % 2 == 0) zero_bubble = true;
    v.B(0, zero_bubble);
  }
  for (int i = 0; i < D - r - 1; ++i) {  // 7
    v.W();
    v.B(0, true);
  }
  for (int i = 0; i < r + 1; ++i) v.W();  // 8
  v.steps(step);
}

}  // namespace

Schedule make_dualpipev(const PipelineShape& shape) {
  ScheduleBuilder b("dualpipev", shape);
  require_runnable("dualpipev", b.shape());
  const int D = b.shape().devices_per_replica;
  for (int step = 0; step < b.N(); ++step) {
    for (int r = 0; r < D; ++r) emit_device(b, D, r, step);
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
