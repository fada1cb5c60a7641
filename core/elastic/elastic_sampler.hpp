// Elastic sampler: the data set re-partitioned over a changing number of pipeline replicas
// (PipeTransformer Section 3.3, "Dataset Redistribution", and Appendix D.1).
//
// "The dataset should be re-balanced to match a dynamic number of pipelines. This not only avoids
// stragglers but also ensures that gradients from all DDP processes are equally weighted." And,
// so that AutoCache's per-machine cache stays valid across epochs: "we fix a subset of entire
// samples in a machine and only do shuffle for this subset ... node_rank is used to identify
// which subset of samples a machine needs to hold. local_rank is used by DistributedSampler to
// identify which part of the shuffle subset that a worker inside a machine should train."
//
// How: node n owns the sample ids [n N / nodes, (n+1) N / nodes) for the whole run. Every epoch
// each node shuffles its subset (seeded by seed, epoch and node; SplitMix64 + Fisher-Yates, so
// every process computes the same order without talking) and hands it out as a stream. Each
// optimizer step takes the next `batch` samples of the node's stream for each of the node's
// replicas. Because a step only advances a cursor, the number of replicas may change between
// any two steps, mid-epoch included, and still every sample is trained exactly once per epoch.
// The paper rebuilds DistributedSampler at each transition, which restarts its split of the
// epoch; a cursor does the same without repeating or skipping samples.
//
// Equal weights: a step holds B samples over R replicas (the last step of an epoch may be short,
// and is split as evenly as possible; nothing is dropped). A replica that sums its samples'
// losses times sample_weight = R / B gives, after DDP averages over R replicas, every sample of
// the step the weight 1 / B, whatever replica it landed on.
//
// Thread-safety: not thread-safe; each process keeps its own copy (they agree by construction).
#pragma once

#include <cstdint>
#include <vector>

namespace pipetwin::elastic {

class ElasticSampler {
 public:
  // Throws InputError unless samples >= nodes >= 1.
  ElasticSampler(long samples, int nodes, uint64_t seed = 0, bool shuffle = true);

  long samples() const { return samples_; }
  int nodes() const { return nodes_; }
  long node_begin(int node) const;  // first id of a node's subset; node_begin(nodes) = N
  int node_of(long sample) const;

  // Starts an epoch: every cursor at 0, a fresh order.
  void begin_epoch(int epoch);
  int epoch() const { return epoch_; }
  bool epoch_done() const;
  long consumed() const;  // samples of this epoch handed out so far

  struct Step {
    std::vector<std::vector<long>> ids;  // per replica r = node * replicas_per_node + j
    long samples = 0;                    // B
    double sample_weight = 0;            // R / B
  };
  // The next step with `replicas_per_node` replicas per node, `batch` samples each.
  Step next_step(int replicas_per_node, int batch);
  // The same without the ids (the simulator counting steps): returns B.
  long skip_step(int replicas_per_node, int batch);
  // Steps left in this epoch at this width.
  long steps_left(int replicas_per_node, int batch) const;

  // Checkpointable position: resuming from it continues the same order.
  struct Position {
    int epoch = 0;
    std::vector<long> cursor;  // per node
  };
  Position position() const { return {epoch_, cursor_}; }
  void restore(const Position& p);

 private:
  long node_size(int node) const { return node_begin(node + 1) - node_begin(node); }
  // Samples replica j of a node gets when `left` remain and the step wants `batch` each.
  static long share(long left, int replicas, int j, int batch);
  void shuffle_node(int node);

  long samples_;
  int nodes_;
  uint64_t seed_;
  bool shuffle_;
  int epoch_ = 0;
  std::vector<long> cursor_;
  std::vector<std::vector<long>> order_;  // per node, materialised on the first next_step
  bool ordered_ = false;
};

}  // namespace pipetwin::elastic
