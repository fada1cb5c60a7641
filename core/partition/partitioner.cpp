#include "core/partition/partitioner.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

std::vector<int> Partition::balance() const {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(static_cast<int>(s.size()));
  return out;
}

Partition contiguous_partition(const std::vector<int>& balance) {
  Partition p;
  int next = 0;
  for (int n : balance) {
    std::vector<int> layers;
    for (int i = 0; i < n; ++i) layers.push_back(next++);
    p.stages.push_back(std::move(layers));
  }
  return p;
}

void check_partition_request(const PartitionRequest& r, const std::string& who) {
  if (r.cost == nullptr) throw std::invalid_argument(who + ": no cost model");
  if (r.num_stages < 1) {
    throw InputError(fmt::format("{}: partitions must be positive ({} < 1)", who, r.num_stages));
  }
  const int L = r.cost->num_layers();
  if (L < r.num_stages) {
    throw InputError(fmt::format("{}: model has fewer layers than stages ({} < {})", who, L,
                                 r.num_stages));
  }
  if (!r.cost->graph().index_order_is_topological()) {
    throw InputError(fmt::format("{}: contiguous partitioning needs layers in data-flow order "
                                 "(the profile has an edge to an earlier layer)",
                                 who));
  }
}

double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers) {
  const StageCost c = r.cost->stage_cost(layers, r.micro_batch);
  return c.static_bytes() + r.in_flight * (c.input_bytes + c.saved_bytes);
}

void check_memory(const PartitionRequest& r, const Partition& p, const std::string& who) {
  if (r.memory_limit_bytes <= 0) return;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const double need = stage_memory_bytes(r, p.stages[s]);
    if (need > r.memory_limit_bytes) {
      throw InputError(fmt::format("{}: stage {} needs {:.2f} GiB, over the {:.2f} GiB limit", who,
                                   s, need / kGiB, r.memory_limit_bytes / kGiB));
    }
  }
}

}  // namespace pipetwin
