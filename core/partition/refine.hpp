// Step 3 of FTPipe's Mixed-pipe, "Refinement" (FTPipe Section 4.1.3): "We perform fine-grain
// tuning of the load balance achieved in Step 2. First, the L stages are un-coarsened into their
// basic blocks. Then, within each pipeline stage, we greedily find blocks which, if moved to an
// adjacent stage in the pipeline, can improve the throughput, or lower communication or improve
// load balance (given also the memory constraints)."
//
// Basic blocks are layers. A move takes a layer out of a stage with more than one layer into a
// stage it exchanges a tensor with ("adjacent"), if the target device stays within the memory
// limit (and the source device too, or its memory at least does not grow — so a start over the
// limit can be repaired) and the stage graph stays acyclic. Moves are judged by the triple
// (bottleneck, load balance, communication): the slowest device's FTPipe period (Equation 1, the
// same figure as bottleneck_time()), then the sum of squared device periods, then the bytes
// crossing devices — a move is taken when it lowers the triple lexicographically, first improving
// move first, until a pass over all layers finds none (or 64 passes). Each move is evaluated
// incrementally: only the stages and edges of the moved layer change, and the device periods are
// recomputed from a stage-by-stage byte matrix (O(S^2) for S stages).
//
// Thread-safety: pure function.
#pragma once

#include "core/partition/partitioner.hpp"

namespace pipetwin {

// Refines `p` (stages with a device map) and returns it with stages renumbered topologically.
Partition refine_partition(const PartitionRequest& r, const Partition& p);

}  // namespace pipetwin
