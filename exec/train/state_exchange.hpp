// State exchange: every layer's state, from the rank that holds it to every rank, for a re-plan
// (PipeTransformer Section 3.3, AutoDP: "newly activated processes must be consistent with
// existing pipelines in ... weights and optimizer states").
//
// Before a transition, stage s of the old plan lives on the rank hosting replica 0's device of
// s (replicas hold equal copies); every rank knows that owner from the old plan. The owner
// captures the stage (capture_stage: parameters, buffers and optimizer state, named by model
// layer) and broadcasts it over the world group — the static "message group" every process
// belongs to (Figure 7) — first a header (each tensor's name, role, shape and dtype, and the
// optimizer's step count) as bytes, then one flat buffer per dtype, over the control plane
// (exec/platform/control_plane.hpp). Every rank ends with one copy
// of the whole model's state, from which the new plan's stages are restored by name, wherever
// they now live. One rank alone takes the same path (its broadcasts return at once), which
// leaves it a copy of replica 0's state.
//
// Broadcasting to every rank rather than to the ranks that host a layer next is simpler and
// costs nothing on the 2 ranks this runs on; a large job would send each layer to its new
// hosts only. Every collective waits at most the job's timeout, and a peer that dies makes it
// fail, so a transition never hangs.
//
// Thread-safety: call from the trainer's thread, between windows, on every rank in step.
#pragma once

#include <functional>

#include "exec/train/checkpoint.hpp"

namespace pipetwin::exec {

class ControlPlane;
class PipelineSession;

// One StageState holding every layer of `session`'s replica 0 (stage -1), on every rank.
// `after_first_stage` runs once the first stage's state has crossed (fault injection). Throws
// RunFailure when a collective fails or times out, std::logic_error when the stages disagree on
// the optimizer's step count.
StageState gather_layer_state(PipelineSession& session, ControlPlane& control,
                              const std::function<void()>& after_first_stage);

}  // namespace pipetwin::exec
