// ZB-H1: zero-bubble pipeline at 1F1B's memory (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, Section 3.1, Figure 3 top).
//
// The backward is split into I (input gradient) and W (weight gradient). Stage i of K keeps
// 1F1B's K - 1 - i warm-up forwards and defers up to i W's: "we adjust the starting points of W
// passes" so the peak stays at 1F1B's K micro-batches of activations (Table 1: p M_B) while the
// deferred W's fill the tail bubbles. With f, b and w the times of F, I and W of one stage's
// micro-batch, a mini-batch takes M(f + b + w) + (K - 1)(f + b - w) on equal stages with free
// transfers, against 1F1B's (K - 1)(f + b + w) of bubble: a third of it when f = b = w
// (tests/schedule_zero_bubble_test.cpp). Synchronous: one optimizer step per stage and
// mini-batch, gradients equal GPipe's. Order: deferred_weight_order.hpp.
#include "core/schedule/deferred_weight_order.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

Schedule make_zb_h1(const PipelineShape& shape) {
  ScheduleBuilder b("zb-h1", shape);
  require_runnable("zb-h1", b.shape());
  emit_deferred_weight_order(b, {.warmup_per_stage_left = 1, .deferred_per_stage = 1});
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
