// Features Replay (EPFL report Section 2.3, Table 4; Huo et al. 2018).
//
// "Instead of store all the intermediate states ... we only store the inputs of each device. Then
// before doing the backward pass of this mini-batch t, we use the delayed inputs and the latest
// weight to recompute the forward pass." Recompute and backward read the current weights — no
// weight staleness in backward, but forward and backward use different weights ("forward and
// backward inconsistency"). A step still takes T_F + T_B / K; memory is one input per micro-batch
// in flight.
#include "core/schedule/delayed_order.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_feature_replay(const PipelineShape& shape) {
  ScheduleBuilder b("feature-replay", shape);
  emit_delayed_lockstep(b, /*replay=*/true);
  return b.finish(/*stashes_weights=*/false);
}

}  // namespace pipetwin
