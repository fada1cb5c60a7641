// `metis`: METIS k-way graph partitioning (Karypis and Kumar) as the graph-partitioning baseline
// FTPipe lets compete with Mixed-pipe (FTPipe Section 4: "(d) Metis [24], a general graph
// partitioning scheme that optimizes communications under load balancing constraints. The output
// can be either a Seq-pipe or a Mixed-pipe. It does not optimize pipeline throughput directly").
//
// The layer graph goes to METIS_PartGraphKway undirected, one vertex per layer with two balance
// constraints — compute (forward + backward at the micro-batch) and memory (the layer's
// stage_memory_bytes) — and edge weights the bytes per sample between the two layers; P parts,
// one per GPU, minimising the edge cut. Weights are scaled to integers (compute and memory to at
// most 100000 per layer, bytes to at most 1000000 per edge, each at least 1). The seed is fixed,
// so the result is deterministic.
//
// METIS knows nothing of direction, so its parts may depend on each other in both directions (A
// feeds B feeds A). We repair that by splitting parts into stages: layers are visited in a
// topological order and each joins the newest stage of its part, unless one of its inputs comes
// from a stage that the newest stage already (transitively) feeds — joining would close a cycle —
// in which case the part opens a new stage on the same GPU. A new stage only receives edges, so
// the stage graph stays acyclic, and a part is split only where its layers really interleave with
// another part's. Memory: when a GPU ends up over the limit we ask METIS again with a tighter
// memory balance (imbalance 3%, then 1%, then 0.1%, trading compute balance for it) and throw the
// InputError of check_memory() if it still does not fit.
//
// Thread-safety: stateless (METIS_PartGraphKway is reentrant).
#include <metis.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/partition/partitioners.hpp"

namespace pipetwin {

namespace {

idx_t scaled(double x, double top, double range) {
  return top > 0 ? std::max<idx_t>(1, static_cast<idx_t>(std::llround(x / top * range))) : 1;
}

// METIS parts (one per layer) with `memory_imbalance` on the memory constraint.
std::vector<idx_t> metis_parts(const PartitionRequest& r, double compute_imbalance,
                               double memory_imbalance) {
  const CostModel& cm = *r.cost;
  const int L = cm.num_layers();
  std::vector<double> compute, memory;
  for (int l = 0; l < L; ++l) {
    compute.push_back(cm.forward_s(l, r.micro_batch) + cm.backward_s(l, r.micro_batch));
    memory.push_back(stage_memory_bytes(r, {l}));
  }
  std::vector<std::map<int, double>> adj(static_cast<size_t>(L));
  double top_bytes = 0;
  for (const auto& e : cm.graph().edges()) {
    if (e.from == e.to) continue;
    adj[static_cast<size_t>(e.from)][e.to] += e.bytes_per_sample;
    adj[static_cast<size_t>(e.to)][e.from] += e.bytes_per_sample;
    top_bytes = std::max(top_bytes, adj[static_cast<size_t>(e.from)][e.to]);
  }
  const double top_c = *std::max_element(compute.begin(), compute.end());
  const double top_m = *std::max_element(memory.begin(), memory.end());
  std::vector<idx_t> xadj{0}, adjncy, adjwgt, vwgt;
  for (int l = 0; l < L; ++l) {
    for (const auto& [n, w] : adj[static_cast<size_t>(l)]) {
      adjncy.push_back(n);
      adjwgt.push_back(scaled(w, top_bytes, 1e6));
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
    vwgt.push_back(scaled(compute[static_cast<size_t>(l)], top_c, 1e5));
    vwgt.push_back(scaled(memory[static_cast<size_t>(l)], top_m, 1e5));
  }
  idx_t nvtxs = L, ncon = 2, nparts = r.num_stages, objval = 0;
  std::vector<real_t> ubvec{static_cast<real_t>(compute_imbalance),
                            static_cast<real_t>(memory_imbalance)};
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 7;
  options[METIS_OPTION_NUMBERING] = 0;
  std::vector<idx_t> part(static_cast<size_t>(L), 0);
  if (nparts == 1) return part;
  idx_t* adjacency = adjncy.empty() ? nullptr : adjncy.data();
  idx_t* weights = adjwgt.empty() ? nullptr : adjwgt.data();
  int status =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjacency, vwgt.data(), nullptr, weights,
                          &nparts, nullptr, ubvec.data(), options, &objval, part.data());
  if (status != METIS_OK) {
    status = METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adjacency, vwgt.data(), nullptr,
                                      weights, &nparts, nullptr, ubvec.data(), options, &objval,
                                      part.data());
  }
  if (status != METIS_OK) throw std::runtime_error(fmt::format("METIS failed ({})", status));
  return part;
}

// True when `from` reaches `to` in the stage graph.
bool reaches(const std::vector<std::set<int>>& succ, int from, int to) {
  std::vector<int> stack{from};
  std::set<int> seen{from};
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    if (s == to) return true;
    for (int t : succ[static_cast<size_t>(s)]) {
      if (seen.insert(t).second) stack.push_back(t);
    }
  }
  return false;
}

// Splits METIS's parts into stages whose graph is acyclic (see the file comment).
Partition acyclic_stages(const ModelGraph& g, const std::vector<idx_t>& part) {
  std::vector<int> stage_of(static_cast<size_t>(g.num_layers()), -1);
  std::map<idx_t, int> newest;  // part -> its newest stage
  std::vector<std::set<int>> succ;
  std::vector<std::vector<int>> stages;
  std::vector<int> device;
  for (int l : g.topological_order()) {
    const idx_t p = part[static_cast<size_t>(l)];
    std::set<int> inputs;
    for (const auto& e : g.in_edges(l)) inputs.insert(stage_of[static_cast<size_t>(e.from)]);
    auto it = newest.find(p);
    int s = it == newest.end() ? -1 : it->second;
    for (int q : inputs) {
      if (s >= 0 && q != s && reaches(succ, s, q)) s = -1;
    }
    if (s < 0) {
      s = static_cast<int>(stages.size());
      stages.emplace_back();
      succ.emplace_back();
      device.push_back(static_cast<int>(p));
      newest[p] = s;
    }
    stages[static_cast<size_t>(s)].push_back(l);
    stage_of[static_cast<size_t>(l)] = s;
    for (int q : inputs) {
      if (q != s) succ[static_cast<size_t>(q)].insert(s);
    }
  }
  return renumber_devices(order_stages(g, std::move(stages), std::move(device)));
}

bool fits(const PartitionRequest& r, const Partition& p) {
  if (r.memory_limit_bytes <= 0) return true;
  for (double need : device_memory_bytes(r, p)) {
    if (need > r.memory_limit_bytes) return false;
  }
  return true;
}

class Metis : public Partitioner {
 public:
  std::string name() const override { return "metis"; }
  Partition partition(const PartitionRequest& r) const override {
    const std::string who = "partitioner metis";
    check_partition_request(r, who, /*needs_index_order=*/false);
    const std::vector<std::pair<double, double>> tries{{1.03, 1.03}, {1.10, 1.01}, {1.30, 1.001}};
    Partition p;
    for (const auto& [compute, memory] : tries) {
      p = acyclic_stages(r.cost->graph(), metis_parts(r, compute, memory));
      if (fits(r, p)) break;
    }
    check_memory(r, p, who);
    return p;
  }
};

}  // namespace

std::unique_ptr<Partitioner> make_metis_partitioner() {
  return std::make_unique<Metis>();
}

}  // namespace pipetwin
