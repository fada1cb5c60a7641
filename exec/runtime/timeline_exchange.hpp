// Gathering the measured timeline of a distributed run on rank 0.
//
// Each rank records the events of the devices it hosts; after the run every rank sends its part
// (Chrome-trace JSON) to rank 0 over the control plane (a gather: the rendezvous store in a c10d
// job) and rank 0 merges them; a single rank keeps its own. Ranks of one machine
// share the monotonic clock, and every rank starts its clock right after a common barrier, so
// the merged events line up.
//
// Thread-safety: call from one thread per rank, after the workers have joined.
#pragma once

#include "core/timeline.hpp"
#include "exec/platform/control_plane.hpp"

namespace pipetwin::exec {

// Rank 0 returns the merged timeline; other ranks return their own.
Timeline gather_timeline(ControlPlane& control, const Timeline& local);

}  // namespace pipetwin::exec
