// `pipetwin reproduce pipedream`: the entry and its tables (see pipedream.hpp).
//
// 1. table1-configs: per row of the paper's Table 1, its speedup over DP beside ours: our
//    pipedream-dp's pick under its objective, and, simulated, the paper's configuration and our
//    planner's pick.
// 2. objectives: per modelled row, the time per mini-batch of our pick, of the paper's
//    configuration (at its best split) and of pure data parallelism, under every pricing; and our
//    planner's picks, simulated.
// 3. batch-sensitivity: our pick at half and twice the per-worker mini-batch we assume (Table 1
//    does not state it).
// The README's notes (pipedream_notes.cpp) say, per row, what each pricing ranks first, where
// the simulator and the objective disagree, and which term decides a pick that differs.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "studies/reproduce/entries.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim {

namespace pipedream {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

std::string PaperRow::label() const {
  return fmt::format("{}, Cluster-{} {}x{}", model, cluster, servers, gpus_per_server);
}

std::vector<PaperRow> paper_rows(const ReproContext& context, const Data& data) {
  const ReferenceTable t = load_reference(context, data.reference);
  std::vector<PaperRow> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    PaperRow row;
    row.model = t.cell(r, "model");
    row.dataset = t.cell(r, "dataset");
    row.cluster = t.cell(r, "cluster");
    row.servers = static_cast<int>(t.number(r, "servers"));
    row.gpus_per_server = static_cast<int>(t.number(r, "gpus_per_server"));
    row.config = t.cell(r, "config");
    row.speedup = t.number(r, "speedup_over_dp");
    row.uncertain = t.cell(r, "uncertain");
    parse_config(row.config, row.gpus(), fmt::format("{}, row {}", t.path, r + 1));  // checks it
    rows.push_back(std::move(row));
  }
  return rows;
}

const ModelSetting* find_model(const Data& data, const std::string& paper_name) {
  for (const auto& s : data.models) {
    if (s.paper == paper_name) return &s;
  }
  return nullptr;
}

std::string not_modelled_reason(const Data& data, const std::string& paper_name) {
  const auto it = data.not_modelled.find(paper_name);
  if (it == data.not_modelled.end()) return data.reasons.at("default")(data.args);
  std::string out;
  for (const auto& key : it->second) {
    out += (out.empty() ? "" : "; ") + data.reasons.at(key)(data.args);
  }
  return out;
}

std::string cluster_name(const Data& data, const PaperRow& row, const Catalog& catalog) {
  std::string letter = row.cluster;
  for (char& c : letter) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string name = data.cluster_file(TextArgs(data.args)
                                                 .set("letter", letter)
                                                 .set("servers", row.servers)
                                                 .set("gpus_per_server", row.gpus_per_server));
  for (const auto& n : catalog.cluster_names()) {
    if (n == name) return name;
  }
  return "";
}

double Outcome::speedup_ours() const {
  return speedup(ours, kObjective);
}

double Outcome::speedup(const Priced& p, size_t k) const {
  return not_modelled.empty() ? dp.seconds[k] / p.seconds[k] : kNaN;
}

const PlannerPick& Outcome::planner_best() const {
  const PlannerPick* best = &planner.front();
  for (const auto& p : planner) {
    if (!(p.seconds >= best->seconds) && !std::isnan(p.seconds)) best = &p;
  }
  return *best;
}

double Outcome::speedup_planner() const {
  return not_modelled.empty() ? dp.seconds[kSimulated] / planner_best().seconds : kNaN;
}

int planner_chunks(const PaperRow& row) {
  return lcm_of(parse_config(row.config, row.gpus(), row.label()));
}

bool Outcome::agrees() const {
  return not_modelled.empty() &&
         replica_counts(ours.partition) == parse_config(row.config, row.gpus(), row.label());
}

namespace {

Priced price(const Workload& s, Partition p) {
  Priced out;
  out.config = format_config(replica_counts(p));
  out.stages = describe_stages(s.cost(), p);
  for (const auto& pricing : pricings()) {
    const Price price = pricing.price(s.request(), p);
    out.seconds.push_back(price.priced() ? price.seconds : kNaN);
    out.refused.push_back(price.refused);
  }
  out.network = network_borders(s.request(), p);
  out.terms = objective_terms(s.request(), p);
  out.binding = binding_term(s.request(), p);
  out.partition = std::move(p);
  return out;
}

}  // namespace

Outcome run_row(const Data& data, const Catalog& catalog, const PaperRow& row) {
  Outcome o;
  o.row = row;
  o.model = find_model(data, row.model);
  const std::string cluster = cluster_name(data, row, catalog);
  if (o.model == nullptr) {
    o.not_modelled = not_modelled_reason(data, row.model);
  } else if (cluster.empty()) {
    o.not_modelled = data.no_cluster(TextArgs(data.args)
                                         .set("cluster", row.cluster)
                                         .set("servers", row.servers)
                                         .set("gpus_per_server", row.gpus_per_server));
  }
  if (!o.not_modelled.empty()) return o;
  const Workload s(catalog, *o.model, cluster, o.model->batch);
  o.efficiency = s.efficiency();
  o.ours = price(s, pipedream_plan(s.request()).partition);
  o.papers = price(s, best_split(s.request(), parse_config(row.config, row.gpus(), row.label())));
  o.dp = price(s, best_split(s.request(), {row.gpus()}));
  const int M = planner_chunks(row), b = o.model->batch;
  o.planner = {planner_pick(s, M, M * b), planner_pick(s, 1, row.gpus() * b)};
  return o;
}

std::vector<int> pick_at_batch(const Data& data, const Catalog& catalog, const PaperRow& row,
                               int batch) {
  const ModelSetting* model = find_model(data, row.model);
  const std::string cluster = cluster_name(data, row, catalog);
  if (model == nullptr || cluster.empty()) {
    throw InputError(fmt::format("reproduce pipedream: {} is not modelled", row.label()));
  }
  const Workload s(catalog, *model, cluster, batch);
  return replica_counts(pipedream_plan(s.request()).partition);
}

namespace {

// "; simulated: does not fit: ..." when pricing k refused it.
std::string refusal(const Priced& p, size_t k) {
  return p.refused[k].empty() ? "" : "; " + p.refused[k];
}

// The rows of one row of Table 1: its speedup under the objective, and simulated for the paper's
// configuration and our planner's pick.
void config_rows(const Data& d, const Outcome& o, ReproTable& t) {
  const auto& n = d.row_notes;
  const TextArgs args = TextArgs(d.args).set("paper", o.row.config);
  if (!o.not_modelled.empty()) {
    t.rows.push_back({o.row.label(), "speedup over DP", o.row.speedup, kNaN, "x",
                      n.not_modelled(TextArgs(args).set(
                          "reason", o.not_modelled.substr(0, o.not_modelled.find(':'))))});
    return;
  }
  t.rows.push_back({o.row.label(), "speedup over DP", o.row.speedup, o.speedup_ours(), "x",
                    n.objective(TextArgs(args)
                                    .set("ours", o.ours.config)
                                    .set("agreement", o.agrees() ? "the same" : "differs"))});
  t.rows.push_back(
      {o.row.label(), "speedup over DP, simulated: the paper's configuration", o.row.speedup,
       o.speedup(o.papers, kSimulated), "x",
       n.papers_simulated(TextArgs(args).set("refusal", refusal(o.papers, kSimulated)))});
  const PlannerPick& best = o.planner_best();
  t.rows.push_back(
      {o.row.label(), "speedup over DP, simulated: our planner's pick", o.row.speedup,
       o.speedup_planner(), "x",
       n.planner(TextArgs(args)
                     .set("planner", best.config.empty() ? "-" : best.config)
                     .set("setting", best.setting())
                     .set("refusal", best.refused.empty() ? "" : "; " + best.refused))});
}

ReproTable configs_table(const Data& d, const std::vector<Outcome>& outcomes) {
  ReproTable t = d.configs.table(d.args);
  for (const auto& o : outcomes) config_rows(d, o, t);
  return t;
}

// Our planner's picks and its data-parallel candidates, simulated.
void planner_rows(const Data& d, ReproTable& t, const Outcome& o) {
  for (const auto& p : o.planner) {
    const std::string note =
        p.refused.empty() ? fmt::format("{}: {}", p.config, p.stages) : p.refused;
    t.rows.push_back({o.row.label(), "simulated: our planner's pick at " + p.setting(), kNaN,
                      p.seconds * 1e3, "ms", note});
    t.rows.push_back(
        {o.row.label(), "simulated: data parallel at " + p.setting(), kNaN, p.dp_seconds * 1e3,
         "ms",
         d.row_notes.planner_dp(TextArgs(d.args)
                                    .set("chunks", p.chunks)
                                    .set("plural", p.chunks == 1 ? "" : "es")
                                    .set("samples", p.batch / (p.chunks * o.row.gpus())))});
  }
}

ReproTable objectives_table(const Data& d, const std::vector<Outcome>& outcomes) {
  ReproTable t = d.objectives.table(d.args);
  for (const auto& o : outcomes) {
    if (!o.not_modelled.empty()) continue;
    for (size_t k = 0; k < pricings().size(); ++k) {
      const std::string& how = pricings()[k].name;
      for (const auto& [who, p] : {std::pair<std::string, const Priced*>{"our pick", &o.ours},
                                   {"the paper's configuration", &o.papers},
                                   {"data parallel", &o.dp}}) {
        t.rows.push_back(
            {o.row.label(), fmt::format("{}: {} {}", how, who, p->config), kNaN,
             p->seconds[k] * 1e3, "ms",
             (k == kObjective ? fmt::format("{}; set by {}", p->stages, p->binding.what)
                              : p->stages) +
                 refusal(*p, k)});
      }
      t.rows.push_back(
          {o.row.label(), fmt::format("{}: speedup over DP of the paper's {}", how, o.row.config),
           o.row.speedup, o.speedup(o.papers, k), "x", d.row_notes.priced_as_ours(d.args)});
    }
    planner_rows(d, t, o);
  }
  return t;
}

ReproTable sensitivity_table(const Data& d, const Catalog& catalog,
                             const std::vector<Outcome>& outcomes) {
  ReproTable t = d.sensitivity.table(d.args);
  for (const auto& o : outcomes) {
    if (!o.not_modelled.empty()) continue;
    const int b = o.model->batch;
    for (double scale : d.batch_scales) {
      const int batch = static_cast<int>(b * scale);
      const std::vector<int> pick = pick_at_batch(d, catalog, o.row, batch);
      const bool same = pick == parse_config(o.row.config, o.row.gpus(), o.row.label());
      t.rows.push_back(
          {o.row.label(), fmt::format("our pick at {} samples per worker", batch), 1.0,
           same ? 1.0 : 0.0, "",
           d.row_notes.sensitivity(TextArgs(d.args).set("pick", format_config(pick)))});
    }
  }
  return t;
}

std::string entry_title(const Data& data, const ReproContext&) {
  return data.title(data.args);
}

ReproResult run_entry(const Data& data, const ReproContext& context) {
  std::vector<Outcome> outcomes;
  for (const auto& row : paper_rows(context, data)) {
    outcomes.push_back(run_row(data, context.catalog, row));
  }
  return result_of(context, data, outcomes);
}

}  // namespace

ReproResult result_of(const ReproContext& context, const Data& data,
                      const std::vector<Outcome>& outcomes) {
  ReproResult res;
  res.id = "pipedream";
  res.citation = data.citation(
      TextArgs(data.args).set("reference_path", load_reference(context, data.reference).path));
  res.tables = {configs_table(data, outcomes), objectives_table(data, outcomes),
                sensitivity_table(data, context.catalog, outcomes)};
  res.assumptions = notes(data, outcomes);
  return res;
}

}  // namespace pipedream

std::unique_ptr<ReproEntry> make_pipedream_entry() {
  return std::make_unique<DataEntry<pipedream::Data>>("pipedream", pipedream::load_data,
                                                      pipedream::entry_title, pipedream::run_entry);
}

}  // namespace pipetwin::sim
