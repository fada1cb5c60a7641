// `optimal`: the exact min–max contiguous partition, the reference the other partitioners are
// measured against.
//
// Dynamic programming over prefixes: best[k][j] is the smallest possible bottleneck when layers
// [0, j) form k stages, best[k][j] = min over i of max(best[k-1][i], T(i, j, k-1)), where T is
// FTPipe's stage period (Equation 1, stage_period()) of the range [i, j) as stage k - 1 on device
// k - 1: its forward + backward time, and its activations arriving from device k - 2 and gradients
// from device k over the cluster's links. Ranges over the memory limit are not allowed, each
// priced as stage k - 1 of K (with the request's schedule model, the memory walk's peak there:
// under 1F1B stage k keeps K - k micro-batches, so a range may fit late in the pipeline and not
// early). All O(L^2) ranges are scanned once with their sums kept incrementally
// (range_terms.hpp), so the program costs O(K L^2 + L E).
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
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"
#include "core/partition/range_terms.hpp"

namespace pipetwin {

namespace {

class Optimal : public Partitioner {
 public:
  std::string name() const override { return "optimal"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner optimal";
    check_partition_request(r, who);
    const RangeScanner scan(r);
    const CostModel& cm = *r.cost;
    const double b = r.micro_batch;
    const int K = r.num_stages;
    // The transfers of a range depend on its border bytes and its stage: on a chain a range's
    // input on its first layer, its output on its last, so each is kept per stage (and per last
    // layer) and priced again only when its bytes differ.
    Memo fwd_memo(K), bwd_memo(K * (scan.num_layers() + 1));
    auto period = [&](const RangeTerms& t, int stage) {
      const double in = std::max(0.0, t.in_bytes) * b, out = std::max(0.0, t.out_bytes) * b;
      const double fwd =
          in > 0 ? fwd_memo.get(stage, in, [&] { return cm.transfer_s(in, stage - 1, stage); }) : 0;
      const double bwd = out > 0
                             ? bwd_memo.get(t.end * K + stage, out,
                                            [&] { return cm.transfer_s(out, stage, stage + 1); })
                             : 0;
      return stage_period(t.compute_s, fwd, bwd);
    };
    // The memory walk's peak is the costly half: asked only of ranges that would improve.
    RangeFits range_fits(scan, K, r.memory_limit_bytes);
    auto fits = [&](const RangeTerms& t, int stage) {
      return r.memory_limit_bytes <= 0 || range_fits(t, stage);
    };
    const std::vector<int> sizes = min_max_split(scan, r.num_stages, period, fits);
    if (sizes.empty()) throw_no_fit(r, scan, who);
    Partition p = contiguous_partition(sizes);
    check_memory(r, p, who);
    return p;
  }

 private:
  // The last value priced in each slot and the bytes it was priced for.
  class Memo {
   public:
    explicit Memo(int slots) : bytes_(static_cast<size_t>(slots), -1.0), value_(bytes_.size()) {}
    template <class Price>
    double get(int slot, double bytes, Price price) {
      const auto i = static_cast<size_t>(slot);
      if (bytes_[i] != bytes) {
        bytes_[i] = bytes;
        value_[i] = price();
      }
      return value_[i];
    }

   private:
    std::vector<double> bytes_, value_;
  };

  // No split fits: report the split with the smallest largest stage memory, and its stage.
  [[noreturn]] static void throw_no_fit(const PartitionRequest& r, const RangeScanner& scan,
                                        const std::string& who) {
    if (!r.explain_no_fit) {
      throw NoFitError(
          fmt::format("{}: no split into {} contiguous stages fits the {:.2f} GiB limit", who,
                      r.num_stages, r.memory_limit_bytes / kGiB),
          0, r.memory_limit_bytes, "");
    }
    const LeanestSplit lean = leanest_split(scan, r.num_stages);
    throw NoFitError(
        fmt::format("{}: no split into {} contiguous stages fits the {:.2f} GiB limit; the best "
                    "still needs {:.2f} GiB on stage {}",
                    who, r.num_stages, r.memory_limit_bytes / kGiB, lean.need_bytes / kGiB,
                    lean.stage),
        lean.need_bytes, r.memory_limit_bytes, fmt::format("on stage {}", lean.stage));
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_optimal_partitioner() {
  return std::make_unique<Optimal>();
}

}  // namespace pipetwin
