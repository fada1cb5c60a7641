#include "core/schedule/deferred_weight_order.hpp"

#include <algorithm>
#include <deque>

namespace pipetwin {

namespace {

// One stage's order for the mini-batch starting at micro-batch `base`.
void emit_stage(ScheduleBuilder& b, int s, int base, int warmup, int deferred) {
  const int M = b.M();
  std::deque<int> waiting;  // micro-batches whose I ran and whose W did not, oldest first
  int next_input = 0;
  auto input_half = [&] {
    b.checkpointed_backward_input(s, base + next_input);
    waiting.push_back(base + next_input++);
    while (static_cast<int>(waiting.size()) > deferred) {
      b.backward_weight(s, waiting.front());
      waiting.pop_front();
    }
  };
  for (int i = 0; i < warmup; ++i) b.forward(s, base + i);
  for (int i = warmup; i < M; ++i) {
    b.forward(s, base + i);
    input_half();
  }
  while (next_input < M) input_half();
  for (const int mb : waiting) b.backward_weight(s, mb);
}

}  // namespace

void emit_deferred_weight_order(ScheduleBuilder& b, DeferredWeightRule rule) {
  const int M = b.M(), K = b.K();
  for (int step = 0; step < b.N(); ++step) {
    for (int s = 0; s < K; ++s) {
      const int warmup = std::min(rule.warmup_per_stage_left * (K - 1 - s), M);
      emit_stage(b, s, step * M, warmup, rule.deferred_per_stage * s);
      b.optimizer_step(s, step);
    }
  }
}

}  // namespace pipetwin
