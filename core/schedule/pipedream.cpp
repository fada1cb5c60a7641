// PipeDream: asynchronous pipeline with weight stashing (EPFL report Section 2.4, Table 5).
//
// After K - s warm-up forwards, each device "alternates between performing the forward and
// backward pass for a mini-batch", so in steady state a mini-batch costs (T_F + T_B) / K. The
// backward of a micro-batch uses the weights its forward used (weight stashing): on stage k
// (1-based) "the gradients ... are computed with weights that are K - k delayed", and the stage
// keeps K - k + 1 weight versions. Both numbers are read off the versions this schedule declares.
#include "core/error.hpp"
#include "core/schedule/async_order.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_pipedream(const PipelineShape& shape) {
  ScheduleBuilder b("pipedream", shape);
  if (!b.shape().one_stage_per_device()) {
    throw InputError("schedule pipedream: needs one stage per device");
  }
  // PipeDream stashes activations and weights; checkpointing, if asked for, recomputes with the
  // stashed weights (same versions), so it only trades memory for time.
  emit_async_1f1b(b, [&](int) { return b.shape().checkpoint != Checkpoint::kNone; });
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
