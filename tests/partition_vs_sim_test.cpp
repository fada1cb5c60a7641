// Partitioners priced by what they produce (docs/partition-memory.md, "Objectives against the
// simulator"): over seeded random chain profiles on three shipped clusters, every partitioner's
// plan (as sim/planner.cpp makes it) is simulated, and the partitioner's predicted slowest-stage
// time — the objective it minimises — is compared with the simulated steady-state iteration time
// divided by M. The schedule is PipeDream's (asynchronous: no flush, so a steady state's time per
// micro-batch is the slowest stage's period and no bubble term enters the comparison).
//
// The gaps are printed as a table (the document's figures) and bounded: each partitioner's
// median and worst relative gap must stay within what was measured plus a margin, so a change to a
// partitioner's objective or to the simulator that moves them apart fails here.
//
// pipedream-dp, as the planner runs it, prices what the planner builds from its answer
// (PipeDreamPricing::kAsPlanned, core/partition/pipedream_dp.hpp): its objective must be within 5%
// of the simulation on every plan (PipeDreamObjectiveIsThePlannedPeriod), and the test prints how
// far the paper's formula and the two simpler all-reduce charges are from the same simulations.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "core/partition/stage_memory.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

constexpr int kProfiles = 200;
constexpr int kBatch = 64, kChunks = 8;
const PipeDreamOptions kAsPlanned{true, PipeDreamPricing::kAsPlanned};

// A random chain of 8..32 layers. Per profile, a scale of per-sample forward time (0.002..2 ms)
// and of activations (0.05..8 MiB a sample), both log-uniform, so that compute-bound and
// transfer-bound pipelines both occur; per layer, 0.25..4x those scales, a per-call overhead up
// to 0.05 ms, a backward 1.5..3x the forward, saved activations 0.5..2x the output, 0.1..64 MiB
// of parameters and, for half the layers, Adam-like optimizer state (2x the parameters).
Profile random_chain(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  auto log_uniform = [&](double lo, double hi) { return lo * std::pow(hi / lo, u(rng)); };
  const int L = std::uniform_int_distribution<int>(8, 32)(rng);
  const double f_scale = log_uniform(0.002e-3, 2e-3), act_scale = log_uniform(0.05, 8) * kMiB;
  Profile p = test::synthetic(fmt::format("uniform:layers={}", L));
  p.input_bytes_per_sample = act_scale * log_uniform(0.25, 4);
  for (auto& layer : p.layers) {
    const double f = f_scale * log_uniform(0.25, 4), o = u(rng) * 0.05e-3,
                 ratio = 1.5 + 1.5 * u(rng);
    for (auto& t : layer.timings) {
      t.forward_s = o + f * t.micro_batch;
      t.backward_s = ratio * t.forward_s;
      t.recompute_s = t.forward_s;
    }
    layer.output_bytes_per_sample = act_scale * log_uniform(0.25, 4);
    layer.saved_bytes_per_sample = layer.output_bytes_per_sample * (0.5 + 1.5 * u(rng));
    layer.param_bytes = log_uniform(0.1, 64) * kMiB;
    layer.optimizer_bytes = u(rng) < 0.5 ? 2 * layer.param_bytes : 0;
  }
  p.edges.clear();
  for (int i = 0; i + 1 < L; ++i) {
    p.edges.push_back({i, i + 1, p.layers[static_cast<size_t>(i)].output_bytes_per_sample});
  }
  return p;
}

// The request the planner hands the partitioner (sim/planner.cpp, partition_for).
struct Priced {
  CostModel cost;
  StageMemory model;
  PartitionRequest request;
  Priced(const Plan& plan, const sim::PlanRequest& r)
      : cost(plan.profile, plan.cluster, options(plan)),
        model({plan.schedule, plan.chunks, plan.checkpoint, 0}) {
    request.cost = &cost;
    request.num_stages = r.stages;
    request.micro_batch = static_cast<double>(r.batch_size) / (r.dp * plan.chunks);
    request.micro_batches = plan.chunks;
    request.memory = &model;
    request.memory_limit_bytes = sim::stage_memory_limit(plan, r.stages);
  }
  static CostOptions options(const Plan& plan) {
    CostOptions o;
    o.compute_scale = plan.compute_scale;
    o.frozen_layers = plan.frozen_layers;
    o.lambda_frozen = plan.lambda_frozen;
    return o;
  }
};

Partition partition_of(const Plan& plan, int requested_dp) {
  Partition p;
  const bool mixed = plan.devices_per_replica() != plan.num_stages();
  for (const auto& st : plan.stages) {
    p.stages.push_back(st.layers);
    if (mixed) p.device.push_back(st.device);
    if (plan.dp > requested_dp) p.replicas.push_back(plan.dp / requested_dp);
  }
  return p;
}

// The slowest-stage time the partitioner predicts: the objective it minimises. balance-time:
// the largest stage's forward + backward; pipedream-dp: the period of the plan the planner builds
// (planned_period_s, what its search minimises); the others
// (optimal's and mixed-pipe's objective, and for uniform, balance-size, autopipe and metis, which
// minimise no time, the common reference): FTPipe's stage period on the slowest device,
// bottleneck_time().
double predicted_s(const std::string& name, const PartitionRequest& r, const Partition& p) {
  if (name == "pipedream-dp") return pipedream_plan(r, kAsPlanned).bottleneck_s;
  if (name != "balance-time") return bottleneck_time(r, p);
  double worst = 0;
  for (const auto& layers : p.stages) {
    double c = 0;
    for (int l : layers)
      c += r.cost->forward_s(l, r.micro_batch) + r.cost->backward_s(l, r.micro_batch);
    worst = std::max(worst, c);
  }
  return worst;
}

// Other prices of pipedream-dp's data-parallel plans (one stage, dp = m: no transfers), at the
// micro-batch the plan runs (b / m) unless said otherwise; W the ring all-reduce of the stage's
// gradients over its replicas, once per M micro-batches.
struct OtherPrices {
  double paper = 0;       // Section 3.1: max(C(b), W / M) / m, the requested micro-batch b
  double overlapped = 0;  // max(C(b / m), W / M): the all-reduce hidden behind compute
  double serial = 0;      // C(b / m) + W / M: the all-reduce after compute, none of it hidden
};
OtherPrices other_prices(const PartitionRequest& r, const Partition& p) {
  const CostModel& cm = *r.cost;
  OtherPrices out;
  const int K = p.num_stages(), m = p.replicas_of(0);
  for (int s = 0; s < K; ++s) {
    const auto& layers = p.stages[static_cast<size_t>(s)];
    const StageCost at_b = cm.stage_cost(layers, r.micro_batch);
    const StageCost c = cm.stage_cost(layers, r.micro_batch / m);
    std::vector<int> devices;  // as the planner places replicas: replica rho's stage s at rho K + s
    for (int rho = 0; rho < m; ++rho) devices.push_back(rho * K + s);
    const double w = cm.allreduce_s(c.param_bytes, devices) / r.micro_batches;
    const double compute = c.forward_s + c.backward_s;
    out.paper = std::max(out.paper, std::max(at_b.forward_s + at_b.backward_s, w) / m);
    out.overlapped = std::max(out.overlapped, std::max(compute, w));
    out.serial = std::max(out.serial, compute + w);
  }
  return out;
}

// A chain pipeline's period as the simulator runs PipeDream's 1F1B: the longest of a stage's
// compute; everything a device receives a micro-batch (activations from the previous stage and
// gradients from the next: one receive stream, docs/design.md "The schedule IR"), or sends; and
// the round trip of a micro-batch from stage k to the last stage and back (compute and both
// transfers at every border) over the K - k micro-batches stage k keeps in flight. FTPipe's
// Equation 1 (stage_period) counts none of the latter two.
double round_trip_s(const PartitionRequest& r, const Partition& p) {
  const CostModel& cm = *r.cost;
  const int K = p.num_stages();
  std::vector<double> cut(static_cast<size_t>(K), 0);  // bytes a sample from stage s to s + 1
  for (const auto& e : cm.graph().edges()) {
    for (int s = 0; s + 1 < K; ++s) {
      if (e.from <= p.stages[static_cast<size_t>(s)].back() &&
          e.to >= p.stages[static_cast<size_t>(s) + 1].front())
        cut[static_cast<size_t>(s)] += e.bytes_per_sample;
    }
  }
  auto hop = [&](int s) {  // one tensor across the border after stage s
    return cut[static_cast<size_t>(s)] > 0
               ? cm.transfer_s(cut[static_cast<size_t>(s)] * r.micro_batch, s, s + 1)
               : 0.0;
  };
  std::vector<double> compute(static_cast<size_t>(K), 0);
  double worst = 0;
  for (int s = 0; s < K; ++s) {
    for (int l : p.stages[static_cast<size_t>(s)])
      compute[static_cast<size_t>(s)] +=
          cm.forward_s(l, r.micro_batch) + cm.backward_s(l, r.micro_batch);
    const double before = s > 0 ? hop(s - 1) : 0, after = s + 1 < K ? hop(s) : 0;
    // Receives, and sends, are before + after each.
    worst = std::max({worst, compute[static_cast<size_t>(s)], before + after});
  }
  // The round trip: stage k starts micro-batch j + K - k only after j's backward came back, so its
  // K - k micro-batches in flight must cover j's way to the last stage and back.
  double loop = 0;
  for (int s = K - 1; s >= 0; --s) {
    loop += compute[static_cast<size_t>(s)] + (s + 1 < K ? 2 * hop(s) : 0.0);
    worst = std::max(worst, loop / (K - s));
  }
  return worst;
}

struct Gaps {
  // pipedream-dp's data-parallel plans: the objective's gaps and those of the other prices
  // (other_prices); and the plans' shapes
  std::vector<double> dp_only, paper, overlapped, serial_allreduce;
  int pipelined = 0, both = 0;  // K > 1 with dp = 1, and K > 1 with dp > 1
  std::vector<double> serial;   // chains without replicas: against round_trip_s
  std::vector<double> gaps;     // (simulated - predicted) / predicted
  int replicated = 0, skipped = 0;
  // pipedream-dp plans the planner refined by simulation (sim/planner.cpp refine_pipedream): an
  // uneven hybrid or data parallelism simulated faster than the as-planned search's pick; their
  // objective is that simulation, so they carry no gap
  int refined = 0, refined_hybrids = 0;
  double plan_s = 0;
  double median() const {
    std::vector<double> v = gaps;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
  }
  double within(double bound) const {  // share of |gap| <= bound
    size_t n = 0;
    for (double g : gaps) n += std::abs(g) <= bound ? 1 : 0;
    return gaps.empty() ? 0 : static_cast<double>(n) / static_cast<double>(gaps.size());
  }
  double p90() const {  // of the magnitude
    std::vector<double> v;
    for (double g : gaps) v.push_back(std::abs(g));
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(0.9 * v.size()))];
  }
  double worst() const {  // the largest in magnitude, with its sign
    double w = 0;
    for (double g : gaps) {
      if (std::abs(g) > std::abs(w)) w = g;
    }
    return w;
  }
};

void measure(const Profile& profile, const Cluster& cluster, int K, const std::string& name,
             Gaps& out) {
  sim::PlanRequest r;
  r.model = "random-chain";
  r.profile = profile;
  r.cluster = cluster;
  r.stages = K;
  r.schedule = "pipedream";
  r.batch_size = kBatch;
  r.chunks = kChunks;
  r.partitioner = name;
  Plan plan;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    plan = sim::make_plan(r);
    out.plan_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } catch (const InputError&) {
    // Does not fit, replicates unevenly, or puts several stages on a device (metis), which
    // PipeDream's schedule does not run.
    ++out.skipped;
    return;
  }
  const Priced priced(plan, r);
  const Partition part = partition_of(plan, r.dp);
  if (name == "pipedream-dp" &&
      (plan.replicates_stages() ||
       pipedream_plan(priced.request, kAsPlanned).partition.stages != part.stages)) {
    ++out.refined;
    if (plan.replicates_stages()) ++out.refined_hybrids;
    return;
  }
  const double predicted = predicted_s(name, priced.request, part);
  const PlanContext ctx(plan, 0);
  const double simulated = sim::simulate_plan(ctx).metrics.iteration_time_s / plan.chunks;
  auto gap = [&](double reference) { return (simulated - reference) / reference; };
  out.gaps.push_back(gap(predicted));
  if (name == "pipedream-dp") {
    if (plan.num_stages() > 1) {
      ++(plan.dp > r.dp ? out.both : out.pipelined);
    } else if (plan.dp > r.dp) {
      const OtherPrices o = other_prices(priced.request, part);
      out.dp_only.push_back(gap(predicted));
      out.paper.push_back(gap(o.paper));
      out.overlapped.push_back(gap(o.overlapped));
      out.serial_allreduce.push_back(gap(o.serial));
    }
  }
  if (plan.dp == r.dp && plan.devices_per_replica() == plan.num_stages()) {
    out.serial.push_back(gap(round_trip_s(priced.request, part)));
  }
  if (plan.dp > 1) ++out.replicated;
}

// Measured 2026-11-26 with the seed below (docs/partition-memory.md): plans simulated, median
// gap, smallest and largest gap. A run must simulate at least 90% as many plans, keep the median
// within 0.02 and the extremes within max(0.02, 10%) of these.
struct Bound {
  size_t plans;
  double median, lowest, highest;
};
const std::map<std::string, Bound>& measured_bounds() {
  static const std::map<std::string, Bound> b = {
      {"uniform", {600, 0, 0, 1.0393}},
      {"balance-time", {600, 0, 0, 36.2634}},
      {"balance-size", {600, 0, 0, 0.9147}},
      {"autopipe", {600, 0, 0, 0.8271}},
      {"optimal", {600, 0, 0, 1.2200}},
      {"pipedream-dp", {600, 0, -0.0007, 0.0024}},
      {"mixed-pipe", {600, 0, 0, 0.9175}},
      {"metis", {78, 0, 0, 0.7248}},
      // The simulator-consistent periods the document compares with.
      {"optimal (round trip)", {600, 0, -0.0016, 0.3494}},
  };
  return b;
}

void expect_within(const std::string& label, const std::vector<double>& gaps) {
  const Bound& b = measured_bounds().at(label);
  Gaps g;
  g.gaps = gaps;
  EXPECT_GE(gaps.size(), b.plans * 9 / 10) << label;
  EXPECT_NEAR(g.median(), b.median, 0.02) << label;
  const auto [lo, hi] = std::minmax_element(gaps.begin(), gaps.end());
  EXPECT_GE(*lo, b.lowest - std::max(0.02, 0.1 * std::abs(b.lowest))) << label;
  EXPECT_LE(*hi, b.highest + std::max(0.02, 0.1 * std::abs(b.highest))) << label;
}

// kProfiles seeded random chains x 3 shipped clusters of different kinds (an NVLink node, a
// PCIe node of little bandwidth, two nodes of PCIe GPUs), each partitioner's plan measured.
std::map<std::string, Gaps> sample(const std::vector<std::string>& names) {
  const Catalog catalog = Catalog::load(test::source_dir() + "/hardware");
  const std::vector<Cluster> clusters = {load_cluster("dgx-h100", catalog),
                                         load_cluster("ftpipe-8x-2080ti", catalog),
                                         load_cluster("pipetransformer-2x8-rtx5000", catalog)};
  std::map<std::string, Gaps> gaps;
  std::mt19937 rng(20261126);
  for (int i = 0; i < kProfiles; ++i) {
    const Profile profile = random_chain(rng);
    const int K =
        std::min(profile.num_layers(), 2 << std::uniform_int_distribution<int>(0, 2)(rng));
    for (const Cluster& cluster : clusters) {
      for (const auto& name : names) measure(profile, cluster, K, name, gaps[name]);
    }
  }
  return gaps;
}

void print_header() {
  std::printf("%-24s %5s %5s %7s %9s %6s %9s %9s %7s\n", "partitioner", "plans", "dp>1", "skipped",
              "median", "<=1%", "p90|gap|", "worst", "plan");
}

void row(const std::string& label, const Gaps& g) {
  const auto [lo, hi] = std::minmax_element(g.gaps.begin(), g.gaps.end());
  std::printf("%-24s %5zu %5d %7d %+8.2f%% %5.0f%% %8.2f%% %+8.2f%% %6.1fs  [%+.4f, %+.4f]\n",
              label.c_str(), g.gaps.size(), g.replicated, g.skipped, 100 * g.median(),
              100 * g.within(0.01), 100 * g.p90(), 100 * g.worst(), g.plan_s, *lo, *hi);
}

TEST(PartitionVsSim, ObjectivesAgainstSimulatedSteadyStatePerMicroBatch) {
  std::map<std::string, Gaps> gaps = sample(partitioner_names());
  print_header();
  for (const auto& name : partitioner_names()) row(name, gaps[name]);
  std::printf("against the simulator-consistent periods:\n");
  for (const auto& name : partitioner_names()) {
    Gaps s;
    s.gaps = gaps[name].serial;
    if (!s.gaps.empty()) row(name + " (round trip)", s);
  }
  for (const auto& name : partitioner_names()) expect_within(name, gaps[name].gaps);
  expect_within("optimal (round trip)", gaps["optimal"].serial);
}

// The must-show of pipedream-dp's as-planned pricing: on every plan the planner builds from its
// answer (uniform replication or none: the planner runs no other), its objective is within 5% of
// the simulated steady-state time per micro-batch. Its data-parallel plans are also priced by the
// paper's formula and by the all-reduce hidden or not (docs/partition-memory.md quotes them).
TEST(PartitionVsSim, PipeDreamObjectiveIsThePlannedPeriod) {
  std::map<std::string, Gaps> gaps = sample({"pipedream-dp"});
  const Gaps& g = gaps["pipedream-dp"];
  std::printf(
      "pipedream-dp: %zu plans: %d data parallel only, %d pipelines, %d both, %zu one "
      "device; %d more refined by simulation (%d to an uneven hybrid, the rest to data "
      "parallelism)\n",
      g.gaps.size(), g.replicated - g.both, g.pipelined, g.both,
      g.gaps.size() - static_cast<size_t>(g.replicated + g.pipelined), g.refined,
      g.refined_hybrids);
  print_header();
  row("as planned (objective)", g);
  std::printf("its data-parallel plans, priced otherwise:\n");
  for (const auto& [label, v] : {std::make_pair("as planned", &g.dp_only),
                                 std::make_pair("paper, max(C(b),W/M)/m", &g.paper),
                                 std::make_pair("max(C(b/m), W/M)", &g.overlapped),
                                 std::make_pair("C(b/m) + W/M", &g.serial_allreduce)}) {
    Gaps other;
    other.gaps = *v;
    row(label, other);
  }
  EXPECT_EQ(g.skipped, 0);
  EXPECT_EQ(g.gaps.size() + static_cast<size_t>(g.refined), static_cast<size_t>(3 * kProfiles));
  EXPECT_LT(g.refined, 3 * kProfiles / 10);  // the as-planned search stays the rule
  EXPECT_GT(g.pipelined + g.both, 50);       // pipelines are exercised, not only data parallelism
  EXPECT_GT(g.replicated, 50);
  for (double gap : g.gaps) ASSERT_LE(std::abs(gap), 0.05);
  EXPECT_LE(std::abs(g.worst()), 0.05);
}

}  // namespace
}  // namespace pipetwin
