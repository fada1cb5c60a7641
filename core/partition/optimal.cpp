// `optimal`: the exact min–max contiguous partition, the reference the other partitioners are
// measured against.
//
// Dynamic programming over prefixes: best[k][j] is the smallest possible bottleneck when layers
// [0, j) form k stages, best[k][j] = min over i of max(best[k-1][i], T(i, j, k-1)), where T is
// FTPipe's stage period (Equation 1, stage_period()) of the range [i, j) as stage k - 1 on device
// k - 1: its forward + backward time, and its activations arriving from device k - 2 and gradients
// from device k over the cluster's links. Ranges over the memory limit are not allowed. All
// O(L^2) ranges are scanned once with their sums kept incrementally (range_terms.hpp), so the
// program costs O(K L^2 + L E).
//
// It is exact for bottleneck_time() whenever a stage receives from one stage only (chains), or
// all links of the pipeline are alike and latency is negligible: with skip connections a stage may
// receive from several stages, which bottleneck_time charges one latency each and from each
// producer's own link, while the program charges one message from the neighbour. We accept that
// small gap rather than a program over all producer placements.
//
// Among splits with the same bottleneck (within 1e-12 relative) it keeps the one with the smaller
// sum of squared stage periods — a better balanced pipeline — a tie-break that is a heuristic
// (lexicographic pairs do not compose exactly), while the bottleneck itself stays exact.
//
// Thread-safety: stateless.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"
#include "core/partition/range_terms.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Score {
  double worst = kInf;
  double squares = kInf;
};

bool better(const Score& a, const Score& b) {
  const double tol = 1e-12 * std::max(std::abs(a.worst), std::abs(b.worst));
  if (a.worst < b.worst - tol) return true;
  if (a.worst > b.worst + tol) return false;
  return a.squares < b.squares;
}

// Splits [0, L) into K ranges minimising the largest cost(range, stage); cost +inf forbids a
// range. Returns the stage sizes, or an empty vector when no split is allowed.
template <class Cost>
std::vector<int> min_max_split(const RangeScanner& scan, int K, Cost cost) {
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
        if (prev.worst == kInf) continue;
        const double c = cost(t, k - 1);
        if (c == kInf) continue;
        const Score cand{std::max(prev.worst, c), prev.squares + c * c};
        if (better(cand, best[at(k, j)])) {
          best[at(k, j)] = cand;
          from[at(k, j)] = i;
        }
      }
    }
  }
  if (best[at(K, L)].worst == kInf) return {};
  std::vector<int> sizes(static_cast<size_t>(K));
  for (int k = K, j = L; k > 0; --k) {
    const int i = from[at(k, j)];
    sizes[static_cast<size_t>(k) - 1] = j - i;
    j = i;
  }
  return sizes;
}

class Optimal : public Partitioner {
 public:
  std::string name() const override { return "optimal"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner optimal";
    check_partition_request(r, who);
    const RangeScanner scan(r);
    const CostModel& cm = *r.cost;
    const double b = r.micro_batch;
    auto period = [&](const RangeTerms& t, int stage) {
      if (r.memory_limit_bytes > 0 && scan.memory(t) > r.memory_limit_bytes) return kInf;
      const double in = std::max(0.0, t.in_bytes) * b, out = std::max(0.0, t.out_bytes) * b;
      const double fwd = in > 0 ? cm.transfer_s(in, stage - 1, stage) : 0;
      const double bwd = out > 0 ? cm.transfer_s(out, stage, stage + 1) : 0;
      return stage_period(t.compute_s, fwd, bwd);
    };
    const std::vector<int> sizes = min_max_split(scan, r.num_stages, period);
    if (sizes.empty()) throw_no_fit(r, scan, who);
    Partition p = contiguous_partition(sizes);
    check_memory(r, p, who);
    return p;
  }

 private:
  // No split fits: report the split with the smallest largest stage memory, and its stage.
  [[noreturn]] static void throw_no_fit(const PartitionRequest& r, const RangeScanner& scan,
                                        const std::string& who) {
    const auto sizes =
        min_max_split(scan, r.num_stages, [&](const RangeTerms& t, int) { return scan.memory(t); });
    const Partition p = contiguous_partition(sizes);
    int worst = 0;
    double need = 0;
    for (int s = 0; s < p.num_stages(); ++s) {
      const double m = stage_memory_bytes(r, p.stages[static_cast<size_t>(s)]);
      if (m > need) {
        need = m;
        worst = s;
      }
    }
    throw InputError(fmt::format(
        "{}: no split into {} contiguous stages fits the {:.2f} GiB limit; the best still needs "
        "{:.2f} GiB on stage {}",
        who, r.num_stages, r.memory_limit_bytes / kGiB, need / kGiB, worst));
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_optimal_partitioner() {
  return std::make_unique<Optimal>();
}

}  // namespace pipetwin
