// `pipetwin reproduce pipedream`: PipeDream (Narayanan et al., "PipeDream: Generalized Pipeline
// Parallelism for DNN Training", SOSP'19), Table 1 — the configuration PipeDream's optimizer
// picked per model and cluster ("15-1", "Straight", "16") beside the pick of our `pipedream-dp`
// partitioner (core/partition/pipedream_dp.hpp, the program of the paper's Section 3.1) and of our
// planner (sim::make_plan: that program refined by simulation) on the same models and clusters.
//
//   pipedream.cpp          the entry: its settings, one row of the comparison, its tables
//   pipedream_configs.cpp  Table 1's notation, the objective of a configuration, its best split
//   pipedream_sim.cpp      a configuration simulated as PipeDream runs it; our planner's pick
//   pipedream_notes.cpp    the README's assumptions and per-row explanations
//
// A configuration is a list of per-stage replica counts; the paper prints it but not which layers
// its stages hold. So the paper's configuration is split where the objective our partitioner
// minimises (objective_s) puts its cuts. Every configuration is then priced twice (pricings()):
// by that objective, and by the simulator running it under PipeDream's asynchronous schedule
// (Section 3.3: 1F1B with weight stashing, a replicated stage's mini-batches dealt round-robin).
// "Speedup over DP" is the pure data-parallel configuration's time per mini-batch over the
// configuration's, under one pricing. Which models (and their mini-batches), the cluster files,
// the batch scales and the text are in experiments/reference/pipedream-entry.json (Data below).
//
// Thread-safety: pure functions; a Workload is immutable after construction.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/partition/partitioner.hpp"
#include "core/plan.hpp"
#include "studies/reproduce/entry_data.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/reproduce/text.hpp"

namespace pipetwin::sim::pipedream {

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

// A model of Table 1 we describe in the analytic zoo, trained as PipeDream trains it.
struct ModelSetting {
  std::string paper;      // "VGG-16"
  std::string zoo;        // "vgg:16"
  int batch = 0;          // samples per worker per mini-batch
  std::string optimizer;  // core/precision.hpp's name
};

// experiments/reference/pipedream-entry.json (see its "about").
struct Data {
  Text title;
  std::string reference;  // Table 1's file
  Text citation;
  std::vector<ModelSetting> models;
  std::map<std::string, Text> reasons;                           // why a model is not modelled
  std::map<std::string, std::vector<std::string>> not_modelled;  // model -> keys of reasons
  Text no_cluster, cluster_file;
  std::vector<double> batch_scales;  // of the model's mini-batch, for the sensitivity table
  TableText configs, objectives, sensitivity;
  struct {
    Text not_modelled, objective, papers_simulated, planner, planner_dp, priced_as_ours,
        sensitivity;
  } row_notes;
  std::vector<Text> assumptions;
  struct {
    Text uncertain, efficiency, not_modelled, summary, priced, planner_head, planner_nothing,
        planner_pick, agree, disagree, disagree_memory, disagree_pair, paper_faster, network,
        different, hidden_allreduce;
  } notes;
  TextArgs args;  // what every template may name: the clusters' facts, zoo_models, ...
};
Data load_data(const ReproContext& context);

std::vector<PaperRow> paper_rows(const ReproContext& context, const Data& data);

// nullptr for the models we do not describe (see not_modelled_reason).
const ModelSetting* find_model(const Data& data, const std::string& paper_name);
std::string not_modelled_reason(const Data& data, const std::string& paper_name);
// The shipped cluster file of a row ("pipedream-cluster-a-4x4-v100"); empty when none ships.
std::string cluster_name(const Data& data, const PaperRow& row, const Catalog& catalog);

// ---- pricing
// -------------------------------------------------------------------------------------

// One model on one cluster: the analytic profile (float32, the model's optimizer) on the
// cluster's GPU, with the efficiencies calibrated for that GPU where the catalog has them
// (<catalog>/efficiency/<gpu>-float32.json or <gpu>.json, as profiles/model_source.hpp looks them
// up) and the built-in defaults otherwise, and PipeDream's request: P = every GPU of the cluster,
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
  double bytes = 0;    // a border: the activations per mini-batch, each way
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

// What one pricing says of one configuration: seconds per mini-batch (of the request's
// micro_batch samples), or NaN and why it has no price (a plan that does not fit memory).
struct Price {
  double seconds = 0;
  std::string refused;  // "does not fit: device 0 (v100-16gb #0) needs 17.20 GiB of 16.00 GiB"
  bool priced() const { return refused.empty(); }
};

// A border after a stage replicated unevenly, as the network sees it: the objective prices it as
// 2 C over the link between the stage's last worker and the next stage's first, but mini-batch j
// goes from replica j mod r of the one to replica j mod r' of the other (Section 3.3's
// round-robin), so some of them cross the inter-server network.
struct NetworkBorder {
  Term priced;     // the objective's "border k-1|k (2 C)"
  int remote = 0;  // of `cycle` consecutive mini-batches, those that cross servers
  int cycle = 0;   // lcm(r, r')
  // Per mini-batch, a lower bound on any schedule's time: the most activation bytes one server
  // receives from other servers per mini-batch, over its NICs' bandwidth (Cluster::topology's
  // nics_per_node x the inter-server link; the gradients going back not counted).
  double nic_s = 0;
};
// The borders of `p` (replicated unevenly, on consecutive workers as pipedream_run_plan places
// it) where some mini-batches cross servers; empty for one replicated alike.
std::vector<NetworkBorder> network_borders(const PartitionRequest& r, const Partition& p);

// A way to price a configuration, one column of the entry's tables: kObjective (the one the
// paper's configurations are split by; it never refuses) and kSimulated (simulated_price).
struct Pricing {
  std::string name;  // "pipedream-dp objective"
  std::function<Price(const PartitionRequest&, const Partition&)> price;
};
const std::vector<Pricing>& pricings();
inline constexpr size_t kObjective = 0, kSimulated = 1;

// The contiguous split into replicas.size() stages with these replica counts that minimises
// objective_s (ties: the more even split); InputError when the model has fewer layers than
// stages or the counts need more workers than the request has.
Partition best_split(const PartitionRequest& r, const std::vector<int>& replicas);

// ---- simulated (pipedream_sim.cpp) ------------------------------------------------------------

// PipeDream's own schedule (Section 3.3: asynchronous 1F1B, weight stashing; core/schedule).
inline constexpr const char* kSchedule = "pipedream";

int lcm_of(const std::vector<int>& counts);

// The plan that runs `p` as PipeDream runs it: schedule kSchedule, every micro-batch r.micro_batch
// samples (PipeDream's per-worker mini-batch), the stages on consecutive devices. Replicated
// unevenly ("15-1"): the stages keep their replica counts (StagePlan::replicas, round-robin), M =
// the lcm of the counts micro-batches per step, so a stage of r replicas all-reduces once every
// M / r of its mini-batches (once per mini-batch for "15-1" and "14-1-1"). Replicated alike
// ("16", "8-8"): data parallelism of the unreplicated pipeline, M = 1, one all-reduce per
// mini-batch as PipeDream's DP baseline. Batch = dp x M x r.micro_batch.
Plan pipedream_run_plan(const PartitionRequest& r, const Partition& p);
// Iterations simulated: 2 S + 4 for S stages, the asynchronous schedule's S fill and S drain steps
// left out of the steady window (core/metrics.cpp) and three step intervals measured between.
int sim_iterations(const Plan& plan);
// The simulated steady-state iteration time of `plan` per `mini_batch` samples (iteration x
// mini_batch / batch), refused when the memory walk overflows a device.
Price simulate_per_mini_batch(const Plan& plan, int mini_batch);
// simulate_per_mini_batch(pipedream_run_plan(r, p), r.micro_batch).
Price simulated_price(const PartitionRequest& r, const Partition& p);

// Our planner's pick (sim::make_plan: pipedream-dp refined by simulation, sim/planner.cpp) for the
// workload: K = every GPU, schedule kSchedule, `chunks` micro-batches per step of `batch` samples,
// memory-aware. The planner weighs its candidates at this one batch: its data-parallel candidate
// runs `chunks` micro-batches of batch / (P chunks) per replica, one all-reduce per step.
struct PlannerPick {
  Plan plan;
  int chunks = 0, batch = 0;
  std::string config;           // Table 1's notation ("15-1"; "16" for data parallelism)
  std::string stages;           // describe_stages
  double seconds = 0;           // simulated, per mini-batch of the workload's size; NaN: refused
  double dp_seconds = 0;        // the planner's data-parallel candidate at the same batch and M
  std::string refused;          // the planner's refusal, or the pick's overflow; else empty
  std::string setting() const;  // "M=15, batch 960"
};
PlannerPick planner_pick(const Workload& w, int chunks, int batch);

// ---- one row of the comparison -----------------------------------------------------------------

struct Priced {
  Partition partition;
  std::string config;                  // Table 1's notation
  std::string stages;                  // describe_stages
  std::vector<double> seconds;         // per pricing; NaN where refused
  std::vector<std::string> refused;    // per pricing: why not priced, else empty
  std::vector<Term> terms;             // objective_terms
  std::vector<NetworkBorder> network;  // network_borders
  Term binding;                        // the largest of them
};

struct Outcome {
  PaperRow row;
  std::string not_modelled;  // why not, when we do not model the row
  const ModelSetting* model = nullptr;
  std::string efficiency;   // Workload::efficiency
  Priced ours, papers, dp;  // our pick, the paper's configuration (best split), P-way DP
  // Our planner at M = planner_chunks(row) micro-batches of the mini-batch (it may deal the
  // paper's configuration), and at M = 1, batch P x mini-batch (its data-parallel candidate is
  // then PipeDream's DP baseline, `dp` simulated).
  std::vector<PlannerPick> planner;
  double speedup_ours() const;  // dp / ours, the objective
  // dp / p under pricing k; NaN where either is refused or the row is not modelled.
  double speedup(const Priced& p, size_t k) const;
  // The faster per mini-batch of the planner's picks (the first when neither is priced).
  const PlannerPick& planner_best() const;
  double speedup_planner() const;  // simulated DP / planner_best
  bool agrees() const;             // the same configuration string
};
// M for our planner's first request: the lcm of the paper configuration's replica counts (15 for
// "15-1", 16 for "16"), the fewest micro-batches that deal the paper's configuration round-robin
// with one mini-batch of b samples per replica per step, as PipeDream runs it.
int planner_chunks(const PaperRow& row);
Outcome run_row(const Data& data, const Catalog& catalog, const PaperRow& row);
// Our pick for the row's model on its cluster at another per-worker mini-batch (the sensitivity
// of the pick to the batch, which the paper's Table 1 does not state).
// InputError for a row we do not model.
std::vector<int> pick_at_batch(const Data& data, const Catalog& catalog, const PaperRow& row,
                               int batch);

// The entry's result from run_row of every row of Table 1, in order (what `pipetwin reproduce
// pipedream` runs; the tests reuse their outcomes).
ReproResult result_of(const ReproContext& context, const Data& data,
                      const std::vector<Outcome>& outcomes);

// The README's notes (pipedream_notes.cpp): the assumptions, then per modelled row what each
// pricing ranks first and where the simulator and the objective disagree, and why every pick of
// ours that differs from the paper's does.
std::vector<std::string> notes(const Data& data, const std::vector<Outcome>& outcomes);

// "layers conv1_1-pool5 | fc6-fc8": the stages of a partition by the names of their layers.
std::string describe_stages(const CostModel& cost, const Partition& p);

}  // namespace pipetwin::sim::pipedream
