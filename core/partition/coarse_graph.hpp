// CoarseGraph: the model graph contracted into blocks of layers, kept acyclic under contraction
// with a dynamic topological order — the data structure of FTPipe's Mixed-pipe coarsening
// (Section 4.1.1: "The graph is coarsened by contracting edges and merging their nodes ...
// Throughout the process, a dynamic topological sort [40] is maintained to ensure that edge
// contractions do not create cycles").
//
// Every block has a position in a topological order. Contracting an edge u -> v (u before v)
// creates a cycle exactly when another path leads from u to v; any such path runs through blocks
// positioned between them, so the search is bounded to that window, as in Pearce and Kelly's
// dynamic topological sort [40]. After the contraction the window is reordered in place: the
// blocks of the window reachable from u move after the merged block, the others stay before it,
// each group in its old order — a valid order again (an edge from the first group into the
// second is fine, none can run back, or it would have made a path from u to v).
//
// Blocks keep what the partitioner needs: compute (forward + backward at the request's micro-
// batch), the memory terms of stage_memory_bytes() (static bytes, saved activations, input bytes
// from other blocks and the model input, activations counted activation_sets() times), the layer
// kind and scope (name up to the last '.'), and the bytes per sample on the edges between blocks.
//
// Thread-safety: not thread-safe (searches use scratch space); one graph per partitioner call.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/partition/partitioner.hpp"

namespace pipetwin {

class CoarseGraph {
 public:
  struct Block {
    std::vector<int> layers;
    double compute_s = 0;
    double static_bytes = 0;
    double saved_bytes = 0;         // per micro-batch
    double model_input_bytes = 0;   // per micro-batch, when the block holds layer 0
    std::string kind, scope;        // empty once blocks of different kinds merge
    std::map<int, double> in, out;  // neighbour block -> bytes per sample
    bool alive = true;
  };

  // One block per layer.
  explicit CoarseGraph(const PartitionRequest& r);

  const Block& block(int b) const { return blocks_[static_cast<size_t>(b)]; }
  int num_blocks() const { return alive_; }
  // Alive blocks in the current topological order.
  std::vector<int> blocks() const;
  int position(int b) const { return ord_[static_cast<size_t>(b)]; }
  std::vector<int> neighbours(int b) const;
  double bytes_between(int a, int b) const;  // per sample, both directions
  double total_compute() const { return total_compute_; }

  // stage_memory_bytes() of a block, and of two blocks merged.
  double memory(int b) const;
  double merged_memory(int a, int b) const;
  bool fits(double bytes) const { return limit_ <= 0 || bytes <= limit_; }

  // a and b are adjacent and merging them keeps the graph acyclic.
  bool can_contract(int a, int b) const;
  // Merges `drop` into `keep` (can_contract must hold); returns `keep`.
  int contract(int keep, int drop);

 private:
  // Blocks strictly between positions of u and v reachable from u (not through v); sets
  // `hit` when v is reachable other than by the direct edge.
  std::vector<int> window_reach(int u, int v, bool& hit) const;
  void merge_into(int keep, int drop);

  const PartitionRequest& r_;
  double limit_ = 0;
  double sets_ = 1;  // activation_sets(): micro-batches of activations a block keeps
  double total_compute_ = 0;
  std::vector<Block> blocks_;
  std::vector<int> ord_;  // block -> position
  std::vector<int> at_;   // position -> block, -1 for a slot freed by a contraction
  int alive_ = 0;
  mutable std::vector<unsigned> seen_;  // search stamps
  mutable unsigned stamp_ = 0;
};

}  // namespace pipetwin
