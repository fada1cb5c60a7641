// The asynchronous one-forward-one-backward order shared by PipeDream and FTPipe's
// asynchronous pipeline.
//
// Micro-batches stream through the pipeline without flushes. Stage s (0-based) of K first runs
// K - s forwards — "the first device loads K mini-batches to keep the pipeline full" (EPFL report
// Section 2.4); "for a stage of depth d, FTPipe first computes d+1 forward passes" (FTPipe
// Section 4) — then alternates one backward and one forward, then drains. The stage updates its
// weights after every M backwards (M = 1: after every micro-batch, as the papers describe;
// M > 1 accumulates gradients over M micro-batches, FTPipe's "accum" setting).
//
// Thread-safety: pure function.
#pragma once

#include "core/schedule/builder.hpp"

namespace pipetwin {

// `recompute_stage(s)`: whether stage s recomputes its forward right before each backward.
template <typename RecomputeStage>
void emit_async_1f1b(ScheduleBuilder& b, RecomputeStage recompute_stage) {
  const int K = b.K(), J = b.total_micro_batches();
  for (int s = 0; s < K; ++s) {
    const int warmup = std::min(K - s, J);
    int next_forward = 0;
    for (; next_forward < warmup; ++next_forward) b.forward(s, next_forward);
    for (int mb = 0; mb < J; ++mb) {
      if (recompute_stage(s)) b.recompute(s, mb);
      b.backward(s, mb);
      if ((mb + 1) % b.M() == 0) b.optimizer_step(s, mb / b.M());
      if (next_forward < J) b.forward(s, next_forward++);
    }
  }
}

}  // namespace pipetwin
