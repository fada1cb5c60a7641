// GPipe with torchgpipe's deterministic clock-cycle and checkpointing (torchgpipe Section 2).
//
// Forward: "for k from 1 to m + n - 1: for i, j such that i + j - 1 = k: execute F_{i,j}"
// (Algorithm 1), so each device runs F_{1,j} .. F_{m,j} in order. Backward runs in reverse:
// "B_{i,j} must be completed before executing B_{i-1,j}". With checkpointing, the recompute
// F'_{i,j} is issued right after B_{i+1,j} so it overlaps the wait for dx_i (Section 3.2.4), and
// "re-computations for the last micro-batch, F'_{m,j}, are unnecessary" and omitted under the
// default except_last mode. Gradients accumulate over the M micro-batches; each stage steps once
// per mini-batch after its last backward (a pipeline flush). On K equal stages with free
// transfers one mini-batch takes (M + K - 1)(f + b), a bubble fraction of (K - 1)/(M + K - 1).
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_gpipe(const PipelineShape& shape) {
  ScheduleBuilder b("gpipe", shape);
  const int M = b.M(), K = b.K();
  for (int step = 0; step < b.N(); ++step) {
    const int base = step * M;
    // Clock cycle k runs F_{i,s} for i + s = k (0-based).
    for (int k = 0; k < M + K - 1; ++k) {
      for (int s = 0; s < K; ++s) {
        const int i = k - s;
        if (i >= 0 && i < M) b.forward(s, base + i);
      }
    }
    // Reverse clock: B_{i,s} at (M - 1 - i) + (K - 1 - s) = k.
    for (int k = 0; k < M + K - 1; ++k) {
      for (int s = K - 1; s >= 0; --s) {
        const int i = M - 1 - (k - (K - 1 - s));
        if (i < 0 || i >= M) continue;
        b.checkpointed_backward(s, base + i);
      }
    }
    for (int s = 0; s < K; ++s) b.optimizer_step(s, step);
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
