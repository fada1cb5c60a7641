// Gathering the measured timeline of a distributed run on rank 0.
//
// Each rank records the events of the devices it hosts; after the run every rank publishes its
// part (Chrome-trace JSON) in the rendezvous store and rank 0 merges them. Ranks of one machine
// share the monotonic clock, and every rank starts its clock right after a common barrier, so
// the merged events line up.
//
// Thread-safety: call from one thread per rank, after the workers have joined.
#pragma once

#include "core/timeline.hpp"
#include "exec/distributed.hpp"

namespace pipetwin::exec {

// Rank 0 returns the merged timeline; other ranks return their own.
Timeline gather_timeline(Distributed& dist, const Timeline& local);

}  // namespace pipetwin::exec
