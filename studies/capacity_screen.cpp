#include "studies/capacity_screen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "sim/memory_pools.hpp"
#include "core/partition/partitioner.hpp"
#include "core/plan.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim/planner.hpp"
#include "studies/capacity_bounds.hpp"

namespace pipetwin::sim {

namespace {

// The partitioners whose answer the screen may stand in for.
bool screened(const std::string& partitioner) {
  return partitioner == "optimal" || partitioner == "balance-time" || partitioner == "balance-size";
}

// The bound of the plan the partition makes, its stages placed by `stage_device` and its replicas
// in order, as plan_time_bound.
double busiest_device(const Partition& part, const std::vector<int>& stage_device,
                      const CostModel& cost, const Layout& x, double micro_batch) {
  std::vector<StageCost> stages;
  for (const auto& layers : part.stages) {
    std::vector<int> sorted = layers;
    std::sort(sorted.begin(), sorted.end());
    stages.push_back(cost.stage_cost(sorted, micro_batch));
  }
  const DeviceWork w = device_work(stages, stage_device, x.stages, x.chunks, x.checkpoint);
  std::vector<int> placement(static_cast<size_t>(x.dp * x.stages));
  std::iota(placement.begin(), placement.end(), 0);
  return work_bound(cost, placement, w, micro_batch);
}

// A chain: every tensor goes to the next layer. The schedule model prices its stages as the walk
// does (core/partition/stage_memory.hpp), so a prediction of the planner's memory verdict is exact.
bool is_chain(const CostModel& cost) {
  for (const auto& e : cost.graph().edges()) {
    if (e.to != e.from + 1) return false;
  }
  return true;
}

// The byte factors of one stage (core/partition/partitioner.cpp prices stages so).
StageBytes bytes_of(const CostModel& cost, std::vector<int> layers, double micro_batch) {
  std::sort(layers.begin(), layers.end());
  const CrossingBytes x = crossing_bytes_per_sample(cost, layers);
  return stage_bytes(cost.stage_cost(layers, micro_batch), x.in * micro_batch, x.out * micro_batch);
}

// Whether the plan the partition makes fits every memory: each device's peak, its stages priced
// together, added up per memory over the dp x K devices placed in order (as check_fits walks it).
bool fits_every_memory(const Partition& part, const StageMemory& model, const CostModel& cost,
                       const Layout& x, double micro_batch, const Cluster& cluster) {
  const int stages = part.num_stages();
  std::vector<StageBytes> bytes;
  for (const auto& layers : part.stages) bytes.push_back(bytes_of(cost, layers, micro_batch));
  std::map<int, double> need;
  for (int d = 0; d < x.stages; ++d) {
    double peak = 0;
    if (x.virtual_stages > 1) {
      std::vector<StageBytes> mine;
      for (int s : model.device_stages(d, stages)) mine.push_back(bytes[static_cast<size_t>(s)]);
      peak = model.device_bytes(mine, d, stages);
    } else {
      peak = model.bytes(bytes[static_cast<size_t>(d)], d, stages);
    }
    for (int r = 0; r < x.dp; ++r) need[cluster.memory_of(r * x.stages + d)] += peak;
  }
  const double capacity = tensor_capacity_bytes(cluster);
  return std::all_of(need.begin(), need.end(), [&](const auto& n) { return n.second <= capacity; });
}

}  // namespace

const StageMemory& PartitionScreen::model(const Layout& x, int iterations) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = models_[Key{*x.schedule, x.chunks, x.checkpoint, x.virtual_stages, iterations}];
  if (!slot) {
    slot = std::make_unique<StageMemory>(
        StageMemory::Options{*x.schedule, x.chunks, x.checkpoint, iterations, x.virtual_stages});
  }
  return *slot;
}

std::vector<int> PartitionScreen::saved_sets(const Layout& x) {
  // The planner's model, which the screen then partitions with; its graphs alone, read off the
  // compute order, so that a layout the bound skips costs no walk.
  return model(x, 0).most_graphs(x.virtual_stages * x.stages);
}

Screened PartitionScreen::screen(const Layout& x, const Cluster& cluster, const CostModel& cost,
                                 int batch) {
  Screened out;
  if (!screened(*x.partitioner)) return out;
  const double micro_batch = static_cast<double>(batch / (x.dp * x.chunks));
  PartitionRequest pr;
  pr.cost = &cost;
  pr.num_stages = x.virtual_stages * x.stages;
  pr.micro_batch = micro_batch;
  pr.micro_batches = x.chunks;
  pr.memory = &model(x, 0);   // the planner's: the schedule's default mini-batches
  pr.explain_no_fit = false;  // a NoFitError is a verdict here; its need is not reported
  pr.memory_limit_bytes = tensor_capacity_bytes(cluster);  // the whole memory a stage
  // One stage per device and one device per memory: the planner's limit is the whole memory and
  // it partitions once; else it tries shared_stage_limits() in turn (sim/planner.hpp).
  std::map<int, int> users;
  bool alone = x.virtual_stages == 1;
  for (int d = 0; d < x.dp * x.stages; ++d) alone = alone && ++users[cluster.memory_of(d)] == 1;
  std::vector<double> limits = {tensor_capacity_bytes(cluster)};
  std::vector<int> stage_device(static_cast<size_t>(pr.num_stages));
  std::iota(stage_device.begin(), stage_device.end(), 0);
  try {
    if (!alone) {
      Plan p;
      p.cluster = cluster;
      p.dp = x.dp;
      limits = shared_stage_limits(p, x.stages, x.virtual_stages);
      if (x.virtual_stages > 1) {
        stage_device = virtual_stage_layout(stage_layout_of(*x.schedule), x.stages,
                                            x.virtual_stages, *x.schedule);
      }
    }
    const auto partitioner = make_partitioner(*x.partitioner);
    // Exact where one stage per device has its memory (one call) or the model is a chain (the
    // first partition predicted to fit is the planner's); else a bound over every limit.
    const bool exact = alone || is_chain(cost);
    double least = std::numeric_limits<double>::infinity();
    for (double limit : limits) {
      pr.memory_limit_bytes = limit;
      try {
        const Partition part = partitioner->partition(pr);
        least = std::min(least, busiest_device(part, stage_device, cost, x, micro_batch));
        if (alone ||
            (exact && fits_every_memory(part, *pr.memory, cost, x, micro_batch, cluster))) {
          out.verdict = Screened::Verdict::kPartitioned;
          out.bound_s = busiest_device(part, stage_device, cost, x, micro_batch);
          out.exact = true;
          out.partition = part;
          out.stage_device = stage_device;
          return out;
        }
      } catch (const NoFitError&) {
        break;  // the planner stops at the first limit that nothing fits
      }
    }
    if (exact || std::isinf(least)) {
      out.verdict = Screened::Verdict::kNoFit;  // no partition of any limit fits
    } else {
      out.verdict = Screened::Verdict::kPartitioned;
      out.bound_s = least;
    }
  } catch (const InputError&) {
    out.verdict = Screened::Verdict::kUnknown;  // the planner will say why
  }
  return out;
}

}  // namespace pipetwin::sim
