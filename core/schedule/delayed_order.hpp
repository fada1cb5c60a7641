// The lock-step order of the delayed-gradient schedules, DDG and Features Replay.
//
// Both keep the forward pass sequential ("Forward pass of the DDG is the same as naive
// sequential") and break only the backward lock: at step t, device k (1-based) runs the forward
// of mini-batch t, then the backward of mini-batch t - (K - k) with the error gradient it received
// at the end of the previous step, so all K backwards of a step run in parallel (EPFL report
// Tables 3 and 4). A step therefore costs T_F + T_B / K (Table 1).
//
// Each step ends, as in Tables 3 and 4, by receiving the next delayed gradient from the next
// device; we hand our own gradient to the previous device only after that, and start the next
// step's forward only after it. That makes the step boundary a lock across devices — the
// "forward locking" DDG keeps (Huo et al. 2018) — which is what yields T_F + T_B / K; without it
// the forwards of consecutive steps would overlap and DDG would run at PipeDream's speed.
// A pipeline of J micro-batches takes J + K - 1 steps; the last K - 1 only drain backwards.
// Stages update every M backwards.
//
// Thread-safety: pure function.
#pragma once

#include "core/schedule/builder.hpp"

namespace pipetwin {

// `replay`: Features Replay — every stage but the last stores only its input and recomputes its
// forward with the current weights right before the delayed backward (Table 4).
void emit_delayed_lockstep(ScheduleBuilder& b, bool replay);

}  // namespace pipetwin
