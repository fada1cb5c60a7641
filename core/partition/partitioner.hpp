// Partitioners: split a model's layers into pipeline stages.
//
// All partitioners sit behind one interface and one registry (`make_partitioner(name)`); each
// lives in its own file. A Partition lists the layers of every stage; contiguous partitioners
// return consecutive layer ranges in model order. Partitioners receive the cost model so they can
// weigh layers by time (at the plan's micro-batch size) or by memory, and a per-stage memory
// limit they must respect (0: none); one that cannot meet it throws InputError saying which stage
// needs how much.
//
// Thread-safety: partitioners are stateless; partition() may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/cost_model.hpp"

namespace pipetwin {

struct PartitionRequest {
  const CostModel* cost = nullptr;
  int num_stages = 1;
  double micro_batch = 1;         // samples per micro-batch, for time and activation weights
  double memory_limit_bytes = 0;  // per stage; 0 = unlimited
  int in_flight = 1;              // micro-batches whose activations a stage holds at once
};

struct Partition {
  std::vector<std::vector<int>> stages;  // layers of each stage
  // Sizes of contiguous stages ("balance" in torchgpipe's terms).
  std::vector<int> balance() const;
};

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual std::string name() const = 0;
  virtual Partition partition(const PartitionRequest& request) const = 0;
};

std::unique_ptr<Partitioner> make_partitioner(const std::string& name);
std::vector<std::string> partitioner_names();

// Helpers shared by partitioners.
Partition contiguous_partition(const std::vector<int>& balance);
void check_partition_request(const PartitionRequest& r, const std::string& who);
// Memory one stage needs: static bytes plus `in_flight` micro-batches of activations.
double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers);
// Throws InputError naming the first stage over the request's memory limit.
void check_memory(const PartitionRequest& r, const Partition& p, const std::string& who);

}  // namespace pipetwin
