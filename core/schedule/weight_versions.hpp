// Which optimizer steps write a new weight version beside the old one.
//
// PipeDream's weight stashing (EPFL report Section 2.4; PipeDream Section 3.3) keeps the weights a
// micro-batch will still read until it has read them. When a stage steps while the version it
// replaces is pinned by a micro-batch in flight, the update cannot overwrite that version: it
// writes the new one into a buffer of its own (a third stream through memory: old weights,
// gradients, new weights). Otherwise nothing reads the old weights again and the step is in place,
// as in GPipe and 1F1B. The executor makes this choice as it runs (exec/runtime/stage.cpp,
// optimizer_step: a version's references are its micro-batches in flight); this module makes the
// same choice from the schedule alone, so the simulator charges each step what the executor does.
// Which micro-batch pins which version, and until when, is the liveness walk's rule
// (core/schedule/liveness.hpp); this module only reads it at each step.
//
// Thread-safety: a pure function of an immutable CompiledSchedule.
#pragma once

#include <vector>

#include "core/schedule/compiled.hpp"

namespace pipetwin {

// Per action id: 1 for an OptimizerStep that writes a new weight version while the version it
// replaces is still pinned, 0 for every other action.
std::vector<char> steps_writing_new_version(const CompiledSchedule& cs);

}  // namespace pipetwin
