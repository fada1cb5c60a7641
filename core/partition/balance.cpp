// `balance-time` and `balance-size`: torchgpipe's `balance_by_time` and `balance_by_size`.
//
// balance-time weighs each layer by its forward + backward time at the plan's micro-batch size
// (torchgpipe profiles exactly this); balance-size by the memory it needs for training: its
// parameters, gradients and optimizer state plus the activations it saves per micro-batch
// (torchgpipe's parameter size x param_scale + activation size). Both split the weights with the
// block partition of block_partition.hpp.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/block_partition.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"

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
        weights.push_back(r.cost->forward_s(l, r.micro_batch) + r.cost->backward_s(l, r.micro_batch));
      } else {
        weights.push_back(stage_memory_bytes(r, {l}));
      }
    }
    Partition p = contiguous_partition(block_partition(weights, r.num_stages));
    check_memory(r, p, who);
    return p;
  }

 private:
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
