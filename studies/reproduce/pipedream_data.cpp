// `pipetwin reproduce pipedream`: its data file, experiments/reference/pipedream-entry.json (see
// pipedream.hpp's Data), read and checked before anything runs.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim::pipedream {

namespace {

std::vector<ModelSetting> models(const JsonView& j) {
  std::vector<ModelSetting> out;
  for (const auto& m : j.items()) {
    m.allow_only({"paper", "zoo", "batch", "optimizer"});
    ModelSetting s{m.string("paper"), zoo_model_at(m.at("zoo")), m.at("batch").as_int32(),
                   m.string("optimizer")};
    if (s.batch < 1)
      m.at("batch").fail(fmt::format("expected a positive integer, got {}", s.batch));
    try {
      parse_optimizer(s.optimizer, "optimizer");
    } catch (const InputError& e) {
      m.at("optimizer").fail(e.what());
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) j.fail("expected a non-empty array");
  return out;
}

void read_not_modelled(const JsonView& j, Data& d) {
  j.allow_only({"reasons", "models", "no_cluster"});
  const JsonView reasons = j.at("reasons");
  for (const auto& key : reasons.keys()) d.reasons[key] = text_at(reasons.at(key));
  reasons.at("default");  // required
  const JsonView models = j.at("models");
  for (const auto& model : models.keys()) {
    for (const auto& key : models.at(model).items()) {
      const std::string k = key.as_string();
      if (d.reasons.count(k) == 0) key.fail(fmt::format("no reason \"{}\" under reasons", k));
      d.not_modelled[model].push_back(k);
    }
  }
  d.no_cluster = text_at(j.at("no_cluster"));
}

void read_text(const JsonView& j, Data& d) {
  read_fields(j.at("tables"), {Field("configs", &d.configs), Field("objectives", &d.objectives),
                               Field("sensitivity", &d.sensitivity)});
  auto& r = d.row_notes;
  read_fields(j.at("row_notes"),
              {Field("not_modelled", &r.not_modelled), Field("objective", &r.objective),
               Field("papers_simulated", &r.papers_simulated), Field("planner", &r.planner),
               Field("planner_dp", &r.planner_dp), Field("priced_as_ours", &r.priced_as_ours),
               Field("sensitivity", &r.sensitivity)});
  d.assumptions = texts(j.at("assumptions"));
  auto& n = d.notes;
  read_fields(
      j.at("notes"),
      {Field("uncertain", &n.uncertain), Field("efficiency", &n.efficiency),
       Field("not_modelled", &n.not_modelled), Field("summary", &n.summary),
       Field("priced", &n.priced), Field("planner_head", &n.planner_head),
       Field("planner_nothing", &n.planner_nothing), Field("planner_pick", &n.planner_pick),
       Field("agree", &n.agree), Field("disagree", &n.disagree),
       Field("disagree_memory", &n.disagree_memory), Field("disagree_pair", &n.disagree_pair),
       Field("paper_faster", &n.paper_faster), Field("network", &n.network),
       Field("different", &n.different), Field("hidden_allreduce", &n.hidden_allreduce)});
}

// The values every template may name (see the data file's "about").
TextArgs entry_args(const JsonView& clusters, const ReproContext& context, const Data& d) {
  TextArgs a;
  for (const auto& key : clusters.keys()) {
    const std::string name = cluster_at(clusters.at(key), context.catalog);
    a.merge(cluster_facts(load_cluster(name, context.catalog), key + "_"));
  }
  std::string zoo, batches;
  for (size_t i = 0; i < d.models.size(); ++i) {
    zoo += (i == 0 ? "" : i + 1 == d.models.size() ? " and " : ", ") + d.models[i].zoo;
    batches += fmt::format("{}{} {}", i == 0 ? "" : ", ", d.models[i].paper, d.models[i].batch);
  }
  return a.set("zoo_models", zoo).set("mini_batches", batches).set("reference", d.reference);
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc =
      load_entry_doc(context, "pipedream-entry.json", "pipetwin.reproduce.pipedream");
  const JsonView j = doc.root();
  j.allow_only({"format", "version", "about", "title", "reference", "citation", "models",
                "not_modelled", "cluster_file", "clusters", "batch_scales", "tables", "row_notes",
                "assumptions", "notes"});
  Data d;
  d.title = text_at(j.at("title"));
  d.reference = j.string("reference");
  d.citation = text_at(j.at("citation"));
  d.models = models(j.at("models"));
  read_not_modelled(j.at("not_modelled"), d);
  d.cluster_file = text_at(j.at("cluster_file"));
  d.batch_scales = positive_numbers(j.at("batch_scales"));
  read_text(j, d);
  d.args = entry_args(j.at("clusters"), context, d);
  return d;
}

}  // namespace pipetwin::sim::pipedream
