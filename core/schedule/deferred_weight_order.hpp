// The order of Qi et al.'s hand-crafted zero-bubble schedules ZB-H1 and ZB-H2 ("Zero Bubble
// Pipeline Parallelism", ICLR 2024, Section 3.1, Figure 3), shared by zb_h1.cpp and zb_h2.cpp.
//
// Each stage i of K (one stage per device) runs warmup(i) forwards, then, for every further
// micro-batch, its forward and the input-gradient backward I of the oldest micro-batch still
// waiting, then the rest of the I's; after each I it runs the weight-gradient backwards W of the
// oldest micro-batches while more than deferred(i) of them wait, and the W's left at the end.
// Deferring W's lets a later stage pass its input gradient upstream sooner; the deferred W's
// fill the bubbles that follow. With warmup(i) = K - 1 - i and deferred(i) = i this is ZB-H1
// (the last stage runs "F B F B ... W"), with warmup(i) = 2(K - 1 - i) and deferred(i) = 2i ZB-H2.
//
// Thread-safety: pure function over the builder it is given.
#pragma once

#include "core/schedule/builder.hpp"

namespace pipetwin {

struct DeferredWeightRule {
  int warmup_per_stage_left;  // warmup(i) = warmup_per_stage_left * (K - 1 - i)
  int deferred_per_stage;     // deferred(i) = deferred_per_stage * i
};

// Emits every mini-batch's compute order and optimizer steps for all stages of `b`.
void emit_deferred_weight_order(ScheduleBuilder& b, DeferredWeightRule rule);

}  // namespace pipetwin
