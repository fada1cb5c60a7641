// `uniform`: the same number of layers per stage, the extra layers going to the first stages.
//
// The EPFL report's partition: "ResNet20 ... 11 total layers ... If the number of devices is 3,
// device 1 will have layer from 1 to 4, device 2 will have layer from 5 to 8 and device 3 will
// have layer from 9 to 11" — that is 4, 4, 3: the report gives the extra layers to the first
// stages, and so do we.
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"

namespace pipetwin {

namespace {

class Uniform : public Partitioner {
 public:
  std::string name() const override { return "uniform"; }
  Partition partition(const PartitionRequest& r) const override {
    check_partition_request(r, "partitioner uniform");
    const int L = r.cost->num_layers(), K = r.num_stages;
    std::vector<int> balance;
    for (int s = 0; s < K; ++s) balance.push_back(L / K + (s < L % K ? 1 : 0));
    Partition p = contiguous_partition(balance);
    check_memory(r, p, "partitioner uniform");
    return p;
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_uniform_partitioner() { return std::make_unique<Uniform>(); }

}  // namespace pipetwin
