// `pipetwin reproduce pipetransformer`: its data file, experiments/reference/
// pipetransformer-entry.json (see pipetransformer.hpp's Data), read and checked before anything
// runs.
#include <fmt/format.h>

#include "studies/reproduce/pipetransformer.hpp"

namespace pipetwin::sim::pipetransformer {

namespace {

std::map<std::string, std::string> string_map(const JsonView& j) {
  std::map<std::string, std::string> out;
  for (const auto& key : j.keys()) out[key] = j.string(key);
  return out;
}

void read_setting(const JsonView& j, const ReproContext& context, Data& d) {
  read_fields(j.at("references"),
              {Field("table1", &d.table1_reference), Field("table2", &d.table2_reference),
               Field("table3", &d.table3_reference), Field("text", &d.text_reference)});
  d.citation = text_at(j.at("citation"));
  d.cluster = cluster_at(j.at("cluster"), context.catalog);
  d.alpha_text = j.string("alpha");
  d.alpha = formula_at(j.at("alpha"));
  if (!(d.alpha > 0 && d.alpha < 1)) j.at("alpha").fail("expected a freeze rate in (0, 1)");
  d.freeze_steps = positive_int_at(j.at("freeze_steps"));
  d.schedule = schedule_at(j.at("schedule"));
  d.checkpoint = checkpoint_at(j.at("checkpoint"));
  const JsonView zoo = j.at("zoo_models");
  for (const auto& key : zoo.keys()) d.zoo_models[key] = zoo_model_at(zoo.at(key));
  for (const auto& ds : j.at("datasets").items()) {
    ds.allow_only({"name", "label", "samples_per_epoch"});
    const int64_t samples = ds.integer("samples_per_epoch");
    if (samples < 1) ds.at("samples_per_epoch").fail("expected a positive integer");
    d.datasets.push_back({ds.string("name"), ds.string("label"), static_cast<long>(samples)});
  }
  d.table2_names = string_map(j.at("table2_names"));
  d.breakdown_dataset = j.string("breakdown_dataset");
}

void read_tables(const JsonView& j, Data& d) {
  read_fields(j.at("table1"), {Field("table", &d.table1), Field("baseline", &d.baseline)});
  read_fields(j.at("figure9"), {Field("table", &d.figure9), Field("freeze_only", &d.freeze_only),
                                Field("full_system", &d.full_system)});
  read_fields(j.at("table2"), {Field("table", &d.table2), Field("ratio", &d.comm_ratio),
                               Field("computation", &d.computation)});
  read_fields(j.at("figure10b"), {Field("table", &d.figure10b), Field("point", &d.point),
                                  Field("optimal", &d.optimal)});
  read_fields(j.at("cache_timing"),
              {Field("table", &d.cache_timing), Field("datasets", &d.cache_datasets),
               Field("note", &d.cache_note)});
}

std::vector<Data::AlphaRow> alpha_rows(const JsonView& j) {
  std::vector<Data::AlphaRow> out;
  for (const auto& row : j.items()) {
    row.allow_only({"alpha", "figure", "note"});
    const double alpha = row.positive("alpha");
    if (alpha >= 1) row.at("alpha").fail("expected a freeze rate in (0, 1)");
    const auto note = row.find("note");
    out.push_back({alpha, row.string_or("figure", ""), note ? text_at(*note) : Text{"", "", ""}});
  }
  return out;
}

void read_studies(const JsonView& j, Data& d) {
  read_fields(j.at("alpha_table"),
              {Field("table", &d.alpha_table), Field("rows", into(&d.alphas, alpha_rows))});
  const auto notes = [&](const JsonView& n) {
    for (const auto& key : n.keys()) d.no_checkpointing_notes[key] = text_at(n.at(key));
  };
  read_fields(
      j.at("sensitivity"),
      {Field("table", &d.sensitivity), Field("datasets", &d.sensitivity_datasets),
       Field("no_checkpointing_notes", notes), Field("cache_memory_gib", &d.cache_memory_gib),
       Field("cache_note", &d.cache_memory_note)});
  const JsonView m = j.at("missing");
  read_fields(m, {Field("freeze_epoch", &d.missing_freeze_epoch),
                  Field("baseline_time_datasets", &d.baseline_time_datasets),
                  Field("baseline_time", &d.missing_baseline_time),
                  Field("comm_part", &d.missing_comm_part), Field("comm", &d.missing_comm)});
  if (d.baseline_time_datasets.size() != 2) {
    m.at("baseline_time_datasets").fail("expected two datasets, the note compares them");
  }
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc =
      load_entry_doc(context, "pipetransformer-entry.json", "pipetwin.reproduce.pipetransformer");
  const JsonView j = doc.root();
  j.allow_only({"format",      "version",     "about",       "title",        "references",
                "citation",    "cluster",     "alpha",       "freeze_steps", "schedule",
                "checkpoint",  "zoo_models",  "datasets",    "table2_names", "breakdown_dataset",
                "table1",      "figure9",     "table2",      "figure10b",    "cache_timing",
                "alpha_table", "sensitivity", "assumptions", "missing"});
  Data d;
  d.path = doc.path;
  d.title = text_at(j.at("title"));
  read_setting(j, context, d);
  read_tables(j, d);
  read_studies(j, d);
  d.assumptions = texts(j.at("assumptions"));
  return d;
}

}  // namespace pipetwin::sim::pipetransformer
