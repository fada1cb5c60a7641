// Resource limits of schedules: a simulation or sweep asked to do something enormous (10^9
// actions) refuses up front with an estimate.
//
// Every consumer of a schedule (simulator, sweep, planner, executor) holds all of its actions in
// memory, about 260 bytes each once compiled and simulated (measured: GPipe K=8, M=10^4, 10
// iterations, 4.4 million actions, 1.1 GiB peak, 10 s). make_schedule therefore estimates the
// action count from the shape alone, before generating anything, and refuses a schedule above
// the limit with an InputError that gives the estimate, the memory and time it would take, and
// how to proceed. The estimate counts, per iteration and replica, the compute actions of every
// stage and micro-batch (forward, backward, and recompute when checkpointing), two transfers on
// each side of every stage edge per micro-batch (activation and gradient), an optimizer step per
// stage and, with replicas, the all-reduce of each gradient bucket; the generators may emit
// fewer (a last stage's checkpointing), never many more.
//
// The limit is 2 x 10^7 actions (about 5 GiB), or PIPETWIN_MAX_ACTIONS from the environment, or
// what set_action_limit gives (`pipetwin simulate --max-actions`); 0 means no limit.
//
// Thread-safety: estimated_actions and check_action_limit are pure; set the limit before any
// thread uses it (an atomic holds it).
#pragma once

#include <string>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

double estimated_actions(const std::string& schedule, const PipelineShape& shape);
double action_limit();
void set_action_limit(double actions);
// InputError naming `schedule` and the shape when the estimate exceeds the limit.
void check_action_limit(const std::string& schedule, const PipelineShape& shape);

}  // namespace pipetwin
