// ZB-H2: zero-bubble pipeline at about twice 1F1B's memory (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, Section 3.1, Figure 3 bottom).
//
// "We introduce more F passes in the warm-up phase to fill the bubble preceding the initial B.
// We also reorder the W passes at the tail, which changes the layout from trapezoid into a
// parallelogram": stage i of K runs 2(K - 1 - i) warm-up forwards and defers up to 2i W's, so
// every stage holds up to 2K - 1 micro-batches of activations (Table 1: (2p - 1) M_B). The
// parallelogram closes up across mini-batches: each stage steps its optimizer on its own once its
// last W ran (the IR has no global optimizer synchronisation, which the paper removes for this
// schedule with its post-validation, Section 4), so stage 0 starts the next mini-batch while the
// later stages finish this one. The steady-state bubble per mini-batch is then
// (K - 1)(f + b - 2w), zero when f = b = w (tests/schedule_zero_bubble_test.cpp). Synchronous:
// gradients equal GPipe's. Order: deferred_weight_order.hpp.
#include "core/schedule/deferred_weight_order.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

Schedule make_zb_h2(const PipelineShape& shape) {
  ScheduleBuilder b("zb-h2", shape);
  require_runnable("zb-h2", b.shape());
  emit_deferred_weight_order(b, {.warmup_per_stage_left = 2, .deferred_per_stage = 2});
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
