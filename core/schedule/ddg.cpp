// DDG, decoupled parallel backpropagation with delayed gradients (EPFL report Section 2.2,
// Table 3; Huo et al. 2018).
//
// "The last device updates with the up-to-date gradients, while the devices k updates with the
// gradient which delays K - k mini-batches." Each device stores the intermediate states (inputs,
// activations and weights) of the micro-batches in flight, so a backward uses the weights of its
// forward (weight stashing, K - k + 1 states on device k) and a step takes T_F + T_B / K.
#include "core/schedule/delayed_order.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_ddg(const PipelineShape& shape) {
  ScheduleBuilder b("ddg", shape);
  emit_delayed_lockstep(b, /*replay=*/false);
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
