// `pipetwin reproduce ftpipe`: its data file, experiments/reference/ftpipe-entry.json (see
// ftpipe.hpp's Data), read and checked before anything runs.
#include <limits>

#include "studies/reproduce/ftpipe.hpp"

namespace pipetwin::sim::ftpipe {

namespace {

PipelineText pipeline(const JsonView& j) {
  j.allow_only({"name", "hparams", "paper", "note"});
  const auto paper = j.find("paper");
  return {j.string("name"), j.string("hparams"),
          paper ? paper->as_positive() : std::numeric_limits<double>::quiet_NaN(),
          text_at(j.at("note"))};
}

std::vector<std::string> seq_partitioners(const JsonView& j) {
  std::vector<std::string> out;
  for (const auto& v : j.items()) {
    out.push_back(v.as_string() == kFtpipeSeq ? std::string(kFtpipeSeq) : partitioner_at(v));
  }
  if (out.empty()) j.fail("expected a non-empty array");
  return out;
}

std::vector<std::string> partitioners(const JsonView& j) {
  std::vector<std::string> out;
  for (const auto& v : j.items()) out.push_back(partitioner_at(v));
  if (out.empty()) j.fail("expected a non-empty array");
  return out;
}

Field::Reader speedup_into(Data* d) {
  return [&s = d->speedup](const JsonView& j) {
    read_fields(j, {Field("title", &s.title), Field("run", &s.run),
                    Field("run_does_not_fit", &s.run_does_not_fit), Field("stages", &s.stages),
                    Field("compute_imbalance", &s.compute_imbalance),
                    Field("memory_imbalance", &s.memory_imbalance)});
  };
}

Field::Reader figures_into(Data* d) {
  return [&f = d->figures](const JsonView& j) {
    read_fields(j, {Field("table", &f.table), Field("micro_batch", &f.micro_batch),
                    Field("communication_dataset", &f.communication_dataset),
                    Field("communication", &f.communication), Field("volume", &f.volume),
                    Field("best_task", &f.best_task), Field("encoder_decoder", &f.encoder_decoder),
                    Field("recompute", &f.recompute)});
  };
}

Field::Reader pipedream_into(Data* d) {
  return [&p = d->pipedream](const JsonView& j) {
    read_fields(
        j, {Field("table", &p.table), Field("micro_batch", &p.micro_batch), Field("over", &p.over),
            Field("last_stage", &p.last_stage), Field("enforced", &p.enforced),
            Field("refused", &p.refused), Field("simple", &p.simple)});
  };
}

std::vector<std::pair<std::string, std::string>> datasets(const JsonView& j) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& ds : j.items()) {
    ds.allow_only({"name", "task"});
    out.emplace_back(ds.string("name"), ds.string("task"));
  }
  if (out.empty()) j.fail("expected a non-empty array");
  return out;
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc = load_entry_doc(context, "ftpipe-entry.json", "pipetwin.reproduce.ftpipe");
  Data d;
  const auto references = [&d](const JsonView& r) {
    read_fields(r,
                {Field("hparams", &d.hparams_reference), Field("figures", &d.figures_reference)});
  };
  const auto pipelines = [&d](const JsonView& p) {
    read_fields(p, {Field("gpipe_seq", into(&d.gpipe_seq, pipeline)),
                    Field("gpipe_mixed", into(&d.gpipe_mixed, pipeline)),
                    Field("ftpipe_seq", into(&d.ftpipe_seq, pipeline)),
                    Field("ftpipe_mixed", into(&d.ftpipe_mixed, pipeline))});
  };
  const auto partitioner_lists = [&d](const JsonView& p) {
    read_fields(p, {Field("seq", into(&d.seq_partitioners, seq_partitioners)),
                    Field("mixed", into(&d.mixed_partitioners, partitioners))});
  };
  doc.read_fields(
      {Field("title", &d.title), Field("references", references), Field("citation", &d.citation),
       Field("cluster", cluster_into(&d.cluster, context.catalog)),
       Field("model", into(&d.model, zoo_model_at)), Field("optimizer_state", &d.optimizer_state),
       Field("datasets", into(&d.datasets, datasets)), Field("pipelines", pipelines),
       Field("partitioners", partitioner_lists), Field("memory_fractions", &d.memory_fractions),
       Field("speedup", speedup_into(&d)), Field("figures", figures_into(&d)),
       Field("pipedream", pipedream_into(&d)), Field("assumptions", &d.assumptions)});
  return d;
}

}  // namespace pipetwin::sim::ftpipe
