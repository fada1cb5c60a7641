// `pipetwin reproduce torchgpipe`: its data file, experiments/reference/torchgpipe-entry.json
// (see torchgpipe.hpp's Data), read and checked before anything runs.
#include <fmt/format.h>

#include "core/cost_model.hpp"
#include "studies/reproduce/torchgpipe.hpp"

namespace pipetwin::sim::torchgpipe {

namespace {

RunSetting run_setting(const JsonView& j) {
  j.allow_only({"schedule", "checkpoint", "partitioner"});
  return {schedule_at(j.at("schedule")), checkpoint_at(j.at("checkpoint")),
          partitioner_at(j.at("partitioner"))};
}

Data::Ablation ablation(const JsonView& j) {
  j.allow_only({"table", "model", "stages", "schedule", "batch", "chunks", "checkpoint",
                "partitioner", "notes"});
  Data::Ablation a;
  a.table = table_text_at(j.at("table"));
  a.model = zoo_model_at(j.at("model"));
  a.stages = j.at("stages").as_int32();
  a.batch = j.at("batch").as_int32();
  a.chunks = j.at("chunks").as_int32();
  for (const char* key : {"stages", "batch", "chunks"}) {
    if (j.at(key).as_int32() < 1) j.at(key).fail("expected a positive integer");
  }
  a.run = {schedule_at(j.at("schedule")), checkpoint_at(j.at("checkpoint")),
           partitioner_at(j.at("partitioner"))};
  const JsonView n = j.at("notes");
  n.allow_only({"not_modelled", "utilization", "memory", "speedup"});
  a.not_modelled = text_at(n.at("not_modelled"));
  a.utilization = text_at(n.at("utilization"));
  a.memory = text_at(n.at("memory"));
  a.speedup = text_at(n.at("speedup"));
  return a;
}

Data::Memory memory(const JsonView& j) {
  j.allow_only({"table", "batch", "chunks", "gpu_counts", "pipeline", "naive", "search", "notes",
                "missing"});
  Data::Memory m;
  m.table = table_text_at(j.at("table"));
  m.batch = j.at("batch").as_int32();
  if (m.batch < 1) j.at("batch").fail("expected a positive integer");
  m.chunks = positive_ints(j.at("chunks"));
  m.gpu_counts = positive_ints(j.at("gpu_counts"));
  m.pipeline = run_setting(j.at("pipeline"));
  m.naive = run_setting(j.at("naive"));
  const JsonView s = j.at("search");
  s.allow_only({"widths", "chunks", "min_depth"});
  m.widths = positive_ints(s.at("widths"));
  m.search_chunks = positive_ints(s.at("chunks"));
  m.min_depth = s.at("min_depth").as_int32();
  if (m.min_depth < 1) s.at("min_depth").fail("expected a positive integer");
  const JsonView n = j.at("notes");
  n.allow_only({"usage", "naive_fits", "fits", "naive_on_one", "largest", "deepest"});
  m.usage = text_at(n.at("usage"));
  m.naive_fits = text_at(n.at("naive_fits"));
  m.fits = text_at(n.at("fits"));
  m.naive_on_one = text_at(n.at("naive_on_one"));
  m.largest = text_at(n.at("largest"));
  m.deepest = text_at(n.at("deepest"));
  const JsonView x = j.at("missing");
  x.allow_only({"head", "naive", "over", "under", "depth"});
  m.missing_head = text_at(x.at("head"));
  m.missing_naive = text_at(x.at("naive"));
  m.missing_over = text_at(x.at("over"));
  m.missing_under = text_at(x.at("under"));
  m.missing_depth = text_at(x.at("depth"));
  return m;
}

Data::Speed::Model speed_model(const JsonView& j, bool naive) {
  Data::Speed::Model m;
  if (naive) {
    j.allow_only({"table", "model", "schedule", "checkpoint", "naive_batches", "batches",
                  "partitions", "notes"});
    m.naive_batches = positive_ints(j.at("naive_batches"));
    const JsonView n = j.at("notes");
    n.allow_only({"naive", "pipeline"});
    m.naive_note = text_at(n.at("naive"));
    m.pipeline_note = text_at(n.at("pipeline"));
  } else {
    j.allow_only({"table", "model", "schedule", "batches", "partitions", "micro_batches",
                  "checkpoint", "checkpoint_one_micro_batch"});
    m.micro_batches = positive_ints(j.at("micro_batches"));
    m.checkpoint_one_micro_batch = checkpoint_at(j.at("checkpoint_one_micro_batch"));
  }
  m.table = table_text_at(j.at("table"));
  m.model = zoo_model_at(j.at("model"));
  m.schedule = schedule_at(j.at("schedule"));
  m.checkpoint = checkpoint_at(j.at("checkpoint"));
  m.batches = positive_ints(j.at("batches"));
  m.partitions = positive_ints(j.at("partitions"));
  return m;
}

Data::Speed speed(const JsonView& j) {
  j.allow_only({"partitioner", "batch_notes", "amoebanet", "unet"});
  Data::Speed s;
  s.partitioner = partitioner_at(j.at("partitioner"));
  const JsonView n = j.at("batch_notes");
  n.allow_only({"none", "best"});
  s.no_batch = text_at(n.at("none"));
  s.best_batch = text_at(n.at("best"));
  s.amoebanet = speed_model(j.at("amoebanet"), false);
  s.unet = speed_model(j.at("unet"), true);
  return s;
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc =
      load_entry_doc(context, "torchgpipe-entry.json", "pipetwin.reproduce.torchgpipe");
  const JsonView j = doc.root();
  j.allow_only({"format", "version", "about", "title", "references", "citation", "cluster",
                "explain_above", "ablation", "memory", "speed", "assumptions", "closing_notes"});
  Data d;
  d.title = text_at(j.at("title"));
  const JsonView refs = j.at("references");
  refs.allow_only({"ablation", "memory"});
  d.ablation_reference = refs.string("ablation");
  d.memory_reference = refs.string("memory");
  d.citation = text_at(j.at("citation"));
  d.cluster = cluster_at(j.at("cluster"), context.catalog);
  d.explain_above = j.nonneg("explain_above");
  d.ablation = ablation(j.at("ablation"));
  d.memory = memory(j.at("memory"));
  d.speed = speed(j.at("speed"));
  d.assumptions = texts(j.at("assumptions"));
  d.closing_notes = texts(j.at("closing_notes"));
  return d;
}

TextArgs Setup::args() const {
  TextArgs a = cluster_facts(cluster);
  a.set("fragmentation", framework ? framework->stack.fragmentation.value : 0.0);
  if (data != nullptr) {
    a.set("ablation_batch", data->ablation.batch)
        .set("ablation_chunks", data->ablation.chunks)
        .set("ablation_stages", data->ablation.stages)
        .set("memory_batch", data->memory.batch);
  }
  return a;
}

}  // namespace pipetwin::sim::torchgpipe
