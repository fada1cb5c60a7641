// 1F1B, also known as PipeDream-Flush: synchronous, one forward one backward.
//
// Stage s (0-based) of K first runs min(K - 1 - s, M) warm-up forwards, then alternates one
// forward and one backward, then drains the remaining backwards; every stage steps once per
// mini-batch after a flush, so the gradients equal GPipe's. It has GPipe's bubble,
// (M + K - 1)(f + b) per mini-batch when M >= K, but holds at most K - s micro-batches of
// activations on stage s instead of M. With checkpointing each backward is preceded by its
// recompute (except the mini-batch's last micro-batch under except_last). Works for M < K too.
#include "core/error.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

Schedule make_1f1b(const PipelineShape& shape) {
  ScheduleBuilder b("1f1b", shape);
  require_runnable("1f1b", b.shape());
  const int M = b.M(), K = b.K();
  for (int step = 0; step < b.N(); ++step) {
    const int base = step * M;
    for (int s = 0; s < K; ++s) {
      // K - 1 - s; with replicated stages, one more per further device
      // (ScheduleBuilder::devices_after).
      const int warmup = std::min(b.devices_after(s) + b.shape().replicas_of(s) - 1, M);
      for (int i = 0; i < warmup; ++i) b.forward(s, base + i);
      for (int i = warmup; i < M; ++i) {
        b.forward(s, base + i);
        b.checkpointed_backward(s, base + i - warmup);
      }
      for (int i = M - warmup; i < M; ++i) b.checkpointed_backward(s, base + i);
      b.optimizer_step(s, step);
    }
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
