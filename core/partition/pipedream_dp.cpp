#include "core/partition/pipedream_dp.hpp"

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/async_chain.hpp"
#include "core/partition/partitioners.hpp"
#include "core/partition/range_terms.hpp"
#include "core/partition/stage_memory.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Cell {
  double time = kInf;  // A(j, m)
  int from = -1;       // i: the last stage is [i, j)
  int replicas = 0;    // m': machines of the last stage
};

// The program's table for j = 0..L and m = 0..P machines.
class Program {
 public:
  Program(const PartitionRequest& r, bool memory_aware, bool serial_sync)
      : r_(r),
        scan_(r),
        L_(r.cost->num_layers()),
        P_(r.num_stages),
        memory_aware_(memory_aware),
        serial_sync_(serial_sync) {
    cells_.resize((static_cast<size_t>(L_) + 1) * (static_cast<size_t>(P_) + 1));
    ar_fixed_.assign(static_cast<size_t>(P_) * (static_cast<size_t>(P_) + 1), 0);
    ar_per_byte_ = ar_fixed_;
    // All-reduce time is affine in bytes: ar_fixed + ar_per_byte * bytes on machines [m0, m0+m).
    for (int m0 = 0; m0 < P_; ++m0) {
      for (int m = 1; m0 + m <= P_; ++m) {
        std::vector<int> devices;
        for (int k = 0; k < m; ++k) devices.push_back(m0 + k);
        const double fixed = r.cost->allreduce_s(0, devices);
        ar_fixed_[ar_index(m0, m)] = fixed;
        ar_per_byte_[ar_index(m0, m)] = r.cost->allreduce_s(1, devices) - fixed;
      }
    }
  }

  // With a schedule model, the stage on machines [m0, m0 + m) is priced at the worst position it
  // can have: stage 0 when it starts at layer 0, else stage k in [1, m0] (every stage before it
  // has a machine); the last stage when it ends at layer L, else followed by a in [1, P - m0 - m]
  // stages (every stage after it needs a machine). The union of those positions' walks is an
  // upper bound on the stage's peak.
  void bound_positions() {
    if (!memory_aware_ || r_.memory == nullptr || r_.memory_limit_bytes <= 0) return;
    bounds_.resize(static_cast<size_t>(P_) * static_cast<size_t>(P_ + 1) * 4);
    for (int m0 = 0; m0 < P_; ++m0) {
      for (int m = 1; m0 + m <= P_; ++m) {
        for (int first = 0; first < 2; ++first) {
          for (int last = 0; last < 2; ++last) {
            HeldSet& set = bounds_[bound_index(m0, m, first, last)];
            const int k_lo = first ? 0 : 1, k_hi = first ? 0 : m0;
            const int a_lo = last ? 0 : 1, a_hi = last ? 0 : P_ - m0 - m;
            for (int k = k_lo; k <= k_hi; ++k) {
              for (int a = a_lo; a <= a_hi; ++a) set.merge(r_.memory->held(k, k + 1 + a));
            }
          }
        }
      }
    }
  }

  Cell& at(int j, int m) {
    return cells_[static_cast<size_t>(j) * (static_cast<size_t>(P_) + 1) + static_cast<size_t>(m)];
  }

  void run() {
    at(0, 0).time = 0;
    for (int i = 0; i < L_; ++i) {
      RangeTerms t = scan_.start(i);
      for (int j = i + 1; j <= L_; ++j) {
        scan_.extend(t);
        if (!bounds_.empty()) {
          relax(i, j, t, scan_.bytes(t));
          continue;
        }
        const bool fits = !memory_aware_ || r_.memory_limit_bytes <= 0 ||
                          scan_.memory(t) <= r_.memory_limit_bytes;
        if (fits) relax(i, j, t, {});
      }
    }
  }

  // The best plan over m = 1..P machines (fewer machines on ties); time +inf when none.
  std::pair<double, int> best() {
    double time = kInf;
    int machines = 0;
    for (int m = 1; m <= P_; ++m) {
      if (at(L_, m).time < time * (1 - 1e-12)) {
        time = at(L_, m).time;
        machines = m;
      }
    }
    return {time, machines};
  }

  Partition trace(int machines) {
    std::vector<std::vector<int>> stages;
    std::vector<int> replicas;
    for (int j = L_, m = machines; j > 0;) {
      const Cell& c = at(j, m);
      std::vector<int> layers;
      for (int l = c.from; l < j; ++l) layers.push_back(l);
      stages.insert(stages.begin(), std::move(layers));
      replicas.insert(replicas.begin(), c.replicas);
      m -= c.replicas;
      j = c.from;
    }
    Partition p;
    p.stages = std::move(stages);
    p.replicas = std::move(replicas);
    return p;
  }

 private:
  // Every way to make [i, j) the last stage, on m' machines after m0 used by [0, i).
  // `bytes`: the stage's factors when positions are priced (bounds_), else unused.
  void relax(int i, int j, const RangeTerms& t, const StageBytes& bytes) {
    const double b = r_.micro_batch;
    for (int m0 = 0; m0 < P_; ++m0) {
      const double before = at(i, m0).time;
      if (before == kInf) continue;
      // 2 C_i: activations forward and gradients back across the border at layer i.
      const double cross = scan_.cut_bytes(i) * b;
      const double comm = i > 0 && cross > 0 ? 2 * r_.cost->transfer_s(cross, m0 - 1, m0) : 0;
      const double base = std::max(before, comm);
      for (int m = 1; m0 + m <= P_; ++m) {
        if (!bounds_.empty() &&
            bounds_[bound_index(m0, m, i == 0, j == L_)].bytes(bytes) > r_.memory_limit_bytes) {
          continue;
        }
        const size_t k = ar_index(m0, m);
        const double sync =
            m > 1 ? (ar_fixed_[k] + ar_per_byte_[k] * t.param_bytes) / std::max(1, r_.micro_batches)
                  : 0;
        // The paper hides the all-reduce behind the compute; the released optimizer adds it.
        const double value =
            std::max(base, (serial_sync_ ? t.compute_s + sync : std::max(t.compute_s, sync)) / m);
        Cell& cell = at(j, m0 + m);
        const double tol = 1e-12 * std::max(value, cell.time == kInf ? 0 : cell.time);
        if (value < cell.time - tol || (std::abs(value - cell.time) <= tol && m < cell.replicas)) {
          cell = {value, i, m};
        }
      }
    }
  }

  const PartitionRequest& r_;
  const RangeScanner scan_;
  const int L_, P_;
  const bool memory_aware_;
  const bool serial_sync_;  // PipeDreamPricing::kReleased
  std::vector<Cell> cells_;
  size_t ar_index(int m0, int m) const {
    return static_cast<size_t>(m0) * (static_cast<size_t>(P_) + 1) + static_cast<size_t>(m);
  }
  std::vector<double> ar_fixed_, ar_per_byte_;  // by ar_index(m0, m)
  size_t bound_index(int m0, int m, bool first, bool last) const {
    return ((static_cast<size_t>(m0) * static_cast<size_t>(P_ + 1) + static_cast<size_t>(m)) * 2 +
            (first ? 1 : 0)) *
               2 +
           (last ? 1 : 0);
  }
  std::vector<HeldSet> bounds_;  // by bound_index; empty: a position-free limit
};

// --- As planned -------------------------------------------------------------------------------
// The plan sim/planner.cpp builds from a uniform answer (every stage on m machines): dp = m
// pipelines of K stages, replica rho's stage s on device rho * K + s, micro-batches of b / m.

// The devices of stage s's replicas.
std::vector<int> replica_devices(int s, int K, int m) {
  std::vector<int> devices;
  for (int rho = 0; rho < m; ++rho) devices.push_back(rho * K + s);
  return devices;
}

// One border's transfer at micro-batch b: the slowest of the m replicas' links.
double border_s(const CostModel& cm, double bytes, int s, int K, int m) {
  double worst = 0;
  if (bytes <= 0) return 0;
  for (int rho = 0; rho < m; ++rho)
    worst = std::max(worst, cm.transfer_s(bytes, rho * K + s, rho * K + s + 1));
  return worst;
}

// What a stage adds to its step beyond its backwards: the DDP buckets' all-reduces, chained on
// the collective stream from their ready offsets in the step's last backward (the simulator's
// AllReduce actions, core/schedule/data_parallel.hpp), past the end of that backward, and the
// optimizer step, which waits for them (docs/design.md "Cost model terms").
double step_overhead_s(const CostModel& cm, const StageCost& c, const std::vector<int>& devices,
                       bool new_version) {
  double end = 0;
  if (devices.size() > 1) {
    for (size_t k = 0; k < c.buckets.size(); ++k) {
      end = std::max(end, c.bucket_ready_s[k]) + cm.allreduce_s(c.buckets[k].bytes, devices);
    }
  }
  return std::max(0.0, end - c.backward_s) +
         (new_version ? c.optimizer_new_version_s : c.optimizer_s);
}

// The as-planned search: for every replica count m the plan can have (b / m whole samples) and
// every pipeline length K with K m <= P, the contiguous split minimising the largest stage term
// (its step, and what its device receives) by min_max_split; then the candidate whose
// planned_period_s is least (fewer replicas, then fewer stages, on ties). The split is the best
// for the stage terms, not necessarily for the period, which couples the stages.
class PlannedSearch {
 public:
  PlannedSearch(const PartitionRequest& r, bool memory_aware)
      : r_(r), L_(r.cost->num_layers()), memory_aware_(memory_aware) {}

  PipeDreamPlan run() {
    PipeDreamPlan out;
    out.bottleneck_s = kInf;
    for (int m = 1; m <= r_.num_stages; ++m) {
      const double b = r_.micro_batch / m;
      if (m > 1 && (b < 1 || std::abs(b - std::round(b)) > 1e-9)) continue;
      PartitionRequest rm = r_;
      rm.micro_batch = b;
      const RangeScanner scan(rm);
      costs_.clear();
      costs_.resize(static_cast<size_t>(L_ + 1) * static_cast<size_t>(L_ + 1));
      for (int K = 1; K <= std::min(L_, r_.num_stages / m); ++K) {
        const std::vector<int> sizes = min_max_split(
            scan, K, [&](const RangeTerms& t, int k) { return stage_term(scan, rm, t, k, K, m); });
        if (sizes.empty()) continue;
        Partition p = contiguous_partition(sizes);
        if (m > 1) p.replicas.assign(static_cast<size_t>(K), m);
        const double period = planned_period_s(r_, p);
        const double tol =
            1e-12 * std::max(period, out.bottleneck_s == kInf ? 0 : out.bottleneck_s);
        if (period < out.bottleneck_s - tol) {  // m and K grow: ties keep the smaller
          out.partition = std::move(p);
          out.bottleneck_s = period;
          out.stage_memory_bytes.clear();
          for (int s = 0; s < K; ++s) {
            out.stage_memory_bytes.push_back(
                stage_memory_bytes(rm, out.partition.stages[static_cast<size_t>(s)], s, K));
          }
        }
      }
    }
    if (out.bottleneck_s == kInf) out.bottleneck_s = 0;
    return out;
  }

 private:
  // Stage k of K on m replicas: its step, and what its device receives (activations from stage
  // k - 1, gradients from stage k + 1, one after the other on its receive stream); +inf over the
  // memory limit.
  double stage_term(const RangeScanner& scan, const PartitionRequest& rm, const RangeTerms& t,
                    int k, int K, int m) {
    if (memory_aware_ && r_.memory_limit_bytes > 0 &&
        scan.memory(t, k, K) > r_.memory_limit_bytes) {
      return kInf;
    }
    const CostModel& cm = *r_.cost;
    std::unique_ptr<StageCost>& c =
        costs_[static_cast<size_t>(t.begin) * static_cast<size_t>(L_ + 1) +
               static_cast<size_t>(t.end)];
    if (!c) {
      std::vector<int> layers;
      for (int l = t.begin; l < t.end; ++l) layers.push_back(l);
      c = std::make_unique<StageCost>(cm.stage_cost(layers, rm.micro_batch));
    }
    const double step = c->forward_s + c->backward_s +
                        step_overhead_s(cm, *c, replica_devices(k, K, m), k + 1 < K) /
                            std::max(1, r_.micro_batches);
    const double in =
        k > 0 ? border_s(cm, scan.cut_bytes(t.begin) * rm.micro_batch, k - 1, K, m) : 0;
    const double out =
        t.end < L_ ? border_s(cm, scan.cut_bytes(t.end) * rm.micro_batch, k, K, m) : 0;
    return std::max(step, in + out);
  }

  const PartitionRequest& r_;
  const int L_;
  const bool memory_aware_;
  std::vector<std::unique_ptr<StageCost>> costs_;  // by begin * (L + 1) + end, for the current m
};

PipeDreamPlan paper_plan(const PartitionRequest& r, bool memory_aware, bool serial_sync) {
  Program program(r, memory_aware, serial_sync);
  program.bound_positions();
  program.run();
  const auto [time, machines] = program.best();
  PipeDreamPlan out;
  if (time == kInf) return out;
  out.partition = program.trace(machines);
  out.bottleneck_s = time;
  const int K = out.partition.num_stages();
  for (int s = 0; s < K; ++s) {
    out.stage_memory_bytes.push_back(
        stage_memory_bytes(r, out.partition.stages[static_cast<size_t>(s)], s, K));
  }
  return out;
}

PipeDreamPlan plan_once(const PartitionRequest& r, bool memory_aware, PipeDreamPricing pricing) {
  PipeDreamPlan out = pricing == PipeDreamPricing::kAsPlanned
                          ? PlannedSearch(r, memory_aware).run()
                          : paper_plan(r, memory_aware, pricing == PipeDreamPricing::kReleased);
  for (size_t s = 0; s < out.stage_memory_bytes.size(); ++s) {
    if (out.stage_memory_bytes[s] > out.stage_memory_bytes[static_cast<size_t>(out.worst_stage)]) {
      out.worst_stage = static_cast<int>(s);
    }
  }
  if (r.memory_limit_bytes > 0 && !out.stage_memory_bytes.empty()) {
    out.over_limit_bytes = std::max(
        0.0, out.stage_memory_bytes[static_cast<size_t>(out.worst_stage)] - r.memory_limit_bytes);
  }
  return out;
}

}  // namespace

double planned_period_s(const PartitionRequest& r, const Partition& p) {
  const CostModel& cm = *r.cost;
  const int K = p.num_stages(), m = p.replicas_of(0);
  const double b = r.micro_batch / m;
  ChainTimes c;
  c.micro_batches = std::max(1, r.micro_batches);
  for (int s = 0; s < K; ++s) {
    const auto& layers = p.stages[static_cast<size_t>(s)];
    const StageCost sc = cm.stage_cost(layers, b);
    c.forward.push_back(sc.forward_s);
    c.backward.push_back(sc.backward_s);
    c.step.push_back(step_overhead_s(cm, sc, replica_devices(s, K, m), s + 1 < K));
    if (s + 1 < K) {
      double cut = 0;  // every edge across the border after stage s
      for (const auto& e : cm.graph().edges()) {
        if (e.from <= layers.back() && e.to > layers.back()) cut += e.bytes_per_sample;
      }
      c.hop.push_back(border_s(cm, cut * b, s, K, m));
    }
  }
  return chain_period_s(c);
}

PipeDreamPlan pipedream_plan(const PartitionRequest& r, const PipeDreamOptions& options) {
  const std::string who = "partitioner pipedream-dp";
  check_partition_request(r, who);
  PipeDreamPlan plan = plan_once(r, options.memory_aware, options.pricing);
  if (!plan.partition.stages.empty()) return plan;
  const PipeDreamPlan blind = plan_once(r, false, options.pricing);
  // The leanest pipeline: over every stage count, the contiguous split with one machine a stage
  // whose largest stage needs least (replicas need as much each as one copy).
  const RangeScanner scan(r);
  LeanestSplit lean;
  lean.need_bytes = std::numeric_limits<double>::infinity();
  for (int K = 1; K <= std::min(r.num_stages, r.cost->num_layers()); ++K) {
    LeanestSplit s = leanest_split(scan, K);
    if (s.need_bytes < lean.need_bytes) lean = std::move(s);
  }
  throw NoFitError(
      fmt::format("{}: no pipeline on {} devices fits the {:.2f} GiB limit; PipeDream's own plan "
                  "needs {:.2f} GiB on stage {}",
                  who, r.num_stages, r.memory_limit_bytes / kGiB,
                  blind.stage_memory_bytes[static_cast<size_t>(blind.worst_stage)] / kGiB,
                  blind.worst_stage),
      lean.need_bytes, r.memory_limit_bytes,
      fmt::format("on stage {} of {}", lean.stage, lean.sizes.size()));
}

namespace {

class PipeDreamDp : public Partitioner {
 public:
  explicit PipeDreamDp(const PipeDreamOptions& o) : options_(o) {}
  std::string name() const override { return "pipedream-dp"; }
  Partition partition(const PartitionRequest& r) const override {
    return pipedream_plan(r, options_).partition;
  }

 private:
  PipeDreamOptions options_;
};

}  // namespace

std::unique_ptr<Partitioner> make_pipedream_dp_partitioner(const PipeDreamOptions& options) {
  return std::make_unique<PipeDreamDp>(options);
}

std::unique_ptr<Partitioner> make_pipedream_dp_partitioner() {
  return make_pipedream_dp_partitioner(PipeDreamOptions{});
}

}  // namespace pipetwin
