// Sweep: a Grid over the fixed inputs of a what-if study, and the CSV row of each grid point
// (`pipetwin sweep`, docs/design.md "Simulator").
//
// A row is
//   point, points                 the point's index in the grid and the grid's size
//   <knob columns>                every input of the point: the grid's fields first, in grid
//                                 order, then the fixed ones (table order of grid.hpp)
//   plan_M, plan_micro_batch,     the plan that ran: M (the chosen one for chunks=auto), samples
//   plan_batch, plan_devices      per micro-batch, global batch, devices used (K x dp)
//   iteration_time_s, throughput_samples_per_s, bubble_fraction
//   peak_memory_max_bytes, memory_capacity_bytes, fits (yes/no), oom_device, over_bytes
//   elastic_total_s, elastic_samples_per_s, baseline_total_s, speedup, final_frozen, final_K,
//   final_dp                      only in a sweep with `alpha`: each point is also a whole
//                                 PipeTransformer run (sim/elastic_sim.hpp) of `epochs` epochs of
//                                 `samples` samples, starting from the point's K, with the
//                                 point's batch / dp samples per pipeline (AutoDP then chooses
//                                 the replicas, AutoPipe the partition: dp and partitioner only
//                                 shape the plain columns), against the no-freeze baseline
//   error                         why an infeasible point has no plan (empty otherwise)
// so the header names the grid's fields (a resumed file with another grid is caught by its
// header) and every row carries all its inputs (a file of another sweep with the same fields is
// caught by its rows). Numbers are written in full precision ("{}"), so the same point gives the
// same bytes on any thread.
//
// Construction resolves, once, every cluster and every model the grid can name (a cluster
// missing from the catalog is an InputError before anything runs); evaluation then only plans
// and simulates.
//
// Thread-safety: immutable after construction; row() may be called from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/framework.hpp"
#include "profiles/model_source.hpp"
#include "core/profile.hpp"
#include "studies/sweep/csv.hpp"
#include "studies/sweep/evaluate.hpp"
#include "studies/sweep/grid.hpp"

namespace pipetwin::sim {

struct SweepInputs {
  PointConfig base;          // the fixed inputs (CLI flags); the grid overrides its fields
  std::string profile_path;  // a profile file instead of resolving base.model
  std::string catalog_dir;   // hardware catalog; empty: Catalog::default_dir()
  int iterations = 0;        // mini-batches simulated per point; 0: schedule default
  long samples = 0;          // elastic points (alpha): samples per epoch
  int epochs = 1;            // elastic points: epochs
  // --framework (core/framework.hpp): added to every planned point (not to elastic runs); the
  // identity: none.
  Framework framework{};
};

class Sweep {
 public:
  Sweep(Grid grid, SweepInputs inputs);

  const Grid& grid() const { return grid_; }
  int64_t size() const { return grid_.size(); }
  const SweepInputs& inputs() const { return inputs_; }

  PointConfig config(int64_t index) const;
  CsvRow header() const;
  // Number of leading columns that are inputs (point, points and the knob columns).
  size_t input_columns() const { return 2 + order_.size(); }
  // The input columns of point `index` (no evaluation).
  CsvRow inputs_row(int64_t index) const;
  // Plans and simulates point `index`; the full row.
  CsvRow row(int64_t index) const;
  Evaluation evaluate(const PointConfig& config) const;
  bool elastic() const { return elastic_; }
  // The columns after the knob columns, in order.
  std::vector<std::string> result_columns() const;

 private:
  void resolve_clusters();
  void resolve_models();
  void resolve_one(const std::string& model, const std::string& device,
                   const ResolveOptions& precision, bool model_axis);
  void resolve_shard(const std::string& model, const std::string& device, const ResolveOptions& o,
                     bool model_axis);
  std::vector<TensorParallel> tensor_parallel_values() const;
  void check_batch_fields() const;
  // A whole elastic run of point `c`: the elastic columns, or an error text.
  std::string run_elastic(const PointConfig& c, CsvRow& columns) const;
  const Cluster& cluster(const std::string& name) const;
  // The point's cluster with its topology what-ifs (PointConfig::nics_per_node, p2p) applied;
  // InputError when a value does not fit the cluster.
  Cluster point_cluster(const PointConfig& c) const;
  const Profile& profile(const PointConfig& c, const std::string& device) const;

  Grid grid_;
  SweepInputs inputs_;
  Catalog catalog_;
  std::vector<const Knob*> order_;  // knob columns: grid fields, then the others
  bool elastic_ = false;            // alpha is set: every point is also an elastic run
  std::map<std::string, Cluster> clusters_;
  // (model, device, dtype, optimizer, tensor-parallel shard: describe(TensorParallel))
  std::map<std::array<std::string, 5>, Profile> profiles_;
  std::map<std::array<std::string, 5>, std::string> shard_errors_;  // shards that cannot be made
};

}  // namespace pipetwin::sim
