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

int positive_int(const JsonView& j) {
  const int v = j.as_int32();
  if (v < 1) j.fail(fmt::format("expected a positive integer, got {}", v));
  return v;
}

void read_setting(const JsonView& j, const ReproContext& context, Data& d) {
  const JsonView refs = j.at("references");
  refs.allow_only({"table1", "table2", "table3", "text"});
  d.table1_reference = refs.string("table1");
  d.table2_reference = refs.string("table2");
  d.table3_reference = refs.string("table3");
  d.text_reference = refs.string("text");
  d.citation = text_at(j.at("citation"));
  d.cluster = cluster_at(j.at("cluster"), context.catalog);
  d.alpha_text = j.string("alpha");
  d.alpha = formula_at(j.at("alpha"));
  if (!(d.alpha > 0 && d.alpha < 1)) j.at("alpha").fail("expected a freeze rate in (0, 1)");
  d.freeze_steps = positive_int(j.at("freeze_steps"));
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
  const JsonView t1 = j.at("table1");
  t1.allow_only({"table", "baseline"});
  d.table1 = table_text_at(t1.at("table"));
  d.baseline = text_at(t1.at("baseline"));
  const JsonView f9 = j.at("figure9");
  f9.allow_only({"table", "freeze_only", "full_system"});
  d.figure9 = table_text_at(f9.at("table"));
  d.freeze_only = text_at(f9.at("freeze_only"));
  d.full_system = text_at(f9.at("full_system"));
  const JsonView t2 = j.at("table2");
  t2.allow_only({"table", "ratio", "computation"});
  d.table2 = table_text_at(t2.at("table"));
  d.comm_ratio = text_at(t2.at("ratio"));
  d.computation = text_at(t2.at("computation"));
  const JsonView f10 = j.at("figure10b");
  f10.allow_only({"table", "point", "optimal"});
  d.figure10b = table_text_at(f10.at("table"));
  d.point = text_at(f10.at("point"));
  d.optimal = text_at(f10.at("optimal"));
  const JsonView cache = j.at("cache_timing");
  cache.allow_only({"table", "datasets", "note"});
  d.cache_timing = table_text_at(cache.at("table"));
  d.cache_datasets = string_list(cache.at("datasets"));
  d.cache_note = text_at(cache.at("note"));
}

void read_studies(const JsonView& j, Data& d) {
  const JsonView a = j.at("alpha_table");
  a.allow_only({"table", "rows"});
  d.alpha_table = table_text_at(a.at("table"));
  for (const auto& row : a.at("rows").items()) {
    row.allow_only({"alpha", "figure", "note"});
    const double alpha = row.positive("alpha");
    if (alpha >= 1) row.at("alpha").fail("expected a freeze rate in (0, 1)");
    const auto note = row.find("note");
    d.alphas.push_back(
        {alpha, row.string_or("figure", ""), note ? text_at(*note) : Text{"", "", ""}});
  }
  const JsonView s = j.at("sensitivity");
  s.allow_only({"table", "datasets", "no_checkpointing_notes", "cache_memory_gib", "cache_note"});
  d.sensitivity = table_text_at(s.at("table"));
  d.sensitivity_datasets = string_list(s.at("datasets"));
  const JsonView notes = s.at("no_checkpointing_notes");
  for (const auto& key : notes.keys()) d.no_checkpointing_notes[key] = text_at(notes.at(key));
  d.cache_memory_gib = s.positive("cache_memory_gib");
  d.cache_memory_note = text_at(s.at("cache_note"));
  const JsonView m = j.at("missing");
  m.allow_only({"freeze_epoch", "baseline_time_datasets", "baseline_time", "comm_part", "comm"});
  d.missing_freeze_epoch = text_at(m.at("freeze_epoch"));
  d.baseline_time_datasets = string_list(m.at("baseline_time_datasets"));
  if (d.baseline_time_datasets.size() != 2) {
    m.at("baseline_time_datasets").fail("expected two datasets, the note compares them");
  }
  d.missing_baseline_time = text_at(m.at("baseline_time"));
  d.missing_comm_part = text_at(m.at("comm_part"));
  d.missing_comm = text_at(m.at("comm"));
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
