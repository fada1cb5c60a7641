// `pipetwin reproduce pipedream`: PipeDream (Narayanan et al., "PipeDream: Generalized Pipeline
// Parallelism for DNN Training", SOSP'19), Table 1 — the configuration PipeDream's optimizer
// picked per model and cluster ("15-1", "Straight", "16") beside the pick of our `pipedream-dp`
// partitioner (core/partition/pipedream_dp.hpp, the program of the paper's Section 3.1) on the
// same models and clusters.
//
//   pipedream.cpp          the entry: its settings, tables and the README's explanations
//   pipedream_configs.cpp  Table 1's notation, the pricing of a configuration, the best split of
//                          a given configuration, and one row of the comparison
//
// A configuration is a list of per-stage replica counts; the paper prints it but not which layers
// its stages hold. So the paper's configuration is priced at its best contiguous split under the
// same objective our partitioner minimises (objective_s), and "speedup over DP" is the pure
// data-parallel configuration's time over that of the configuration. The times are pipedream-dp's
// objective, not a simulation: the planner and simulator do not yet run stages replicated by
// different amounts. `pricings()` is the one place a simulated column is to be added.
//
// Thread-safety: pure functions; a Workload is immutable after construction.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/partition/partitioner.hpp"
#include "sim/reproduce/reproduce.hpp"

namespace pipetwin::sim::pipedream {

inline constexpr const char* kReference = "pipedream-table1-configs.csv";

// ---- Table 1's notation ------------------------------------------------------------------------

// "15-1" (stage 0 replicated on 15 workers, stage 1 on one), "Straight" (two or more stages, one
// worker each), "16" (a single stage: data parallelism on 16 workers).
std::string format_config(const std::vector<int>& replicas);
// Its inverse on `gpus` workers ("Straight": `gpus` stages of one worker); an InputError naming
// `origin` and the text when it is neither.
std::vector<int> parse_config(const std::string& text, int gpus, const std::string& origin);
// The replica count of every stage of `p` (one each when it lists none).
std::vector<int> replica_counts(const Partition& p);

// ---- the paper's rows and how we model them ----------------------------------------------------

struct PaperRow {
  std::string model, dataset, cluster;  // cluster "A", "B" or "C"
  int servers = 0, gpus_per_server = 0;
  std::string config;  // as printed
  double speedup = 0;  // over DP, as printed
  std::string uncertain;
  int gpus() const { return servers * gpus_per_server; }
  std::string label() const;  // "VGG-16, Cluster-A 4x4"
};
std::vector<PaperRow> paper_rows(const ReproContext& context);

// A model of Table 1 we describe in the analytic zoo, trained as PipeDream trains it.
struct ModelSetting {
  std::string paper;      // "VGG-16"
  std::string zoo;        // "vgg:16"
  int batch = 0;          // samples per worker per mini-batch
  std::string optimizer;  // core/precision.hpp's name
};
// nullptr for the models we do not describe (see not_modelled_reason).
const ModelSetting* find_model(const std::string& paper_name);
std::string not_modelled_reason(const std::string& paper_name);
// The shipped cluster file of a row ("pipedream-cluster-a-4x4-v100"); empty when none ships.
std::string cluster_name(const PaperRow& row, const Catalog& catalog);

// ---- pricing
// -------------------------------------------------------------------------------------

// One model on one cluster: the analytic profile (float32, the model's optimizer) on the
// cluster's GPU, with the efficiencies calibrated for that GPU where the catalog has them
// (<catalog>/efficiency/<gpu>-float32.json or <gpu>.json, as core/model_source.hpp looks them up)
// and the built-in defaults otherwise, and PipeDream's request: P = every GPU of the cluster,
// mini-batches of `batch` samples per worker, weights updated after every mini-batch (M = 1), no
// memory limit (PipeDream's optimizer has none; FTPipe Section 5.5).
class Workload {
 public:
  Workload(const Catalog& catalog, const ModelSetting& model, const std::string& cluster,
           int batch);
  const PartitionRequest& request() const { return request_; }
  const CostModel& cost() const { return *cost_; }
  // "calibrated (<file>)" or "the built-in defaults (no calibration for <gpu>)".
  const std::string& efficiency() const { return efficiency_; }

 private:
  std::unique_ptr<CostModel> cost_;
  std::string efficiency_;
  PartitionRequest request_;
};

// One term of the objective: "stage 0 compute", "stage 0 all-reduce", "border 1 (2 C)".
struct Term {
  std::string what;
  double seconds = 0;  // its share per mini-batch: whole_s / workers
  std::string detail;  // the numbers it is made of
  int workers = 1;     // it is shared by (a stage's replicas; 1 for a border)
  double whole_s() const { return seconds * workers; }
};
// Every term of PipeDream's objective for `p` (Section 3.1, as pipedream-dp prices it): per stage
// on m consecutive workers, its compute (forward + backward of the mini-batch) over m and the
// all-reduce of its gradients over its m workers over m; per border, 2 C: the activations forward
// and their gradients back over the link between the last worker of one stage and the first of
// the next. The stages must be contiguous ranges in layer order (InputError otherwise).
std::vector<Term> objective_terms(const PartitionRequest& r, const Partition& p);
// The largest term: seconds per mini-batch in steady state (what pipedream-dp minimises).
double objective_s(const PartitionRequest& r, const Partition& p);
// The term that sets objective_s.
Term binding_term(const PartitionRequest& r, const Partition& p);

// A way to price a configuration, one column of the entry's tables; the first is the one the
// paper's configurations are split by. A simulated pricing is one more entry of pricings().
struct Pricing {
  std::string name;  // "pipedream-dp objective"
  std::function<double(const PartitionRequest&, const Partition&)> time_s;
};
const std::vector<Pricing>& pricings();

// The contiguous split into replicas.size() stages with these replica counts that minimises
// objective_s (ties: the more even split); InputError when the model has fewer layers than
// stages or the counts need more workers than the request has.
Partition best_split(const PartitionRequest& r, const std::vector<int>& replicas);

// ---- one row of the comparison -----------------------------------------------------------------

struct Priced {
  Partition partition;
  std::string config;           // Table 1's notation
  std::string stages;           // describe_stages
  std::vector<double> seconds;  // per pricing
  std::vector<Term> terms;      // objective_terms
  Term binding;                 // the largest of them
};

struct Outcome {
  PaperRow row;
  std::string not_modelled;  // why not, when we do not model the row
  const ModelSetting* model = nullptr;
  std::string efficiency;         // Workload::efficiency
  Priced ours, papers, dp;        // our pick, the paper's configuration (best split), P-way DP
  double speedup_ours() const;    // dp / ours, first pricing
  double speedup_papers() const;  // dp / papers
  bool agrees() const;            // the same configuration string
};
Outcome run_row(const Catalog& catalog, const PaperRow& row);
// Our pick for the row's model on its cluster at another per-worker mini-batch (the sensitivity
// of the pick to the batch, which the paper's Table 1 does not state).
// InputError for a row we do not model.
std::vector<int> pick_at_batch(const Catalog& catalog, const PaperRow& row, int batch);

// "layers conv1_1-pool5 | fc6-fc8": the stages of a partition by the names of their layers.
std::string describe_stages(const CostModel& cost, const Partition& p);

}  // namespace pipetwin::sim::pipedream
