// StageGraph: which tensors each pipeline stage receives and sends, for models whose layers are
// a chain with cross-layer skip connections (models/layered_model.hpp, Layer::skip_from).
//
// torchgpipe Section 3.3.1 ("skip connections"): a tensor that skips stages should not be relayed
// by every stage in between, it goes from the stage that stashes it straight to the stage that
// pops it ("portals"). Here a tensor is named by its producer — a model layer, or kModelInput —
// and travels once on the stage edge (producer's stage -> consumer's stage). One stage edge
// carries every tensor that crosses it, as one message (pack_bundle): a chain model's edges
// carry one tensor each, exactly as before; a U-Net stage may receive its predecessor's output
// and an encoder feature from three stages back, and the encoder's stage sends that feature on
// its own edge to the decoder's stage, not through the stages between.
//
// A stage's inputs are the producers its layers read but it does not compute; its outputs are
// its layers whose output a layer of another stage reads; gradients flow back on the same edges
// (the gradient of every output, summed over the stages that read it, enters the stage's
// backward; the gradient of every input leaves it). Stages hold any set of layers (non-contiguous
// ones included, as FTPipe's Mixed-pipe makes), as long as the stage graph is acyclic, which the
// plan checks.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace pipetwin::exec {

constexpr int kModelInput = -1;  // the producer of the model's input

struct StageIO {
  std::vector<int> inputs;   // producers read but not computed, ascending (kModelInput first)
  std::vector<int> outputs;  // layers of the stage read by another stage, ascending
  bool first = false;        // holds model layer 0 (reads the model input)
  bool last = false;         // holds the model's last layer (computes the loss)
};

class StageGraph {
 public:
  // `skip_from`: per model layer, the layer whose output is its second input, or -1.
  // `stage_layers`: per stage, its model layers; every layer in exactly one stage.
  // Throws std::invalid_argument on a layer in no stage or two, or a skip that is not backwards.
  StageGraph(std::vector<int> skip_from, const std::vector<std::vector<int>>& stage_layers);

  int num_stages() const { return static_cast<int>(io_.size()); }
  const StageIO& io(int stage) const { return io_.at(static_cast<size_t>(stage)); }
  int stage_of(int layer) const { return stage_of_.at(static_cast<size_t>(layer)); }
  // Producers whose tensors travel on stage edge from -> to, ascending; empty: no such edge.
  const std::vector<int>& tensors(int from, int to) const;
  // The stage edges (from, to), ascending.
  std::vector<std::pair<int, int>> edges() const;
  // The stages in an order where each comes after every stage it reads from (ties: lower index
  // first). std::invalid_argument if the stage graph has a cycle.
  std::vector<int> data_order() const;

 private:
  std::vector<int> skip_from_;
  std::vector<int> stage_of_;
  std::vector<StageIO> io_;
  std::map<std::pair<int, int>, std::vector<int>> edge_tensors_;
};

}  // namespace pipetwin::exec
