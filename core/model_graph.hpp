// ModelGraph: the model as a dataflow graph on Boost.Graph.
//
// Vertices are layers (profile order), edges are the tensors flowing between them with their
// size per sample; a skip connection is simply an edge between non-adjacent layers (torchgpipe
// Section 3.3). Partitioners and the schedule's transfer sizes read the graph: the bytes a stage
// sends to another stage are the sum over the tensors that cross from one to the other — a
// layer's output travels once to each stage that reads it, however many of that stage's layers
// read it (exec/runtime/stage_io.hpp) — and a tensor that skips stages travels once, straight from
// producer to consumer (torchgpipe's portals).
//
// Thread-safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "core/profile.hpp"

namespace pipetwin {

class ModelGraph {
 public:
  struct Layer {
    std::string name;
    std::string kind;
  };
  struct Tensor {
    double bytes_per_sample = 0;
  };
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Layer, Tensor>;

  // Builds and validates the graph of a profile; `origin` names the file in errors. A cycle is an
  // InputError naming a layer on it (the lowest one).
  static ModelGraph from_profile(const Profile& profile, const std::string& origin = "profile");

  int num_layers() const { return static_cast<int>(boost::num_vertices(graph_)); }
  const Graph& graph() const { return graph_; }

  // Layers in a topological order (ties broken by layer index, so the result is deterministic).
  const std::vector<int>& topological_order() const { return topo_; }
  // True when every edge goes from a lower to a higher layer index, so any contiguous range
  // partition of the profile order is a valid pipeline.
  bool index_order_is_topological() const { return index_order_topological_; }

  struct Edge {
    int from, to;
    double bytes_per_sample;
  };
  std::vector<Edge> edges() const;
  std::vector<Edge> in_edges(int layer) const;
  std::vector<Edge> out_edges(int layer) const;

  // Bytes per sample on each stage edge (from, to), from != to, given the stage of every layer:
  // per producer and reading stage, its output once. Edges of one producer name one tensor (every
  // zoo model, every profile pipetwin writes); should a hand-written profile give them different
  // sizes, the largest is taken.
  std::map<std::pair<int, int>, double> stage_edge_bytes(const std::vector<int>& stage_of) const;

 private:
  Graph graph_;
  std::vector<int> topo_;
  bool index_order_topological_ = true;
};

}  // namespace pipetwin
