// `mixed-pipe`: FTPipe's Mixed-pipe partitioning (Eliad et al., ATC'21, Section 4.1).
//
// "Mixed-pipe partitions the model into arbitrary computational blocks rather than layers, and
// relaxes the model topology constraints when assigning blocks to GPUs, allowing nonadjacent
// blocks to be executed on the same GPU." Here P = request.num_stages is the number of GPUs and
// the result has L' >= P stages with a stage -> GPU map; a GPU may host several stages and a stage
// may feed a stage that is not its neighbour. The three steps:
//
//   1. Coarsening (coarsen.hpp): remove constants, zero-weight and high-communication nodes,
//      coarsen by type, then around centres down to L blocks, acyclic all along.
//   2. Load balancing: "the L CCO stages are sorted in a descending order of their computation
//      load, and are assigned to the next least busy GPU with enough memory to run them"
//      (Longest-Processing-Time first). Then "merge connected components inside each GPU as long
//      as this does not create a cycle with other components" so the pipeline stays shallow.
//   3. Refinement (refine.hpp): layers move between adjacent stages while that improves the
//      bottleneck, the balance or the communication, within the memory limit.
//
// "we try several values of L (e.g. L = 2P, 3P) ... and take the option yielding the best
// pipeline throughput": we try L = P, 2P, 3P, 4P (at most the number of nodes left after the
// first coarsening passes, and that number itself when it is at most 8P: the finest blocks pack
// best under a tight memory limit), each with two choices of centres, and keep the candidate the
// request's evaluator predicts fastest (the planner's runs the simulator on the plan's schedule);
// ties, and candidates the evaluator cannot run, are decided by bottleneck_time, then by fewer
// stages ("small L ... is better staleness-wise"). L = P is our addition: with one block per GPU
// mixed-pipe can also return a sequential pipeline when that is best, e.g. on a plain chain.
//
// Memory: blocks carry activation_sets() micro-batches of activations (the request's schedule
// model's most per stage, partitioner.hpp), and each candidate, after merging and again after
// refinement, is priced stage by stage (device_memory_bytes) and dropped when a device is over the
// limit. When no candidate fits, or the request's evaluator can run none of them (the planner's
// returns +inf for a plan whose memory walk overflows a device), the sequential pipeline of
// `optimal` competes (see sequential_fallback).
//
// Not done: FTPipe profiles blocks with and without recomputation and re-partitions until the
// last stage uses the no-recompute profile (Section 4.3); here every block uses the profile's
// forward + backward time.
//
// Thread-safety: stateless (the request's evaluator must be thread-safe for concurrent calls).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/coarsen.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"
#include "core/partition/range_terms.hpp"
#include "core/partition/refine.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Why no candidate fits: a block no device had room for (`layers`), or else the leanest
// candidate that went over the limit (its largest need, on `device`).
struct NoRoom {
  std::vector<int> layers;
  double need = 0, room = 0;
  int device = 0;
};

// Step 2: LPT. Returns block -> GPU, or nullopt (and what did not fit) when memory runs out.
// A block's memory on a GPU leaves out the inputs it receives from blocks already there, and
// theirs from it: those blocks merge with it later when they can (the partition's memory is
// checked exactly afterwards). `by_memory` orders the blocks by memory instead of compute — our
// fallback when LPT's order leaves a block without room.
std::optional<std::map<int, int>> assign_lpt(const PartitionRequest& r, const CoarseGraph& g,
                                             bool by_memory, NoRoom& failure) {
  const int P = r.num_stages;
  const double limit = r.memory_limit_bytes;
  std::vector<int> blocks = g.blocks();
  std::stable_sort(blocks.begin(), blocks.end(), [&](int x, int y) {
    return by_memory ? g.memory(x) > g.memory(y) : g.block(x).compute_s > g.block(y).compute_s;
  });
  std::vector<double> load(static_cast<size_t>(P), 0), used(load);
  std::map<int, int> gpu;
  for (int b : blocks) {
    std::vector<double> need(static_cast<size_t>(P), g.memory(b));
    for (int n : g.neighbours(b)) {
      if (auto it = gpu.find(n); it != gpu.end()) {
        need[static_cast<size_t>(it->second)] -=
            activation_sets(r) * r.micro_batch * g.bytes_between(b, n);
      }
    }
    int best = -1;
    for (int d = 0; d < P; ++d) {
      const auto i = static_cast<size_t>(d);
      if (limit > 0 && used[i] + need[i] > limit) continue;
      if (best < 0 || load[i] < load[static_cast<size_t>(best)]) best = d;
    }
    if (best < 0) {
      failure.layers = g.block(b).layers;
      failure.need = g.memory(b);
      failure.room = limit - *std::min_element(used.begin(), used.end());
      return std::nullopt;
    }
    load[static_cast<size_t>(best)] += g.block(b).compute_s;
    used[static_cast<size_t>(best)] += need[static_cast<size_t>(best)];
    gpu[b] = best;
  }
  return gpu;
}

// Merges adjacent blocks of one GPU while that keeps the graph acyclic.
void merge_within_devices(CoarseGraph& g, const std::map<int, int>& gpu) {
  for (bool merged = true; merged;) {
    merged = false;
    for (int b : g.blocks()) {
      if (!g.block(b).alive) continue;
      for (int n : g.neighbours(b)) {
        if (gpu.at(n) == gpu.at(b) && g.can_contract(b, n)) {
          g.contract(b, n);
          merged = true;
          break;
        }
      }
    }
  }
}

struct Candidate {
  Partition partition;
  double evaluated = kInf, bottleneck = kInf;
};

bool better(const Candidate& a, const Candidate& b) {
  const double tol = 1e-9 * std::min(a.evaluated, b.evaluated);
  if (std::isfinite(a.evaluated) || std::isfinite(b.evaluated)) {
    if (a.evaluated < b.evaluated - tol) return true;
    if (a.evaluated > b.evaluated + tol) return false;
  }
  const double tol2 = 1e-9 * std::min(a.bottleneck, b.bottleneck);
  if (a.bottleneck < b.bottleneck - tol2) return true;
  if (a.bottleneck > b.bottleneck + tol2) return false;
  return a.partition.num_stages() < b.partition.num_stages();
}

class MixedPipe : public Partitioner {
 public:
  std::string name() const override { return "mixed-pipe"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner mixed-pipe";
    check_partition_request(r, who, /*needs_index_order=*/false);
    const int P = r.num_stages;
    CoarseGraph base(r);
    remove_constants(base);
    merge_zero_weight(base);
    merge_heavy_communication(base);
    std::optional<Candidate> best;
    std::set<std::pair<std::vector<std::vector<int>>, std::vector<int>>> seen;
    NoRoom failure;
    for (int L : block_counts(P, base.num_blocks())) {
      for (CentreChoice choice : {CentreChoice::kSpread, CentreChoice::kHeaviest}) {
        auto p = candidate(r, base, L, choice, failure);
        if (!p || !seen.insert({p->stages, p->device}).second) continue;
        const double evaluated = evaluate_partition(r, *p);
        const double bottleneck = bottleneck_time(r, *p);
        Candidate c{std::move(*p), evaluated, bottleneck};
        if (!best || better(c, *best)) best = std::move(c);
      }
    }
    // None, or none the evaluator can run (the planner's cannot run a plan over memory): a
    // sequential pipeline may.
    if (!best || (r.evaluate && !std::isfinite(best->evaluated))) {
      auto seq = sequential_fallback(r);
      if (seq && (!best || better(*seq, *best))) best = std::move(seq);
    }
    if (!best) throw_no_fit(r, failure, who);
    check_memory(r, best->partition, who);
    return best->partition;
  }

 private:
  [[noreturn]] static void throw_no_fit(const PartitionRequest& r, const NoRoom& failure,
                                        const std::string& who) {
    const std::string head =
        fmt::format("{}: no assignment to {} devices fits the {:.2f} GiB limit", who, r.num_stages,
                    r.memory_limit_bytes / kGiB);
    if (failure.layers.empty()) {  // every assignment went over after merging or refinement
      throw NoFitError(fmt::format("{}: the leanest needs {:.2f} GiB on device {}", head,
                                   failure.need / kGiB, failure.device),
                       failure.need, r.memory_limit_bytes,
                       fmt::format("on device {}", failure.device));
    }
    const int first = *std::min_element(failure.layers.begin(), failure.layers.end());
    const std::string message = fmt::format(
        "{}: a block of {} layer(s) from layer {} needs {:.2f} GiB, the device with "
        "the most room has {:.2f} GiB",
        head, failure.layers.size(), first, failure.need / kGiB, failure.room / kGiB);
    if (r.memory != nullptr && r.cost->graph().index_order_is_topological()) {
      // With the schedule's model, the leanest sequential pipeline is priced as the walk would.
      const LeanestSplit lean = leanest_split(RangeScanner(r), r.num_stages);
      throw NoFitError(
          fmt::format("{}; the leanest sequential pipeline needs {:.2f} GiB on stage {}", message,
                      lean.need_bytes / kGiB, lean.stage),
          lean.need_bytes, r.memory_limit_bytes,
          fmt::format("on stage {} (sequential)", lean.stage));
    }
    throw NoFitError(
        message, failure.need, r.memory_limit_bytes,
        fmt::format("for a block of {} layer(s) from layer {}", failure.layers.size(), first));
  }

  static std::vector<int> block_counts(int P, int nodes) {
    std::vector<int> out;
    for (int k = 1; k <= 4; ++k) {
      const int L = std::min(k * P, nodes);
      if (out.empty() || out.back() != L) out.push_back(L);
    }
    if (nodes > out.back() && nodes <= 8 * P) out.push_back(nodes);  // no coarsening at all
    return out;
  }

  // No mixed assignment fits: cutting the graph into more, out-of-order stages makes every stage
  // keep its inputs, which a tight limit may not allow where a sequential pipeline fits. Like
  // FTPipe, which lets a sequential partitioner compete, we then return `optimal`'s pipeline when
  // the layer order allows one.
  static std::optional<Candidate> sequential_fallback(const PartitionRequest& r) {
    if (!r.cost->graph().index_order_is_topological()) return std::nullopt;
    try {
      Partition p = make_optimal_partitioner()->partition(r);
      for (int s = 0; s < p.num_stages(); ++s) p.device.push_back(s);
      return Candidate{p, evaluate_partition(r, p), bottleneck_time(r, p)};
    } catch (const InputError&) {
      return std::nullopt;
    }
  }

  static std::optional<Partition> candidate(const PartitionRequest& r, const CoarseGraph& base,
                                            int L, CentreChoice choice, NoRoom& failure) {
    const int P = r.num_stages;
    CoarseGraph g = base;
    const int per_device = (L + P - 1) / P;
    const double memory_cap = r.memory_limit_bytes > 0 ? r.memory_limit_bytes / per_device : kInf;
    coarsen_by_type(g, g.total_compute() / L, memory_cap);
    coarsen_around_centers(g, L, choice);
    NoRoom why;
    auto gpu = assign_lpt(r, g, /*by_memory=*/false, why);
    if (!gpu) gpu = assign_lpt(r, g, /*by_memory=*/true, why);
    if (!gpu) {
      if (failure.layers.empty() || why.layers.size() <= failure.layers.size()) failure = why;
      return std::nullopt;
    }
    merge_within_devices(g, *gpu);
    std::vector<std::vector<int>> stages;
    std::vector<int> device;
    for (int b : g.blocks()) {
      stages.push_back(g.block(b).layers);
      device.push_back(gpu->at(b));
    }
    const Partition coarse = order_stages(r.cost->graph(), std::move(stages), std::move(device));
    if (over_limit(r, coarse, failure)) return std::nullopt;
    Partition refined = renumber_devices(refine_partition(r, coarse));
    // Refinement keeps its own running estimate (refine.hpp); the stages' priced memory decides.
    if (over_limit(r, refined, failure)) return std::nullopt;
    return refined;
  }

  // Whether a device of `p` needs more than the limit; the leanest such partition is kept in
  // `failure` when no block failed to find room.
  static bool over_limit(const PartitionRequest& r, const Partition& p, NoRoom& failure) {
    if (r.memory_limit_bytes <= 0) return false;
    const auto need = device_memory_bytes(r, p);
    const auto worst = std::max_element(need.begin(), need.end());
    if (*worst <= r.memory_limit_bytes) return false;
    if (failure.layers.empty() && (failure.need == 0 || *worst < failure.need)) {
      failure.need = *worst;
      failure.device = static_cast<int>(worst - need.begin());
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_mixed_pipe_partitioner() {
  return std::make_unique<MixedPipe>();
}

}  // namespace pipetwin
