// Naive model parallel (EPFL report Section 2.1, Table 2).
//
// "During the forward pass, Device 1 gets the input data ... and then the mini-batch flows from
// device 1 to device 4 to perform the forward calculation. During the backward pass ... the
// gradient flows from device 4 to device 1." One micro-batch is in flight at a time, so only one
// device works at any moment: a mini-batch of M micro-batches (gradients accumulated) takes
// M * K * (f + b) on K equal stages, the report's T_F + T_B per micro-batch.
#include "core/schedule/builder.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_naive(const PipelineShape& shape) {
  ScheduleBuilder b("naive", shape);
  for (int step = 0; step < b.N(); ++step) {
    for (int i = 0; i < b.M(); ++i) {
      const int mb = step * b.M() + i;
      for (int s = 0; s < b.K(); ++s) b.forward(s, mb);
      for (int s = b.K() - 1; s >= 0; --s) {
        b.checkpointed_backward(s, mb);
      }
    }
    for (int s = 0; s < b.K(); ++s) b.optimizer_step(s, step);
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
