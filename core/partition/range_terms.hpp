// Sums over contiguous layer ranges, for the dynamic programs of `optimal` and `pipedream-dp`.
//
// Both programs look at every range [begin, end) of the profile order. A RangeScanner holds each
// layer's terms once; a scan fixes `begin` and grows `end` one layer at a time, updating compute,
// memory and the traffic across the range's borders in O(edges of the added layer), so all
// O(L^2) ranges cost O(L^2 + L * E) together. The memory of a range equals
// stage_memory_bytes() of its layers; its borders count skip edges too (a tensor that skips
// stages crosses every border between its producer and its consumer).
//
// Needs the profile's layer order to follow the data flow (check_partition_request).
//
// Thread-safety: RangeScanner is immutable after construction; RangeTerms are plain values.
#pragma once

#include <vector>

#include "core/partition/partitioner.hpp"

namespace pipetwin {

struct RangeTerms {
  int begin = 0;
  int end = 0;                   // exclusive
  double compute_s = 0;          // forward + backward at the request's micro-batch
  double static_bytes = 0;       // parameters, gradients, optimizer state, frozen layers
  double saved_bytes = 0;        // activations kept for backward, per micro-batch
  double param_bytes = 0;        // parameters of active layers (what an all-reduce moves)
  double in_bytes = 0;           // per sample, from layers before `begin`
  double out_bytes = 0;          // per sample, to layers at or after `end`
  double model_input_bytes = 0;  // per micro-batch, when the range holds layer 0
};

class RangeScanner {
 public:
  explicit RangeScanner(const PartitionRequest& r);

  int num_layers() const { return static_cast<int>(layers_.size()); }
  // The empty range [begin, begin).
  RangeTerms start(int begin) const;
  // Appends layer t.end to the range.
  void extend(RangeTerms& t) const;
  // stage_memory_bytes() of the range's layers.
  double memory(const RangeTerms& t) const;
  // Bytes per sample crossing the border between layer i - 1 and layer i (all edges u -> v with
  // u < i <= v); 0 at i = 0.
  double cut_bytes(int i) const { return cut_[static_cast<size_t>(i)]; }

 private:
  struct Layer {
    double compute_s, static_bytes, saved_bytes, param_bytes, out_bytes;
    std::vector<std::pair<int, double>> in;  // (producer, bytes per sample)
  };
  const PartitionRequest& r_;
  double model_input_bytes_ = 0;
  std::vector<Layer> layers_;
  std::vector<double> cut_;
};

}  // namespace pipetwin
