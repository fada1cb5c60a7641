// The asynchronous one-forward-one-backward order shared by PipeDream and FTPipe's
// asynchronous pipeline.
//
// Micro-batches stream through the pipeline without flushes. A stage of depth d (its longest
// path to the loss, ScheduleBuilder::depth; K - 1 - s on a chain) first runs d + 1 forwards —
// "the first device loads K mini-batches to keep the pipeline full" (EPFL report Section 2.4);
// "for a stage of depth d, FTPipe first computes d+1 forward passes" (FTPipe Section 4) — then
// alternates one backward and one forward, then drains. The stage updates its weights after every
// M backwards (M = 1: after every micro-batch, as the papers describe; M > 1 accumulates gradients
// over M micro-batches, FTPipe's "accum" setting).
//
// Several stages on one device (FTPipe's Mixed-pipe, Section 4.1: "a stage is invoked by the GPU
// when its inputs are made available by completion of execution of all previous stages"): each
// stage keeps its own sequence, and the device interleaves them in rounds — every round each
// stage takes its next step (a forward, or recompute + backward + optimizer step) if the steps it
// depends on were taken earlier — which is the order they would run in on separate devices at
// equal step times. With one stage per device the device's list is that stage's sequence.
//
// Thread-safety: pure function.
#pragma once

#include <stdexcept>
#include <vector>

#include "core/schedule/builder.hpp"

namespace pipetwin {

// `recompute_stage(s)`: whether stage s recomputes its forward right before each backward.
template <typename RecomputeStage>
void emit_async_1f1b(ScheduleBuilder& b, RecomputeStage recompute_stage) {
  const int K = b.K(), J = b.total_micro_batches();
  struct Step {
    bool forward;
    int mb;
  };
  std::vector<std::vector<Step>> seq(static_cast<size_t>(K));
  for (int s = 0; s < K; ++s) {
    auto& q = seq[static_cast<size_t>(s)];
    // With replicated stages, enough for every device downstream and each replica of s.
    const int warmup = std::min(b.devices_after(s) + b.shape().replicas_of(s), J);
    int next_forward = 0;
    for (; next_forward < warmup; ++next_forward) q.push_back({true, next_forward});
    for (int mb = 0; mb < J; ++mb) {
      q.push_back({false, mb});
      if (next_forward < J) q.push_back({true, next_forward++});
    }
  }
  // done[kind][stage * J + mb]: the step was emitted (kind 0 forward, 1 backward).
  std::vector<std::vector<char>> done(2, std::vector<char>(static_cast<size_t>(K) * J, 0));
  auto is_done = [&](bool forward, int s, int mb) {
    return done[forward ? 0 : 1][static_cast<size_t>(s) * J + mb] != 0;
  };
  auto ready = [&](int s, const Step& st) {
    for (const auto& e : b.shape().edges) {
      if (st.forward && e.to == s && !is_done(true, e.from, st.mb)) return false;
      if (!st.forward && e.from == s && !is_done(false, e.to, st.mb)) return false;
    }
    return true;
  };
  std::vector<size_t> pos(static_cast<size_t>(K), 0);
  size_t remaining = static_cast<size_t>(K) * 2 * J;
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < K; ++s) {
      auto& p = pos[static_cast<size_t>(s)];
      const auto& q = seq[static_cast<size_t>(s)];
      if (p == q.size() || !ready(s, q[p])) continue;
      const Step st = q[p++];
      if (st.forward) {
        b.forward(s, st.mb);
      } else {
        if (recompute_stage(s)) b.recompute(s, st.mb);
        b.backward(s, st.mb);
        if ((st.mb + 1) % b.M() == 0) b.optimizer_step(s, st.mb / b.M());
      }
      done[st.forward ? 0 : 1][static_cast<size_t>(s) * J + st.mb] = 1;
      --remaining;
      progress = true;
    }
    if (!progress) throw std::logic_error("asynchronous 1F1B order: no stage can proceed");
  }
}

}  // namespace pipetwin
