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
// PipeDream's overlap assumption is kept: the max(compute, all-reduce) says communication runs
// completely concurrently with computation (FTPipe footnote 4 notes that in practice 30% does not
// overlap).
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

struct PipeDreamOptions {
  bool memory_aware = true;  // false: PipeDream's own planner, blind to memory
};

struct PipeDreamPlan {
  Partition partition;                     // with per-stage replica counts
  double bottleneck_s = 0;                 // the program's objective, A(L, m)
  std::vector<double> stage_memory_bytes;  // per replica of each stage
  int worst_stage = 0;                     // the stage needing the most memory
  double over_limit_bytes = 0;             // its excess over the request's limit (0: it fits)
};

// Throws InputError when, memory-aware, no plan fits; the message gives what PipeDream's own
// (memory-blind) plan would need.
PipeDreamPlan pipedream_plan(const PartitionRequest& r, const PipeDreamOptions& options = {});

std::unique_ptr<Partitioner> make_pipedream_dp_partitioner(const PipeDreamOptions& options);

}  // namespace pipetwin
