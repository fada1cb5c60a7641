// `pipetwin reproduce ftpipe`: its data file, experiments/reference/ftpipe-entry.json (see
// ftpipe.hpp's Data), read and checked before anything runs.
#include <limits>

#include <fmt/format.h>

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

int positive_int(const JsonView& j) {
  const int v = j.as_int32();
  if (v < 1) j.fail(fmt::format("expected a positive integer, got {}", v));
  return v;
}

void read_tables(const JsonView& j, Data& d) {
  const JsonView s = j.at("speedup");
  s.allow_only(
      {"title", "run", "run_does_not_fit", "stages", "compute_imbalance", "memory_imbalance"});
  d.speedup = {text_at(s.at("title")),
               text_at(s.at("run")),
               text_at(s.at("run_does_not_fit")),
               text_at(s.at("stages")),
               text_at(s.at("compute_imbalance")),
               text_at(s.at("memory_imbalance"))};
  const JsonView f = j.at("figures");
  f.allow_only({"table", "micro_batch", "communication_dataset", "communication", "volume",
                "best_task", "encoder_decoder", "recompute"});
  d.figures.table = table_text_at(f.at("table"));
  d.figures.micro_batch = positive_int(f.at("micro_batch"));
  d.figures.communication_dataset = f.string("communication_dataset");
  d.figures.communication = text_at(f.at("communication"));
  d.figures.volume = text_at(f.at("volume"));
  d.figures.best_task = text_at(f.at("best_task"));
  d.figures.encoder_decoder = text_at(f.at("encoder_decoder"));
  d.figures.recompute = text_at(f.at("recompute"));
  const JsonView p = j.at("pipedream");
  p.allow_only({"table", "micro_batch", "over", "last_stage", "enforced", "refused", "simple"});
  d.pipedream.table = table_text_at(p.at("table"));
  d.pipedream.micro_batch = positive_int(p.at("micro_batch"));
  d.pipedream.over = text_at(p.at("over"));
  d.pipedream.last_stage = text_at(p.at("last_stage"));
  d.pipedream.enforced = text_at(p.at("enforced"));
  d.pipedream.refused = text_at(p.at("refused"));
  d.pipedream.simple = text_at(p.at("simple"));
}

}  // namespace

Data load_data(const ReproContext& context) {
  const EntryDoc doc = load_entry_doc(context, "ftpipe-entry.json", "pipetwin.reproduce.ftpipe");
  const JsonView j = doc.root();
  j.allow_only({"format", "version", "about", "title", "references", "citation", "cluster", "model",
                "optimizer_state", "datasets", "pipelines", "partitioners", "memory_fractions",
                "speedup", "figures", "pipedream", "assumptions"});
  Data d;
  d.title = text_at(j.at("title"));
  const JsonView refs = j.at("references");
  refs.allow_only({"hparams", "figures"});
  d.hparams_reference = refs.string("hparams");
  d.figures_reference = refs.string("figures");
  d.citation = text_at(j.at("citation"));
  d.cluster = cluster_at(j.at("cluster"), context.catalog);
  d.model = zoo_model_at(j.at("model"));
  d.optimizer_state = j.at("optimizer_state").as_bool();
  for (const auto& ds : j.at("datasets").items()) {
    ds.allow_only({"name", "task"});
    d.datasets.emplace_back(ds.string("name"), ds.string("task"));
  }
  if (d.datasets.empty()) j.at("datasets").fail("expected a non-empty array");
  const JsonView p = j.at("pipelines");
  p.allow_only({"gpipe_seq", "gpipe_mixed", "ftpipe_seq", "ftpipe_mixed"});
  d.gpipe_seq = pipeline(p.at("gpipe_seq"));
  d.gpipe_mixed = pipeline(p.at("gpipe_mixed"));
  d.ftpipe_seq = pipeline(p.at("ftpipe_seq"));
  d.ftpipe_mixed = pipeline(p.at("ftpipe_mixed"));
  const JsonView parts = j.at("partitioners");
  parts.allow_only({"seq", "mixed"});
  d.seq_partitioners = seq_partitioners(parts.at("seq"));
  d.mixed_partitioners = partitioners(parts.at("mixed"));
  d.memory_fractions = positive_numbers(j.at("memory_fractions"));
  read_tables(j, d);
  d.assumptions = texts(j.at("assumptions"));
  return d;
}

}  // namespace pipetwin::sim::ftpipe
