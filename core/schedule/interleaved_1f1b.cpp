// Interleaved 1F1B: 1F1B over v model chunks per device (Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, Section 2.2.2,
// Figure 4 bottom).
//
// "Each device is assigned multiple pipeline stages (each with less computation than before)":
// chunk j of device d is stage d + j D (virtual_stages.hpp). A device runs its M v chunk-passes
// in Megatron-LM's order: forward pass k is micro-batch (k div Dv) D + (k mod D) of chunk
// (k div D) mod v — D micro-batches through one chunk, then the same D through the next — and
// backward pass k the same micro-batch of chunk v - 1 - ((k div D) mod v). Device d warms up with
// 2(D - 1 - d) + (v - 1) D forwards (all M v when M = D), as Megatron-LM's
// forward_backward_pipelining_with_interleaving does, then alternates one forward and one
// backward, then drains the backwards; each stage steps after a flush. v = 1 is 1F1B (warm-up
// D - 1 - d). "The pipeline bubble time ... reduces to t_pb^int = (p - 1)(t_f + t_b) / v": a
// bubble fraction of (D - 1)/(v M) on equal stages with free transfers
// (tests/schedule_interleaved_test.cpp). Megatron-LM of the paper requires M to be a multiple of
// D, and so does this order. With checkpointing each backward is preceded by its recompute.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

struct ChunkPass {
  int stage;
  int micro_batch;  // within the mini-batch
};

ChunkPass chunk_pass(int k, int d, int D, int v, bool backward) {
  const int chunk = (k / D) % v;
  return {(backward ? v - 1 - chunk : chunk) * D + d, (k / (D * v)) * D + k % D};
}

int warmup_passes(int d, int D, int v, int M) {
  if (v == 1) return std::min(D - 1 - d, M);
  if (M == D) return M * v;
  return std::min(2 * (D - 1 - d) + (v - 1) * D, M * v);
}

}  // namespace

Schedule make_interleaved_1f1b(const PipelineShape& shape) {
  ScheduleBuilder b("interleaved-1f1b", shape);
  require_runnable("interleaved-1f1b", b.shape());
  const int D = b.shape().devices_per_replica;
  const int v = b.K() / D, M = b.M();
  for (int step = 0; step < b.N(); ++step) {
    const int base = step * M;
    for (int d = 0; d < D; ++d) {
      const int total = M * v, warmup = warmup_passes(d, D, v, M);
      auto fwd = [&](int k) {
        const ChunkPass p = chunk_pass(k, d, D, v, false);
        b.forward(p.stage, base + p.micro_batch);
      };
      auto bwd = [&](int k) {
        const ChunkPass p = chunk_pass(k, d, D, v, true);
        b.checkpointed_backward(p.stage, base + p.micro_batch);
      };
      for (int k = 0; k < warmup; ++k) fwd(k);
      for (int k = 0; k < total - warmup; ++k) {
        fwd(warmup + k);
        bwd(k);
      }
      for (int k = total - warmup; k < total; ++k) bwd(k);
      for (int j = 0; j < v; ++j) b.optimizer_step(j * D + d, step);
    }
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
