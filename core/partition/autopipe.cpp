// `autopipe`: PipeTransformer's balanced partition (Section 3.2.1, Algorithm 1's m_partition and
// load_balance; core/partition/autopipe_balance.hpp) behind the partitioner interface.
//
// The cost model's frozen layers (CostOptions::frozen_layers, a prefix) form F_frozen on the
// first stage, weighted by its lambda_frozen; every other layer is one sub-layer of F_pipe,
// balanced by parameter size over the requested number of stages. Compression (choosing K) is
// AutoPipe's business, not a partitioner's: this always returns exactly num_stages stages.
#include <fmt/format.h>

#include "core/partition/autopipe_balance.hpp"
#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"

namespace pipetwin {

namespace {

class AutoPipePartitioner : public Partitioner {
 public:
  std::string name() const override { return "autopipe"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner autopipe";
    check_partition_request(r, who);
    const CostModel& cm = *r.cost;
    const elastic::SubLayers sub =
        elastic::m_partition(elastic::layer_sizes(cm.profile()), cm.options().frozen_layers);
    const int active = static_cast<int>(sub.layers.size());
    if (active < r.num_stages) {
      throw InputError(
          fmt::format("{}: {} active layers cannot fill {} stages", who, active, r.num_stages));
    }
    Partition p;
    p.stages = elastic::layout_pipeline(sub, r.num_stages, cm.options().lambda_frozen).stages;
    check_memory(r, p, who);
    return p;
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_autopipe_partitioner() {
  return std::make_unique<AutoPipePartitioner>();
}

}  // namespace pipetwin
