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
#include <cstdint>
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
  // !(memory(t, stage, num_stages) > limit), mostly without pricing every point of the schedule
  // model (HeldSet::within).
  bool fits(const RangeTerms& t, int stage, int num_stages, double limit) const;
  // The range's byte factors for the schedule model.
  StageBytes bytes(const RangeTerms& t) const;
  // The request's schedule model; null: none.
  const StageMemory* model() const { return r_.memory; }
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

// RangeScanner::fits() of one range at every stage position, asked position by position as
// min_max_split() asks: the range's byte factors are priced once, and where a bound over all
// positions decides (the schedule model's every point at its most within the limit, or its
// fewest counts over the limit: StageMemory::any_position, lower_everywhere), it decides every
// position at once. A partitioner prices O(K L^2) ranges this way instead of walking each
// position's points.
//
// Thread-safety: not thread-safe (it keeps the range last asked); one per partitioner call.
class RangeFits {
 public:
  RangeFits(const RangeScanner& scan, int num_stages, double limit)
      : scan_(scan), stages_(num_stages), limit_(limit) {}
  // scan.fits(t, stage, num_stages, limit).
  bool operator()(const RangeTerms& t, int stage);

 private:
  enum class Verdict : uint8_t { kEvery, kNone, kEach };
  const RangeScanner& scan_;
  int stages_;
  double limit_;
  std::vector<const HeldSet*> held_;   // each position's points, looked up on first use
  const HeldSet* any_ = nullptr;       // every position's
  const HeldCounts* floor_ = nullptr;  // StageMemory::floor
  int begin_ = -1, end_ = -1;          // the range priced last
  PricedBytes priced_;
  Verdict verdict_ = Verdict::kEach;
};

// Splits [0, L) into K ranges minimising the largest cost(range, stage); cost +inf forbids a
// range. Among equal largest costs (1e-12 relative) the smaller sum of squares wins. Returns the
// stage sizes, or an empty vector when no split is allowed. O(K L^2) calls of `cost` at most.
//
// `allowed(range, stage)`, when given, forbids a range too (false: as cost +inf); the program asks
// it only for a range that would improve its table, so a costly check (a memory walk's peak)
// is skipped for the many that would not. Neither is asked where even a cost of 0 could not
// improve: a candidate's largest cost and sum of squares only grow with its last range's cost
// (both start at 0), so it is never better than its prefix. Nor where the stages after it could
// not each get a layer. The answer is the full program's.
template <class Cost, class Allowed>
std::vector<int> min_max_split(const RangeScanner& scan, int K, Cost cost, Allowed allowed) {
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
      // Stage k - 1 ending at j leaves L - j layers to K - k stages: a larger j is on no split.
      for (int k = std::max(1, K - (L - j)); k <= K; ++k) {
        const Score& prev = best[at(k - 1, i)];
        if (std::isinf(prev.worst)) continue;
        Score& here = best[at(k, j)];
        if (!better(prev, here)) continue;  // no cost of this range can make it better
        const double c = cost(t, k - 1);
        if (std::isinf(c)) continue;
        const Score cand{std::max(prev.worst, c), prev.squares + c * c};
        if (better(cand, here) && allowed(t, k - 1)) {
          here = cand;
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

template <class Cost>
std::vector<int> min_max_split(const RangeScanner& scan, int K, Cost cost) {
  return min_max_split(scan, K, cost, [](const RangeTerms&, int) { return true; });
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
