// `pipetwin reproduce torchgpipe`: its data file, experiments/reference/torchgpipe-entry.json
// (see torchgpipe.hpp's Data), read and checked before anything runs.
#include "core/cost_model.hpp"
#include "studies/reproduce/torchgpipe.hpp"

namespace pipetwin::sim::torchgpipe {

namespace {

Field::Reader run_setting(RunSetting* out) {
  return [out](const JsonView& j) {
    read_fields(j, {Field("schedule", into(&out->schedule, schedule_at)),
                    Field("checkpoint", &out->checkpoint),
                    Field("partitioner", into(&out->partitioner, partitioner_at))});
  };
}

Data::Ablation ablation(const JsonView& j) {
  Data::Ablation a;
  const auto notes = [&a](const JsonView& n) {
    read_fields(n, {Field("not_modelled", &a.not_modelled), Field("utilization", &a.utilization),
                    Field("memory", &a.memory), Field("speedup", &a.speedup)});
  };
  read_fields(
      j,
      {Field("table", &a.table), Field("model", into(&a.model, zoo_model_at)),
       Field("stages", &a.stages), Field("schedule", into(&a.run.schedule, schedule_at)),
       Field("batch", &a.batch), Field("chunks", &a.chunks), Field("checkpoint", &a.run.checkpoint),
       Field("partitioner", into(&a.run.partitioner, partitioner_at)), Field("notes", notes)});
  return a;
}

Data::Memory memory(const JsonView& j) {
  Data::Memory m;
  const auto search = [&m](const JsonView& s) {
    read_fields(s, {Field("widths", &m.widths), Field("chunks", &m.search_chunks),
                    Field("min_depth", &m.min_depth)});
  };
  const auto notes = [&m](const JsonView& n) {
    read_fields(n, {Field("usage", &m.usage), Field("naive_fits", &m.naive_fits),
                    Field("fits", &m.fits), Field("naive_on_one", &m.naive_on_one),
                    Field("largest", &m.largest), Field("deepest", &m.deepest)});
  };
  const auto missing = [&m](const JsonView& x) {
    read_fields(x, {Field("head", &m.missing_head), Field("naive", &m.missing_naive),
                    Field("over", &m.missing_over), Field("under", &m.missing_under),
                    Field("depth", &m.missing_depth)});
  };
  read_fields(j, {Field("table", &m.table), Field("batch", &m.batch), Field("chunks", &m.chunks),
                  Field("gpu_counts", &m.gpu_counts), Field("pipeline", run_setting(&m.pipeline)),
                  Field("naive", run_setting(&m.naive)), Field("search", search),
                  Field("notes", notes), Field("missing", missing)});
  return m;
}

template <bool naive>
Data::Speed::Model speed_model(const JsonView& j) {
  Data::Speed::Model m;
  const auto notes = [&m](const JsonView& n) {
    read_fields(n, {Field("naive", &m.naive_note), Field("pipeline", &m.pipeline_note)});
  };
  if constexpr (naive) {
    read_fields(
        j, {Field("table", &m.table), Field("model", into(&m.model, zoo_model_at)),
            Field("schedule", into(&m.schedule, schedule_at)), Field("checkpoint", &m.checkpoint),
            Field("naive_batches", &m.naive_batches), Field("batches", &m.batches),
            Field("partitions", &m.partitions), Field("notes", notes)});
  } else {
    read_fields(j, {Field("table", &m.table), Field("model", into(&m.model, zoo_model_at)),
                    Field("schedule", into(&m.schedule, schedule_at)), Field("batches", &m.batches),
                    Field("partitions", &m.partitions), Field("micro_batches", &m.micro_batches),
                    Field("checkpoint", &m.checkpoint),
                    Field("checkpoint_one_micro_batch", &m.checkpoint_one_micro_batch)});
  }
  return m;
}

Data::Speed speed(const JsonView& j) {
  Data::Speed s;
  const auto notes = [&s](const JsonView& n) {
    read_fields(n, {Field("none", &s.no_batch), Field("best", &s.best_batch)});
  };
  read_fields(
      j, {Field("partitioner", into(&s.partitioner, partitioner_at)), Field("batch_notes", notes),
          Field("amoebanet", into(&s.amoebanet, speed_model<false>)),
          Field("unet", into(&s.unet, speed_model<true>))});
  return s;
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc =
      load_entry_doc(context, "torchgpipe-entry.json", "pipetwin.reproduce.torchgpipe");
  Data d;
  const auto refs = [&d](const JsonView& r) {
    read_fields(r,
                {Field("ablation", &d.ablation_reference), Field("memory", &d.memory_reference)});
  };
  doc.read_fields({Field("title", &d.title), Field("references", refs),
                   Field("citation", &d.citation),
                   Field("cluster", cluster_into(&d.cluster, context.catalog)),
                   Field("explain_above", into(&d.explain_above, &JsonView::as_nonneg)),
                   Field("ablation", into(&d.ablation, ablation)),
                   Field("memory", into(&d.memory, memory)), Field("speed", into(&d.speed, speed)),
                   Field("assumptions", &d.assumptions), Field("closing_notes", &d.closing_notes)});
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
