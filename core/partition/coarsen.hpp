// Step 1 of FTPipe's Mixed-pipe, "Coarsening: create L pipeline stages" (FTPipe Section 4.1.1),
// as passes over a CoarseGraph. Every merge keeps the graph acyclic (CoarseGraph::can_contract)
// and every block within the memory limit ("to L non-input stages where each stage fits in GPU
// memory").
//
//   remove_constants           "First, all constants and inputs are removed, later adding and
//                              duplicating them if needed". A layer graph has no constant nodes
//                              as such; we treat a layer with no inputs, no compute and no
//                              parameters as one, and fold it into its lightest consumer (a
//                              block cannot be duplicated here, so its other consumers receive
//                              it as a tensor).
//   merge_zero_weight          "Second, nodes with a weight of 0 (typically CPU operations) are
//                              eliminated by merging them with their smallest neighbor
//                              (computation load-wise)."
//   merge_heavy_communication  "Third, nodes for which the communication volume is above the
//                              99th percentile are merged with their neighbors" — across their
//                              heaviest edge first (nearest-rank percentile, so graphs under 100
//                              nodes have nothing strictly above it).
//   coarsen_by_type            "large groups of similar nodes can be naturally merged, following
//                              user high-level abstractions": adjacent blocks of the same scope
//                              (layer name up to the last '.') or the same kind merge while the
//                              block stays under a compute cap and a memory cap. The caps are our
//                              choice: the average compute of L blocks, and the memory share of
//                              one block when a device holds ceil(L / P) of them — so the blocks
//                              remain packable onto P devices in step 2.
//   coarsen_around_centers     "assign L 'center blocks' and repeatedly merge their neighbors
//                              with them (obeying the memory constraint) in round-robin until no
//                              non-center block is left". Each round, the lighter centres pick
//                              first, and a centre already at the average compute waits while
//                              lighter ones still can grow; a centre takes the neighbour it
//                              exchanges the most bytes with (the merge saves that
//                              communication). A block no centre can take (memory, cycles)
//                              becomes a centre itself, so the result may have more than L blocks.
//                              "This procedure may repeat several times with different choices of
//                              centers": CentreChoice picks them spread evenly over the
//                              cumulative compute in topological order, or the heaviest blocks.
//
// Thread-safety: functions of their graph argument only.
#pragma once

#include "core/partition/coarse_graph.hpp"

namespace pipetwin {

enum class CentreChoice { kSpread, kHeaviest };

void remove_constants(CoarseGraph& g);
void merge_zero_weight(CoarseGraph& g);
void merge_heavy_communication(CoarseGraph& g, double percentile = 0.99);
void coarsen_by_type(CoarseGraph& g, double compute_cap_s, double memory_cap_bytes);
void coarsen_around_centers(CoarseGraph& g, int L, CentreChoice choice);

}  // namespace pipetwin
