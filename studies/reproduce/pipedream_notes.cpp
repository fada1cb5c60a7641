// The README's notes of `pipetwin reproduce pipedream` (see pipedream.hpp): the assumptions, and
// per modelled row of PipeDream's Table 1 (SOSP'19) what the objective of Section 3.1 and the
// simulator make of the paper's configuration, our picks and data parallelism.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim::pipedream {

namespace {

const Term& term(const Priced& p, const std::string& what) {
  for (const auto& t : p.terms) {
    if (t.what == what) return t;
  }
  throw InputError(fmt::format("reproduce pipedream: no term \"{}\" in {}", what, p.config));
}

// Why our pick and the paper's differ, with the numbers of the terms that decide it.
std::string why_different(const Outcome& o) {
  const double ours = o.ours.seconds.front(), papers = o.papers.seconds.front();
  const Term& c = term(o.dp, "stage 0 compute");
  const Term& w = term(o.dp, "stage 0 all-reduce");
  std::string out = fmt::format(
      "{}: the paper picks {}, we pick {}. Ours: {:.2f} ms per mini-batch ({}), set by {} "
      "({}). The paper's {} at its best split ({}): {:.2f} ms ({:+.1f}%), set by {} ({}). Data "
      "parallelism: {:.2f} ms, the larger of its compute ({:.0f} ms over {} workers) and its "
      "all-reduce ({:.0f} ms over {}).",
      o.row.label(), o.row.config, o.ours.config, ours * 1e3, o.ours.stages, o.ours.binding.what,
      o.ours.binding.detail, o.row.config, o.papers.stages, papers * 1e3, (papers / ours - 1) * 100,
      o.papers.binding.what, o.papers.binding.detail, o.dp.seconds.front() * 1e3, c.whole_s() * 1e3,
      c.workers, w.whole_s() * 1e3, w.workers);
  if (o.ours.partition.num_stages() == 1) {
    const double needed = papers * w.workers;
    out += fmt::format(
        " PipeDream's pricing hides a stage's all-reduce behind its compute (the max), so the "
        "paper's {} wins only once data parallelism's all-reduce takes more than {} x {:.2f} ms = "
        "{:.0f} ms, {:.2f}x what our cost model gives it: the paper's pick implies more "
        "communication per unit of compute than ours, from a slower all-reduce than our "
        "topology-aware collective or a faster compute than our roofline (efficiencies: {}; "
        "direct-convolution FLOPs). The batch-sensitivity table shows the pick at smaller "
        "mini-batches, which have less compute per all-reduce.",
        o.row.config, w.workers, papers * 1e3, needed * 1e3, needed / w.whole_s(), o.efficiency);
  }
  return out;
}

// One configuration under both pricings, for the ranking.
struct Ranked {
  std::string config;
  double objective_s = 0, simulated_s = 0;
};

// The distinct configurations of a row: the paper's, our pick and data parallelism.
std::vector<Ranked> ranked(const Outcome& o) {
  std::vector<Ranked> out;
  for (const Priced* p : {&o.papers, &o.ours, &o.dp}) {
    if (std::none_of(out.begin(), out.end(),
                     [&](const Ranked& r) { return r.config == p->config; }))
      out.push_back({p->config, p->seconds[kObjective], p->seconds[kSimulated]});
  }
  return out;
}

// "the objective ranks 14-1-1 ahead of 15-1 (10.80 vs 11.16 ms), the simulator 15-1 (13.31 vs
// 61.99 ms)", for every pair the two pricings order differently; a configuration the simulator
// refuses (memory) is named as such.
std::vector<std::string> disagreements(const Outcome& o) {
  const std::vector<Ranked> r = ranked(o);
  std::vector<std::string> out;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i].simulated_s)) {
      out.push_back(fmt::format("the objective prices {} at {:.2f} ms; it does not fit memory",
                                r[i].config, r[i].objective_s * 1e3));
      continue;
    }
    for (size_t j = i + 1; j < r.size(); ++j) {
      const Ranked &a = r[i], &b = r[j];
      if (std::isnan(b.simulated_s) ||
          (a.objective_s < b.objective_s) == (a.simulated_s < b.simulated_s))
        continue;
      const Ranked &first = a.objective_s < b.objective_s ? a : b, &second = &first == &a ? b : a;
      out.push_back(fmt::format(
          "the objective ranks {} ahead of {} ({:.2f} vs {:.2f} ms), the simulator {} ({:.2f} vs "
          "{:.2f} ms)",
          first.config, second.config, first.objective_s * 1e3, second.objective_s * 1e3,
          second.config, second.simulated_s * 1e3, first.simulated_s * 1e3));
    }
  }
  return out;
}

std::string ms_and_speedup(const Outcome& o, const Priced& p, size_t k) {
  if (std::isnan(p.seconds[k])) return p.refused[k];
  return fmt::format("{:.2f} ms, {:.2f}x", p.seconds[k] * 1e3, o.speedup(p, k));
}

std::string planner_line(const Outcome& o) {
  std::string out;
  for (const auto& p : o.planner) {
    out += out.empty() ? "our planner picks " : "; ";
    if (!p.refused.empty()) {
      out += fmt::format("nothing at {} ({})", p.setting(), p.refused);
      continue;
    }
    out += fmt::format("{} at {} ({:.2f} ms, {:.2f}x; its data-parallel candidate {:.2f} ms)",
                       p.config, p.setting(), p.seconds * 1e3, o.dp.seconds[kSimulated] / p.seconds,
                       p.dp_seconds * 1e3);
  }
  return out;
}

// Per row: the paper's pick and speedup, ours, the simulated times and speedups over DP, and
// where the simulator and the objective rank the configurations differently.
std::string simulated_summary(const Outcome& o) {
  std::string out = fmt::format(
      "{}, time per mini-batch and speedup over DP: the paper picks {} ({:.2f}x, time to "
      "accuracy). Objective: the paper's {} {}; our pick {} {}; DP {:.2f} ms. Simulated: the "
      "paper's {} {}; our pick {} {}; DP {:.2f} ms; {}.",
      o.row.label(), o.row.config, o.row.speedup, o.papers.config,
      ms_and_speedup(o, o.papers, kObjective), o.ours.config, ms_and_speedup(o, o.ours, kObjective),
      o.dp.seconds[kObjective] * 1e3, o.papers.config, ms_and_speedup(o, o.papers, kSimulated),
      o.ours.config, ms_and_speedup(o, o.ours, kSimulated), o.dp.seconds[kSimulated] * 1e3,
      planner_line(o));
  const std::vector<std::string> d = disagreements(o);
  if (d.empty()) {
    out += " The simulator ranks them as the objective does.";
  } else {
    out += " The simulator and the objective disagree: ";
    for (size_t i = 0; i < d.size(); ++i) out += (i == 0 ? "" : "; ") + d[i];
    out += ".";
  }
  const PlannerPick& best = o.planner_best();
  if (o.papers.seconds[kSimulated] < best.seconds) {
    out += fmt::format(
        " The paper's {} simulates faster than our planner's pick ({:.2f} vs {:.2f} ms): it is "
        "not among the planner's candidates (its as-planned pick and PipeDream's program under "
        "both pricings at the request's M, and data parallelism).",
        o.papers.config, o.papers.seconds[kSimulated] * 1e3, best.seconds * 1e3);
  }
  return out;
}

// Borders of a hybrid whose network lower bound exceeds the objective's time for the whole
// configuration: the objective prices them over a link inside a server.
std::vector<std::string> network_notes(const Outcome& o) {
  std::vector<std::string> out;
  for (const Priced* p : {&o.ours, &o.papers}) {
    if (p == &o.papers && o.papers.config == o.ours.config) continue;
    for (const auto& b : p->network) {
      if (b.nic_s <= p->seconds[kObjective]) continue;
      out.push_back(fmt::format(
          "{}, {}: the objective prices its {} at {:.2f} ms ({}), but {} of every {} "
          "mini-batches cross servers, so the receiving server's NIC alone needs {:.2f} ms per "
          "mini-batch for their activations, more than the objective's {:.2f} ms for the whole "
          "configuration; simulated: {:.2f} ms",
          o.row.label(), p->config, b.priced.what, b.priced.seconds * 1e3, b.priced.detail,
          b.remote, b.cycle, b.nic_s * 1e3, p->seconds[kObjective] * 1e3,
          p->seconds[kSimulated] * 1e3));
    }
  }
  return out;
}

// The notes that depend on the rows: uncertain cells, efficiencies, rows left out and why; per
// modelled row the simulated summary, the borders the objective misprices, and why a pick of ours
// that differs from the paper's does.
std::vector<std::string> row_notes(const std::vector<Outcome>& outcomes) {
  std::vector<std::string> a;
  for (const auto& o : outcomes) {
    if (!o.row.uncertain.empty()) {
      a.push_back(fmt::format("uncertain transcription, {}: {}", o.row.label(), o.row.uncertain));
    }
  }
  std::vector<std::string> efficiencies;  // one line per cluster GPU's source
  for (const auto& o : outcomes) {
    if (o.not_modelled.empty() &&
        std::find(efficiencies.begin(), efficiencies.end(), o.efficiency) == efficiencies.end()) {
      efficiencies.push_back(o.efficiency);
      a.push_back(
          fmt::format("roofline efficiencies on Cluster-{}: {}", o.row.cluster, o.efficiency));
    }
  }
  // One line per reason, naming the rows it leaves out.
  std::vector<std::pair<std::string, std::string>> left_out;  // reason, rows
  for (const auto& o : outcomes) {
    if (o.not_modelled.empty()) continue;
    auto it = std::find_if(left_out.begin(), left_out.end(),
                           [&](const auto& r) { return r.first == o.not_modelled; });
    if (it == left_out.end()) it = left_out.insert(left_out.end(), {o.not_modelled, ""});
    it->second += (it->second.empty() ? "" : "; ") + o.row.label();
  }
  for (const auto& [reason, rows] : left_out) {
    a.push_back(fmt::format("not modelled ({}): {}", rows, reason));
  }
  for (const auto& o : outcomes) {
    if (!o.not_modelled.empty()) continue;
    a.push_back(simulated_summary(o));
    for (auto& line : network_notes(o)) a.push_back(std::move(line));
    if (!o.agrees()) a.push_back(why_different(o));
  }
  return a;
}

}  // namespace

std::vector<std::string> notes(const std::vector<Outcome>& outcomes) {
  std::vector<std::string> a = {
      "experiments/reference/pipedream-table1-configs.csv was transcribed from PipeDream's "
      "Table 1 as recalled, not re-read from the paper; its `uncertain` column marks the cells "
      "that may differ from the printed table",
      "clusters: Cluster-A = hardware/clusters/pipedream-cluster-a-4x4-v100.json (4 servers x 4 "
      "V100 PCIe 16 GB, PCIe 3.0 inside a server, one 10 Gb Ethernet interface per server); "
      "Cluster-B = pipedream-cluster-b-2x8-v100.json (2 x 8 V100 SXM2 16 GB, NVLink 2, one 25 Gb "
      "Ethernet interface per server); each file cites its figures",
      "models: the analytic zoo's vgg:16, resnet:50 and alexnet (torchvision's layer lists at "
      "224 x 224; profiles/zoo/vgg.cpp, convnets.cpp), float32, SGD with momentum; times from the "
      "roofline (profiles/zoo/analytic.hpp), no measured V100 profile shipping",
      "per-worker mini-batch (not in Table 1): VGG-16 64, ResNet-50 128, AlexNet 256 — ours to "
      "choose; the batch-sensitivity table gives our pick at half and twice these",
      "PipeDream's request: P = every GPU of the cluster, weights updated after every "
      "mini-batch (one all-reduce per mini-batch, M = 1), no memory limit (PipeDream's optimizer "
      "has none); pipedream-dp with the paper's pricing (Section 3.1): a stage on m workers costs "
      "max(compute, all-reduce) / m, a border 2 C; the all-reduce is the cost model's "
      "(topology-aware: the fastest of ring, tree and hierarchical over the servers' shared "
      "NICs), not the paper's parameter-server estimate",
      "the paper's configuration names replica counts, not layers: it is split where the same "
      "objective puts its cuts (what our program would give it, had it picked it), and that split "
      "is what is simulated; speedup over DP = the DP configuration's time per mini-batch over "
      "the configuration's, under one pricing",
      "simulated (pipedream_run_plan in pipedream_sim.cpp): a configuration runs as PipeDream "
      "runs it (Section 3.3), under our `pipedream` schedule (asynchronous 1F1B, weight "
      "stashing), every micro-batch one per-worker mini-batch; a stage replicated r times takes "
      "every r-th mini-batch (round-robin) and all-reduces among its replicas once a step of M = "
      "the lcm of the replica counts mini-batches, so once per mini-batch of its own for 15-1 and "
      "14-1-1 (the unreplicated stages step once per M; their optimizer steps are the only "
      "difference from PipeDream's per-mini-batch update); data parallelism runs one mini-batch "
      "and one all-reduce per worker a step (M = 1), PipeDream's DP baseline. Time per "
      "mini-batch = the steady-state iteration time over the mini-batches an iteration takes "
      "(2 S + 4 iterations, the first and last S left out, S the stages); the simulator's memory "
      "walk checks every device, and a configuration that overflows one is reported, not priced",
      "our planner (sim::make_plan, partitioner pipedream-dp, schedule pipedream, K = every GPU, "
      "memory-aware) weighs its candidates at one batch and M, so it is asked twice and the "
      "faster per mini-batch is its pick: at M = the lcm of the paper's replica counts and "
      "batch M x mini-batch, where it may deal the paper's configuration, one mini-batch per "
      "replica a step; and at M = 1, batch P x mini-batch, where its data-parallel candidate is "
      "PipeDream's DP baseline. At the first its data-parallel candidate runs M micro-batches of "
      "mini-batch / P per replica before one all-reduce, which then hides behind the last "
      "micro-batch's backward only: slower than PipeDream's DP, so the planner's pick there may "
      "be too",
      "the paper's speedups are time to accuracy of real runs (AlexNet: epoch time), ours "
      "steady-state throughput ratios, of the optimizer's model and of the simulator: the "
      "paper's include its measured DP baseline's overheads and PipeDream's statistical "
      "efficiency, ours neither"};
  for (auto& line : row_notes(outcomes)) a.push_back(std::move(line));
  return a;
}

}  // namespace pipetwin::sim::pipedream
