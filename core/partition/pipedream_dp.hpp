// `pipedream-dp`: PipeDream's planner (Narayanan et al., "PipeDream: generalized pipeline
// parallelism for DNN training", SOSP'19, Section 3.1), as FTPipe describes it: "exhaustive
// search on the space of all Seq-pipes", "allowing a different number of data-parallel GPUs per
// pipeline stage" (FTPipe Sections 4 and 6).
//
// Contiguous stages, each replicated over m machines, chosen by PipeDream's dynamic program:
//   T(i -> j, m) = (1/m) max( sum_l T_l, sum_l W_l^m )     a stage of layers i..j on m machines
//   A(j, m) = min_{i < j} min_{m' < m} max( A(i, m - m'), 2 C_i, T(i+1 -> j, m') )
// where T_l is a layer's forward + backward time, W_l^m the time to synchronise its weights over
// m machines and C_i the time to send the activations between layers i and i+1 (twice: forward
// activations and backward gradients). Ours: W is the cost model's ring all-reduce of the
// stage's gradients over the stage's machines (one all-reduce per optimizer step, shared by the
// request's M micro-batches), C_i every tensor crossing the border (skip edges included) over the
// link between the two stages' machines. The stage on machines [m - m', m) is the last of A(j, m),
// so every all-reduce and transfer is priced on the devices it will really use.
//
// PipeDream's overlap assumption is kept in this program (PipeDreamPricing::kPaper, the default,
// which the reproduced FTPipe figures and tests/partition_optimal_test.cpp use): the
// max(compute, all-reduce) says communication runs completely concurrently with computation
// (FTPipe footnote 4 notes that in practice 30% does not overlap).
//
// As planned (PipeDreamPricing::kAsPlanned, what sim/planner.cpp asks for). The planner runs a
// stage replicated m times only when every stage is (data parallelism, dp = m) and then splits
// the micro-batch: b / m samples per replica, not whole micro-batches dealt out in turn as the
// paper's (1/m) T assumes — a layer's per-call time does not shrink with m. So the search covers
// what the planner can build: m replicas of every stage (b / m whole samples), K stages with
// K m <= P; for each (m, K) the contiguous split minimising the largest stage term (its step at
// b / m, what its device receives), and then the candidate whose planned_period_s() is least.
// That period is what the simulator shows, not an assumption (tests/partition_vs_sim_test.cpp,
// docs/partition-memory.md; 200 random chains x 3 clusters, the plans simulated under
// PipeDream's schedule, M = 8):
// - the all-reduce is neither hidden nor serial: DDP's buckets start during the step's last
//   backward, and only the tail past its end delays the step. On the 211 data-parallel plans, the
//   simulated time per micro-batch against max(C(b/m), W/M) (hidden): median +0.1%, worst +60%;
//   against C(b/m) + W/M (serial): median -0.9%, worst -7.9%; against C(b/m) + tail/M: 0.0%;
//   the paper's max(C(b), W/M)/m: median +1.5%, worst +95%;
// - a pipeline's period is not the slowest stage's nor a round trip's: a device's receive stream
//   takes tensors in the order it consumes them, so a gradient already sent waits behind an
//   activation needed later. Closed forms (largest of stage compute, receives and round trips)
//   were off by up to +17% on these plans; the period is therefore computed by running the chain's
//   1F1B order for a few steps with one send and one receive stream per device (pipedream_dp.cpp,
//   AsyncChain). Over all 600 plans the objective is within 0.3% of the simulation; with the
//   paper's pricing the planner's plans were off by median +11.6%, worst +1085%, and 22% slower
//   (geometric mean of simulated time per micro-batch, same sample).
//
// Memory. FTPipe Section 5.5: "lacking the way to specify memory constraints, PipeDream ended up
// with more than 1.48B parameters in the last stage" — an infeasible plan. Ours forbids stages
// whose memory per replica exceeds the request's limit; with `memory_aware = false` it plans as
// PipeDream did and reports how far over the limit that plan is. With a schedule model
// (PartitionRequest::memory) a stage's memory depends on its position (PipeDream stashes
// K - k + 1 weight versions on stage k), which the program, building prefixes, does not know:
// it prices a stage at the worst position its machines allow (pipedream_dp.cpp,
// bound_positions), an upper bound (under 1F1B and PipeDream a stage holds most when every
// machine after it hosts a stage of its own, which is the position the bound prices). When no plan
// fits it throws NoFitError carrying the leanest pipeline's need.
//
// Where the original leaves a choice: a stage count is not fixed (at most P = request.num_stages
// machines, each stage at least one); among equal bottlenecks (1e-12 relative) the program keeps
// the one with fewer replicas in the last stage and, at the end, fewer machines — replication
// costs memory on every replica and all-reduce traffic that the steady-state model does not see.
//
// Thread-safety: stateless.
#pragma once

#include <memory>
#include <vector>

#include "core/partition/partitioner.hpp"

namespace pipetwin {

// How a candidate is priced (see the comment at the top).
enum class PipeDreamPricing {
  kPaper,      // Section 3.1's T(i -> j, m), per-stage replica counts: the paper's program
  kAsPlanned,  // planned_period_s of what sim/planner.cpp builds: uniform replication only
  // The paper's program with the all-reduce added to the stage's compute, not hidden behind it,
  // as PipeDream's released optimizer (optimizer/optimizer_graph_hierarchical.py) prices it.
  kReleased,
};

struct PipeDreamOptions {
  bool memory_aware = true;  // false: PipeDream's own planner, blind to memory
  PipeDreamPricing pricing = PipeDreamPricing::kPaper;
};

struct PipeDreamPlan {
  Partition partition;      // with per-stage replica counts
  double bottleneck_s = 0;  // the objective: A(L, m), or as planned planned_period_s()
  std::vector<double> stage_memory_bytes;  // per replica of each stage
  int worst_stage = 0;                     // the stage needing the most memory
  double over_limit_bytes = 0;             // its excess over the request's limit (0: it fits)
};

// Throws InputError when, memory-aware, no plan fits; the message gives what PipeDream's own
// (memory-blind) plan would need.
PipeDreamPlan pipedream_plan(const PartitionRequest& r, const PipeDreamOptions& options = {});

std::unique_ptr<Partitioner> make_pipedream_dp_partitioner(const PipeDreamOptions& options);

// The steady-state time per micro-batch of the plan sim/planner.cpp builds from `p` under
// PipeDream's schedule (PipeDreamPricing::kAsPlanned's objective), every stage replicated
// m = p.replicas_of(0) times (uniform): dp = m pipelines, replica rho's stage s on device
// rho K + s, micro-batches of b / m samples (b = r.micro_batch); a stage's step adds, once per
// r.micro_batches backwards, the tail of its DDP all-reduces past its last backward and its
// optimizer step; transfers run on one send and one receive stream per device.
double planned_period_s(const PartitionRequest& r, const Partition& p);

}  // namespace pipetwin
