#include "core/schedule/delayed_order.hpp"

#include <optional>
#include <vector>

#include "core/error.hpp"

namespace pipetwin {

void emit_delayed_lockstep(ScheduleBuilder& b, bool replay) {
  if (!b.shape().one_stage_per_device()) {
    throw InputError("schedules ddg and feature-replay need one stage per device");
  }
  const int K = b.K(), J = b.total_micro_batches();
  // The recv that closes the previous step on each stage's device; the next step's first action
  // waits for it.
  std::vector<std::optional<ActionRef>> step_end(static_cast<size_t>(K));
  auto after_step_end = [&](int s) {
    if (auto& end = step_end[static_cast<size_t>(s)]) {
      b.control(*end, b.last_on_stage_device(s));
      end.reset();
    }
  };
  for (int t = 0; t < J + K - 1; ++t) {
    for (int s = 0; s < K; ++s) {
      const int delay = K - 1 - s;
      const int mb = t - delay;  // this step's delayed backward
      bool first = true;
      auto opened = [&] {
        if (first) after_step_end(s);
        first = false;
      };
      if (t < J) {
        b.recv_activations(s, t);
        b.compute(Op::kForward, s, t);
        opened();
        b.send_activations(s, t);
      }
      const bool backward = mb >= 0 && mb < J;
      if (backward) {
        if (replay && delay > 0) {
          b.recompute(s, mb);
          opened();
        }
        b.compute(Op::kBackward, s, mb);
        opened();
        if ((mb + 1) % b.M() == 0) b.optimizer_step(s, mb / b.M());
      }
      // Close the step: receive the gradient for next step's backward, then pass ours on.
      const int next = mb + 1;
      std::optional<ActionRef> closing;
      if (delay > 0 && next >= 0 && next < J) {
        b.recv_gradients(s, next);
        closing = b.last_on_stage_device(s);
      }
      if (backward) {
        const ActionRef before = b.last_on_stage_device(s);
        b.send_gradients(s, mb);
        const ActionRef sent = b.last_on_stage_device(s);
        if (closing && (sent.index != before.index)) b.control(*closing, sent);
      }
      if (closing) step_end[static_cast<size_t>(s)] = closing;
    }
  }
}

}  // namespace pipetwin
