// Collective: what an all-reduce costs, by algorithm, in closed form.
//
// S bytes per rank, n ranks, link bandwidth B (bytes/s) and latency alpha (s) per message:
//
//   ring          2(n-1)/n * S/B + 2(n-1) * alpha: a reduce-scatter and an all-gather of n-1
//                 steps each, every rank sending S/n per step to its successor (NCCL's ring;
//                 Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
//                 workstations", JPDC 2009).
//   tree          2 * S/B + 2 * ceil(log2 n) * alpha: NCCL's double binary tree (Sanders, Speck
//                 & Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction and
//                 scan", Parallel Computing 2009; NVIDIA's "Massively Scale Your Deep Learning
//                 Training with NCCL 2.4", 2019): a reduce up and a broadcast down, pipelined,
//                 latency logarithmic in n; NCCL's tuning model (src/graph/tuning.cc) counts a
//                 tree all-reduce at half the bus bandwidth, hence 2 * S/B.
//   hierarchical  for m ranks on each of N nodes: a reduce-scatter inside every node
//                 ((m-1)/m * S/B_intra + (m-1) * alpha_intra), m concurrent ring all-reduces of
//                 S/m across the nodes (2(N-1)/N * (S/m)/B_inter + 2(N-1) * alpha_inter, B_inter
//                 the rate each of them gets through the NICs they share), and an all-gather
//                 inside every node (as the reduce-scatter).
//
// allreduce_cost applies them to a cluster: without a topology, the ring over the slowest link
// of the ring (what the cost model always did); with one (core/topology.hpp), the rates are
// those the concurrent messages of a step leave each other on the shared links, and the
// algorithm is the fastest of the three, as NCCL's tuner picks by its own model.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

namespace pipetwin {

struct Cluster;

double ring_allreduce_s(double n, double bytes, double bandwidth, double latency);
double tree_allreduce_s(int n, double bytes, double bandwidth, double latency);
double hierarchical_allreduce_s(int nodes, int per_node, double bytes, double intra_bandwidth,
                                double intra_latency, double inter_bandwidth, double inter_latency);

enum class AllReduceAlgorithm { kRing, kTree, kHierarchical };
const char* algorithm_name(AllReduceAlgorithm a);

struct AllReduceCost {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kRing;
  double seconds = 0;
  double latency = 0;  // the part of `seconds` that is per-message latency
};

// An all-reduce of `bytes` per rank over cluster devices `devices`, in ring order.
AllReduceCost allreduce_cost(const Cluster& cluster, double bytes, const std::vector<int>& devices);
// The same with the topology's link resources already listed (topology_links(cluster)).
AllReduceCost allreduce_cost(const Cluster& cluster, const std::vector<double>& links, double bytes,
                             const std::vector<int>& devices);

}  // namespace pipetwin
