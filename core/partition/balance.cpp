// `balance-time` and `balance-size`: torchgpipe's `balance_by_time` and `balance_by_size`.
//
// balance-time weighs each layer by its forward + backward time at the plan's micro-batch size
// (torchgpipe profiles exactly this); balance-size by the memory it needs for training: its
// parameters, gradients and optimizer state plus the activations it saves per micro-batch
// (torchgpipe's parameter size x param_scale + activation size). Both split the weights with the
// block partition of block_partition.hpp.
//
// Memory. torchgpipe's balance knows no limit. Ours keeps the block partition when it fits the
// request's limit (every stage priced at its position, partitioner.hpp); when it does not, it
// takes the split whose largest block weight is smallest among the splits that fit (the same
// balance criterion, solved exactly under the constraint by range_terms.hpp's min_max_split), and
// when no split fits throws NoFitError with the leanest split's need.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/block_partition.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"
#include "core/partition/range_terms.hpp"

namespace pipetwin {

namespace {

class Balance : public Partitioner {
 public:
  explicit Balance(bool by_time) : by_time_(by_time) {}
  std::string name() const override { return by_time_ ? "balance-time" : "balance-size"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner " + name();
    check_partition_request(r, who);
    std::vector<double> weights;
    for (int l = 0; l < r.cost->num_layers(); ++l) {
      if (by_time_) {
        weights.push_back(r.cost->forward_s(l, r.micro_batch) +
                          r.cost->backward_s(l, r.micro_batch));
      } else {
        weights.push_back(stage_memory_bytes(r, {l}));
      }
    }
    Partition p = contiguous_partition(block_partition(weights, r.num_stages));
    if (fits_memory(r, p)) return p;
    return constrained(r, weights, p, who);
  }

 private:
  // The min-max split of `weights` among the splits whose stages fit; `blocked` is the block
  // partition that did not.
  static Partition constrained(const PartitionRequest& r, const std::vector<double>& weights,
                               const Partition& blocked, const std::string& who) {
    std::vector<double> prefix{0};
    for (double w : weights) prefix.push_back(prefix.back() + w);
    const RangeScanner scan(r);
    const int K = r.num_stages;
    RangeFits range_fits(scan, K, r.memory_limit_bytes);
    const auto sizes = min_max_split(
        scan, K,
        [&](const RangeTerms& t, int) {
          return prefix[static_cast<size_t>(t.end)] - prefix[static_cast<size_t>(t.begin)];
        },
        [&](const RangeTerms& t, int stage) { return range_fits(t, stage); });
    if (!sizes.empty()) return contiguous_partition(sizes);
    try {
      check_memory(r, blocked, who);
    } catch (const NoFitError& e) {
      if (!r.explain_no_fit) throw;
      const LeanestSplit lean = leanest_split(scan, K);
      throw NoFitError(fmt::format("{}; no split into {} stages fits, the leanest needs {:.2f} "
                                   "GiB on stage {}",
                                   e.what(), K, lean.need_bytes / kGiB, lean.stage),
                       lean.need_bytes, r.memory_limit_bytes,
                       fmt::format("on stage {}", lean.stage));
    }
    throw std::logic_error(who + ": the block partition fits after all");
  }

  bool by_time_;
};

}  // namespace

std::unique_ptr<Partitioner> make_balance_time_partitioner() {
  return std::make_unique<Balance>(true);
}
std::unique_ptr<Partitioner> make_balance_size_partitioner() {
  return std::make_unique<Balance>(false);
}

}  // namespace pipetwin
