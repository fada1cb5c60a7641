// Capacity planning (`pipetwin capacity`): which cluster of a
// priced catalog trains a model fastest, and which cheapest?
//
// For every cluster, the search tries, with the simulator:
//   GPU count and shape   pipeline length K in {1, 2, 4, ...} up to min(layers, devices) and DP
//                         width dp in {1, 2, 4, ...} with K x dp <= devices and dp dividing the
//                         global batch (powers of two: how clusters of 8 and 16 GPUs split);
//   schedule              each of `schedules` (default the synchronous ones users pick: gpipe,
//                         1f1b, interleaved-1f1b with v = 2 model chunks per device, zb-h1,
//                         zb-h2, zbv and dualpipev; the asynchronous ones change what is trained,
//                         not only how fast), each with its virtual stages (sim/planner.hpp:
//                         v x K stages in the schedule's layout) and only the M it accepts
//                         (schedule_refusal: zbv M >= 2K - 1, dualpipev M >= 2K, interleaved
//                         M a multiple of K); at K = 1 (no pipeline, no bubble to fill) the
//                         virtual-stage and split-backward schedules only when nothing else is
//                         asked for;
//   M                     every M in [1, 6K] dividing the per-replica batch — AutoPipe's range
//                         [K, 6K] (PipeTransformer Section 3.2) widened down to 1 as
//                         sim/planner.hpp does;
//   checkpointing         none, and except_last only for a (K, dp, schedule) where no M fits
//                         without it (recomputation only ever costs time, so it is a way to fit,
//                         never a way to go faster).
// Each candidate's memory is walked first; only candidates that fit are simulated.
//
// For a cluster it reports whether any plan fits — if none does, the closest miss: the device
// that runs out, what it needs, what it has, by how much — and two plans: the fastest (least
// time for the requested samples; within `budget` when one is given) and the cheapest (least
// cost; ties go to the faster). Time per epoch = ceil(samples / batch) optimizer steps x the
// simulated iteration time; total time = epochs x that; cost = total hours x GPUs used x price
// per GPU-hour. Charging only the GPUs a plan uses assumes GPUs can be rented in those counts
// (1/2/4/8-GPU instances); a user renting whole nodes edits the price to node price / GPUs.
// Clusters are ranked by the fastest plan's time and by the cheapest plan's cost.
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
#include "profiles/model_source.hpp"
#include "core/plan.hpp"
#include "core/schedule/schedule.hpp"

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
  std::string partitioner = "balance-time";
  double budget = 0;  // most the fastest plan may cost; 0: no limit
  int jobs = 0;       // worker threads; 0: hardware concurrency
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
  // The closest miss when nothing fits.
  std::string oom_device;
  double need_bytes = 0, over_bytes = 0;
  std::string note;  // why there is no plan (or none within budget)
  int candidates = 0;
  CapacityChoice fastest, cheapest;
};

struct CapacityReport {
  std::vector<ClusterCapacity> clusters;
  std::vector<size_t> by_time;  // clusters with a fastest plan, quickest first
  std::vector<size_t> by_cost;  // clusters with a cheapest plan, cheapest first
};

CapacityReport plan_capacity(const CapacityRequest& request);

}  // namespace pipetwin::sim
