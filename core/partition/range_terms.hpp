// Sums over contiguous layer ranges, for the dynamic programs of `optimal` and `pipedream-dp` and
// the memory-constrained fallback of `balance-time` / `balance-size`.
//
// The programs look at every range [begin, end) of the profile order. A RangeScanner holds each
// layer's terms once; a scan fixes `begin` and grows `end` one layer at a time, updating compute,
// memory and the traffic across the range's borders in O(edges of the added layer), so all
// O(L^2) ranges cost O(L^2 + L * E) together. The memory of a range equals
// stage_memory_bytes() of its layers; its borders count skip edges too (a tensor that skips
// stages crosses every border between its producer and its consumer).
//
// With the request's schedule model (PartitionRequest::memory, stage_memory.hpp) a range is also
// priced at a pipeline position, as the memory walk would price it: the working bytes of its
// forward and backward (CostModel::forward_working_bytes, backward_working_bytes) are kept up to
// date as the range grows — in O(1) per layer on a chain, where a backward's peak is a running
// maximum; with skip edges by calling backward_working_bytes on the range.
//
// Needs the profile's layer order to follow the data flow (check_partition_request).
//
// Thread-safety: RangeScanner is immutable after construction; RangeTerms are plain values.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/partition/partitioner.hpp"
#include "core/partition/stage_memory.hpp"

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
  // Working memory per micro-batch (StageCost::forward_bytes, forward_nograd_bytes,
  // backward_bytes); kept only when the request has a schedule model.
  double forward_ws = 0, forward_nograd_ws = 0, backward_ws = 0;
  double forward_peak = 0;  // running max of saved-before + a layer's workspace
  double backward_inner = -std::numeric_limits<double>::infinity();  // chain: see extend()
};

class RangeScanner {
 public:
  explicit RangeScanner(const PartitionRequest& r);

  int num_layers() const { return static_cast<int>(layers_.size()); }
  // The empty range [begin, begin).
  RangeTerms start(int begin) const;
  // Appends layer t.end to the range.
  void extend(RangeTerms& t) const;
  // stage_memory_bytes() of the range's layers (static + in_flight micro-batches).
  double memory(const RangeTerms& t) const;
  // The range as stage `stage` of `num_stages`: the schedule model's peak when the request has
  // one, else memory(t).
  double memory(const RangeTerms& t, int stage, int num_stages) const;
  // The range's byte factors for the schedule model.
  StageBytes bytes(const RangeTerms& t) const;
  // Bytes per sample crossing the border between layer i - 1 and layer i (all edges u -> v with
  // u < i <= v); 0 at i = 0.
  double cut_bytes(int i) const { return cut_[static_cast<size_t>(i)]; }

 private:
  struct Layer {
    double compute_s, static_bytes, saved_bytes, param_bytes, out_bytes;
    std::vector<std::pair<int, double>> in;  // (producer, bytes per sample)
    double workspace = 0;                    // forward workspace per micro-batch
    bool active = true;                      // not frozen
    // Its backward's peak (CostModel::layer_backward_peak) as the stage's last layer, and not.
    double backward_last = 0, backward_inner = 0;
  };
  void extend_working(RangeTerms& t, const Layer& layer) const;

  const PartitionRequest& r_;
  double model_input_bytes_ = 0;
  bool chain_ = true;  // every edge runs from layer l - 1 to layer l
  std::vector<Layer> layers_;
  std::vector<double> cut_;
};

// Splits [0, L) into K ranges minimising the largest cost(range, stage); cost +inf forbids a
// range. Among equal largest costs (1e-12 relative) the smaller sum of squares wins. Returns the
// stage sizes, or an empty vector when no split is allowed. O(K L^2) calls of `cost`.
template <class Cost>
std::vector<int> min_max_split(const RangeScanner& scan, int K, Cost cost) {
  struct Score {
    double worst = std::numeric_limits<double>::infinity();
    double squares = std::numeric_limits<double>::infinity();
  };
  auto better = [](const Score& a, const Score& b) {
    const double tol = 1e-12 * std::max(std::abs(a.worst), std::abs(b.worst));
    if (a.worst < b.worst - tol) return true;
    if (a.worst > b.worst + tol) return false;
    return a.squares < b.squares;
  };
  const int L = scan.num_layers();
  const auto row = static_cast<size_t>(L) + 1;
  std::vector<Score> best((static_cast<size_t>(K) + 1) * row);
  std::vector<int> from(best.size(), -1);
  auto at = [&](int k, int j) { return static_cast<size_t>(k) * row + static_cast<size_t>(j); };
  best[at(0, 0)] = {0, 0};
  for (int i = 0; i < L; ++i) {
    RangeTerms t = scan.start(i);
    for (int j = i + 1; j <= L; ++j) {
      scan.extend(t);
      for (int k = 1; k <= K; ++k) {
        const Score& prev = best[at(k - 1, i)];
        if (std::isinf(prev.worst)) continue;
        const double c = cost(t, k - 1);
        if (std::isinf(c)) continue;
        const Score cand{std::max(prev.worst, c), prev.squares + c * c};
        if (better(cand, best[at(k, j)])) {
          best[at(k, j)] = cand;
          from[at(k, j)] = i;
        }
      }
    }
  }
  if (std::isinf(best[at(K, L)].worst)) return {};
  std::vector<int> sizes(static_cast<size_t>(K));
  for (int k = K, j = L; k > 0; --k) {
    const int i = from[at(k, j)];
    sizes[static_cast<size_t>(k) - 1] = j - i;
    j = i;
  }
  return sizes;
}

// The contiguous split into K stages whose largest memory (RangeScanner::memory at each stage's
// position) is smallest: its largest need and the stage holding it.
struct LeanestSplit {
  std::vector<int> sizes;
  double need_bytes = 0;
  int stage = 0;
};
LeanestSplit leanest_split(const RangeScanner& scan, int K);

}  // namespace pipetwin
