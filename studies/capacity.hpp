// Capacity planning (`pipetwin capacity`): which cluster of a priced catalog trains a model
// fastest, and which cheapest?
//
// For every cluster the search covers what `pipetwin plan` accepts (studies/capacity_space.hpp):
// pipeline length K from 1 to the device count, data-parallel width dp (K x dp <= devices, dp
// dividing the global batch), every M from K up to the per-replica batch (micro-batch 1) that the
// schedule accepts, the checkpoint modes (none, except_last, always), the memory-aware
// partitioners (default optimal and balance-time, balance-size on request: they return a partition
// that fits where one exists, docs/partition-memory.md), the schedules (default the synchronous
// ones users pick: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv and dualpipev; the asynchronous
// ones change what is trained, not only how fast) and their virtual stages (interleaved-1f1b with 2
// and, where the model has 4K layers, 4 chunks per device; zbv and dualpipev their V of 2). Each
// layout is planned memory-aware and simulated; lower bounds on memory and time skip the layouts
// that cannot fit or cannot win (studies/capacity_search.hpp, studies/capacity_bounds.hpp), so
// the answer is the exhaustive search's (tests/capacity_property_test.cpp checks that).
//
// For a cluster it reports whether any plan fits — if none does, the leanest layout tried, the
// memory that runs out, what it needs, what it has — and two plans: the fastest (least time for
// the requested samples; within `budget` when one is given) and the cheapest (least cost; ties go
// to the faster). Time per epoch = ceil(samples / batch) optimizer steps x the simulated iteration
// time; total time = epochs x that; cost = total hours x GPUs used x price per GPU-hour. Charging
// only the GPUs a plan uses assumes GPUs can be rented in those counts (1/2/4/8-GPU instances); a
// user renting whole nodes edits the price to node price / GPUs. Clusters are ranked by the
// fastest plan's time and by the cheapest plan's cost.
//
// Prices come from hardware/prices.json ("pipetwin.prices" v1), not from the cluster files: the
// cluster format states hardware facts and is validated strictly, while prices are the user's
// own (quotes, reserved rates, currency) and change weekly; one file labelled "example prices,
// edit them" keeps them in one place to edit.
//
// Thread-safety: plan_capacity() uses its own threads over read-only inputs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "core/plan.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/model_source.hpp"
#include "studies/capacity_search.hpp"

namespace pipetwin::sim {

struct PriceList {
  std::string currency = "USD";
  std::string note;
  std::map<std::string, double> per_gpu_hour;  // cluster name -> price per GPU-hour
  std::vector<std::string> order;              // clusters in file order
};

// Loads a prices file; every cluster it names must be in `catalog`.
PriceList load_prices(const std::string& path, const Catalog& catalog);
std::string default_prices_path(const Catalog& catalog);  // <catalog>/prices.json

// gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, dualpipev.
std::vector<std::string> default_capacity_schedules();
// optimal and balance-time: contiguous partitioners that take memory into account, the cost
// model's min-max and torchgpipe's balance by time (balance-size, pipedream-dp, mixed-pipe and
// metis can be asked for; the last three simulate candidates themselves).
std::vector<std::string> default_capacity_partitioners();

struct CapacityRequest {
  std::string model;
  std::string profile_path;  // instead of resolving `model`
  ResolveOptions precision;  // training dtype and optimizer (profiles/model_source.hpp)
  const Catalog* catalog = nullptr;
  PriceList prices;
  std::vector<std::string> clusters;  // empty: every priced cluster, in the prices file's order
  int batch = 0;                      // global batch size
  double samples = 0;                 // samples per epoch
  double epochs = 1;
  std::vector<std::string> schedules = default_capacity_schedules();
  std::vector<std::string> partitioners = default_capacity_partitioners();
  std::vector<Checkpoint> checkpoints = {Checkpoint::kNone, Checkpoint::kExceptLast,
                                         Checkpoint::kAlways};
  double budget = 0;      // most the fastest plan may cost; 0: no limit
  int jobs = 0;           // worker threads; 0: hardware concurrency
  Framework framework{};  // the framework's overheads every plan carries (core/framework.hpp)
  // Tensor-parallel sizes searched (core/plan.hpp), each with sequence parallelism when t > 1:
  // those the model splits (profiles/zoo/tensor_parallel.hpp) and that divide a node's devices.
  std::vector<int> tp_sizes = {1, 2, 4, 8};
  bool distributed_optimizer = false;  // every plan with ZeRO-1 over its replicas
};

struct CapacityChoice {
  bool found = false;
  Plan plan;
  int gpus = 0;
  double iteration_time_s = 0;
  double throughput_samples_per_s = 0;
  double epoch_time_s = 0;
  double total_time_s = 0;
  double cost = 0;
  double peak_memory_bytes = 0;
};

struct ClusterCapacity {
  std::string cluster;
  std::string device;
  int devices = 0;  // physical units (GPUs): stream sets of one GPU count once
  double price_per_gpu_hour = 0;
  bool fits = false;
  double capacity_bytes = 0;  // memory of one device
  // When nothing fits: the leanest layout tried (its plan, found memory-aware on the least
  // memory it fits), the memory that runs out, what it needs and by how much it is over.
  bool has_leanest = false;
  Plan leanest;
  std::string oom_device;
  double need_bytes = 0, over_bytes = 0;
  std::string note;     // why there is no plan (or none within budget)
  SearchCounts search;  // what became of the cluster's layouts
  CapacityChoice fastest, cheapest;
};

struct CapacityReport {
  std::vector<ClusterCapacity> clusters;
  std::vector<size_t> by_time;  // clusters with a fastest plan, quickest first
  std::vector<size_t> by_cost;  // clusters with a cheapest plan, cheapest first
};

CapacityReport plan_capacity(const CapacityRequest& request);

}  // namespace pipetwin::sim
