// FTPipe's asynchronous pipeline (FTPipe Section 4, Figure 5, Table 1).
//
// "For a stage of depth d, FTPipe first computes d+1 forward passes for different micro-batches,
// filling the pipeline, then moves into alternating between backward and forward passes,
// modifying the model parameters after each mini-batch." Every stage but the last checkpoints at
// its borders and recomputes right before its backward; "the last worker in the pipeline does not
// recompute". Recomputation "implies that the gradients are computed on up-to-date parameters
// (but using a stale loss that was computed in a forward pass on an older set of parameters)":
// Table 1's FTPipe row — loss theta_{t-s}, forward-for-backprop Theta_t, backward Theta_t. So
// recompute and backward read the current weights (no stashing).
//
// Mixed-pipe plans put several stages on one GPU (FTPipe Section 4.1, 16 stages on 8 GPUs in
// Section 5.3); the GPU interleaves its stages as async_order.hpp describes.
#include "core/schedule/async_order.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

Schedule make_ftpipe_async(const PipelineShape& shape) {
  ScheduleBuilder b("ftpipe-async", shape);
  emit_async_1f1b(b, [&](int s) { return !b.is_last_stage(s); });
  return b.finish(/*stashes_weights=*/false);
}

}  // namespace pipetwin
