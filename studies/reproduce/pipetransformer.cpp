// `pipetwin reproduce pipetransformer`: the entry and its tables (see pipetransformer.hpp).
//
//   table1-speedup      Table 1: speedup over Pipe + DDP, and both training times
//   figure9-breakdown   Figure 9 (ViT, ImageNet): freeze only, + AutoPipe, + AutoDP, + AutoCache
//   table2-comm         Table 2: DDP communication vs computation of the PipeTransformer runs
//   figure10b-chunks    Figure 10(b): throughput per M for each K the ImageNet run reaches
//   cache-timing        Section 4.3.5: frozen layers from which AutoCache turns on
//   alpha               Section 4.3.3 / Figure 10(a): speedup for other freeze rates (ImageNet)
//   sensitivity         Table 1's speedups under the alternatives to our assumptions
// Figures 9, 10(a) and 10(b) are plots whose numbers the text does not give: their rows carry
// paper = NaN except where the text states a value (experiments/reference/
// pipetransformer-text-figures.csv). Which datasets, freeze rates and sensitivities, and the text,
// are in experiments/reference/pipetransformer-entry.json.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "studies/reproduce/entries.hpp"
#include "studies/reproduce/pipetransformer.hpp"

namespace pipetwin::sim {

namespace {

using namespace pipetransformer;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `dataset` by value: a name literal passed by reference made GCC 13+ take the returned reference
// for one into that temporary (-Wdangling-reference).
const SettingRuns& runs_of(const std::vector<SettingRuns>& all, std::string_view dataset) {
  for (const auto& r : all) {
    if (r.setting.dataset == dataset) return r;
  }
  throw InputError("reproduce pipetransformer: Table 1 lacks " + std::string(dataset));
}

// The value of a text figure (pipetransformer-text-figures.csv) for `figure` and `dataset`.
double text_figure(const ReferenceTable& t, const std::string& figure, const std::string& dataset) {
  for (size_t row = 0; row < t.rows.size(); ++row) {
    if (t.cell(row, "figure") == figure && t.cell(row, "dataset") == dataset)
      return t.number(row, "value");
  }
  throw InputError(fmt::format("{}: no figure {} for {}", t.path, figure, dataset));
}

// Table 2's name of a dataset as Table 1 writes it ("SQuAD" -> "SQuAD 1.1").
std::string table1_name(const Data& d, const std::string& table2_name) {
  const auto it = d.table2_names.find(table2_name);
  return it == d.table2_names.end() ? table2_name : it->second;
}

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

ReproTable table1(const Data& d, const TextArgs& args, const ReferenceTable& ref,
                  const std::vector<SettingRuns>& all) {
  ReproTable t = d.table1.table(args);
  for (size_t row = 0; row < ref.rows.size(); ++row) {
    const std::string dataset = ref.cell(row, "dataset");
    const ElasticReport& r = runs_of(all, dataset).report;
    t.rows.push_back({dataset, "speedup", ref.number(row, "speedup"), r.speedup, "x",
                      describe_transitions(r.elastic)});
    t.rows.push_back({dataset, "baseline training time", ref.number(row, "baseline_time_s") / 3600,
                      r.baseline.total_s / 3600, "h", d.baseline(args)});
    t.rows.push_back({dataset, "PipeTransformer training time",
                      ref.number(row, "pipetransformer_time_s") / 3600, r.elastic.total_s / 3600,
                      "h", ""});
  }
  return t;
}

ReproTable figure9(const Data& d, const TextArgs& args, const ReferenceTable& text,
                   const SettingRuns& breakdown) {
  ReproTable t = d.figure9.table(args);
  const ElasticReport& r = breakdown.report;
  const double base = r.baseline.total_s;
  t.rows.push_back({"no freeze", "throughput", kNaN, r.baseline.throughput(), "samples/s", ""});
  for (size_t i = 0; i < r.breakdown.size(); ++i) {
    const ElasticRun& run = r.breakdown[i];
    const double paper =
        i == 0 ? text_figure(text, "freeze_only_relative_speed", d.breakdown_dataset) : kNaN;
    const std::string note = i == 0                        ? d.freeze_only(args)
                             : i + 1 == r.breakdown.size() ? d.full_system(args)
                                                           : "";
    t.rows.push_back({run.name, "speedup", paper, base / run.total_s, "x", note});
    t.rows.push_back({run.name, "throughput", kNaN, run.throughput(), "samples/s", ""});
  }
  return t;
}

ReproTable table2(const Data& d, const TextArgs& args, const ReferenceTable& ref,
                  const std::vector<SettingRuns>& all) {
  ReproTable t = d.table2.table(args);
  for (size_t row = 0; row < ref.rows.size(); ++row) {
    const std::string dataset = table1_name(d, ref.cell(row, "dataset"));
    const ElasticRun& run = runs_of(all, dataset).report.elastic;
    t.rows.push_back({dataset, "communication ratio", 100 * ref.number(row, "communication_ratio"),
                      100 * run.comm_s / run.total_s, "%", d.comm_ratio(args)});
    t.rows.push_back({dataset, "communication time", ref.number(row, "communication_s") / 60,
                      run.comm_s / 60, "min", ""});
    t.rows.push_back({dataset, "computation time", ref.number(row, "computation_s") / 3600,
                      (run.total_s - run.comm_s) / 3600, "h", d.computation(args)});
  }
  return t;
}

ReproTable figure10b(const Setup& setup, const TextArgs& args, const SettingRuns& breakdown) {
  const Data& d = *setup.data;
  ReproTable t = d.figure10b.table(TextArgs(args).set("batch", breakdown.setting.batch));
  const ElasticConfig c = config(setup, breakdown.setting);
  int last_K = 0;
  for (const auto& tr : breakdown.report.elastic.transitions) {
    if (tr.K == last_K) continue;  // the first state of each K the run reaches
    last_K = tr.K;
    for (const ChunkPoint& p : profile_chunks(c, tr.frozen_layers)) {
      t.rows.push_back({fmt::format("K={}, M={}", p.K, p.chunks), "throughput", kNaN, p.throughput,
                        "samples/s",
                        d.point(TextArgs(args).set("frozen", p.frozen).set("replicas", p.dp)) +
                            (p.best ? d.optimal(args) : "")});
    }
  }
  return t;
}

ReproTable cache_timing(const Setup& setup, const TextArgs& args, const ReferenceTable& text,
                        const std::vector<Setting>& settings) {
  const Data& d = *setup.data;
  ReproTable t = d.cache_timing.table(args);
  for (const auto& s : settings) {
    if (!listed(d.cache_datasets, s.dataset)) continue;  // the paper states ViT's threshold once
    t.rows.push_back({s.model, "caching starts at frozen layers",
                      text_figure(text, "cache_start_frozen_layers", s.dataset),
                      static_cast<double>(cache_threshold_layers(config(setup, s))), "",
                      d.cache_note(args)});
  }
  return t;
}

ReproTable alpha_table(const Setup& setup, const TextArgs& args, const ReferenceTable& text,
                       const SettingRuns& breakdown) {
  const Data& d = *setup.data;
  ReproTable t = d.alpha_table.table(args);
  const double base = breakdown.report.baseline.total_s;
  for (const Data::AlphaRow& row : d.alphas) {
    const ElasticRun run = simulate_elastic_run(config(setup, breakdown.setting, row.alpha));
    const double paper =
        row.figure.empty() ? kNaN : text_figure(text, row.figure, d.breakdown_dataset);
    t.rows.push_back({fmt::format("alpha = {}", row.alpha), "speedup", paper, base / run.total_s,
                      "x", row.note(args)});
  }
  return t;
}

// Table 1's speedup of a setting under a changed configuration (baseline changed alike).
Comparison sensitivity_row(const ReferenceTable& ref, const Setting& s, const ElasticConfig& c,
                           const std::string& what, const std::string& note) {
  const ElasticReport r = simulate_elastic(c);
  return {s.dataset + ": " + what,
          "speedup",
          ref.number(ref.find("dataset", s.dataset), "speedup"),
          r.speedup,
          "x",
          note + (note.empty() ? "" : "; ") + describe_transitions(r.elastic)};
}

ReproTable sensitivity(const Setup& setup, const TextArgs& args, const ReferenceTable& ref,
                       const std::vector<Setting>& settings) {
  const Data& d = *setup.data;
  ReproTable t = d.sensitivity.table(args);
  for (const auto& s : settings) {
    if (!listed(d.sensitivity_datasets, s.dataset)) continue;
    ElasticConfig c = config(setup, s);
    c.checkpoint = Checkpoint::kNone;
    const auto note = d.no_checkpointing_notes.find(s.zoo);
    t.rows.push_back(
        sensitivity_row(ref, s, c, "no checkpointing",
                        note == d.no_checkpointing_notes.end() ? "" : note->second(args)));
    if (s.epochs >= d.freeze_steps) continue;  // there a tenth of the run is an epoch
    c = config(setup, s);
    c.trace = elastic::bound_trace(s.layers, d.alpha, s.epochs, 1);
    t.rows.push_back(sensitivity_row(ref, s, c, "freeze steps every epoch", ""));
  }
  const Setting& breakdown = *std::find_if(settings.begin(), settings.end(), [&](const Setting& s) {
    return s.dataset == d.breakdown_dataset;
  });
  ElasticConfig c = config(setup, breakdown);
  c.cache.memory_budget_bytes = d.cache_memory_gib * kGiB;
  t.rows.push_back(sensitivity_row(
      ref, breakdown, c, fmt::format("{:g} GiB of cache memory per node", d.cache_memory_gib),
      d.cache_memory_note(args)));
  c = config(setup, breakdown);
  c.overheads = elastic::TransitionOverheads::none();
  t.rows.push_back(sensitivity_row(ref, breakdown, c, "no transition overheads", ""));
  return t;
}

// Where Table 1 and Table 2 still miss, the mechanism and the evidence from the runs themselves.
std::string freeze_epoch_note(const Data& d, const TextArgs& args, const SettingRuns& breakdown) {
  const auto& log = breakdown.report.elastic.log.epochs;
  if (log.size() < 2 || log[1].frozen_layers == 0) return "";
  const double share = 1.0 - static_cast<double>(log[1].frozen_layers) / breakdown.setting.layers;
  const double at_share =
      breakdown.report.elastic.total_s - log[1].compute_s + log[0].compute_s * share;
  return d.missing_freeze_epoch(
      TextArgs(args)
          .set("speedup", breakdown.report.speedup)
          .set("frozen", log[1].frozen_layers)
          .set("layers", breakdown.setting.layers)
          .set("epoch_min", log[1].compute_s / 60)
          .set("unfrozen_min", log[0].compute_s / 60)
          .set("share_min", log[0].compute_s * share / 60)
          .set("at_share_h", at_share / 3600)
          .set("at_share_speedup", breakdown.report.baseline.total_s / at_share));
}

// Seconds per image of a setting's baseline: the paper's (Table 1) and ours.
std::pair<double, double> seconds_per_image(const ReferenceTable& t1, const SettingRuns& r) {
  const double images = static_cast<double>(r.setting.samples) * r.setting.epochs;
  const double paper = t1.number(t1.find("dataset", r.setting.dataset), "baseline_time_s");
  return {paper / images, r.report.baseline.total_s / images};
}

std::string baseline_time_note(const Data& d, const TextArgs& args, const ReferenceTable& t1,
                               const std::vector<SettingRuns>& all) {
  const auto [paper_a, ours_a] = seconds_per_image(t1, runs_of(all, d.baseline_time_datasets[0]));
  const auto [paper_b, ours_b] = seconds_per_image(t1, runs_of(all, d.baseline_time_datasets[1]));
  return d.missing_baseline_time(TextArgs(args)
                                     .set("paper_a_ms", 1e3 * paper_a)
                                     .set("paper_b_ms", 1e3 * paper_b)
                                     .set("paper_ratio", paper_a / paper_b)
                                     .set("ours_a_ms", 1e3 * ours_a)
                                     .set("ours_b_ms", 1e3 * ours_b)
                                     .set("ours_ratio", ours_a / ours_b)
                                     .set("b_paper_over_ours", paper_b / ours_b));
}

std::string comm_note(const Data& d, const TextArgs& args, const ReferenceTable& t2,
                      const Setup& setup, const std::vector<SettingRuns>& all) {
  std::string parts;
  for (size_t row = 0; row < t2.rows.size(); ++row) {
    const std::string dataset = table1_name(d, t2.cell(row, "dataset"));
    const double ours = runs_of(all, dataset).report.elastic.comm_s;
    const double paper = t2.number(row, "communication_s");
    parts += (parts.empty() ? "" : "; ") +
             d.missing_comm_part(TextArgs(args)
                                     .set("dataset", dataset)
                                     .set("ours_min", ours / 60)
                                     .set("paper_min", paper / 60)
                                     .set("effective_gbs",
                                          setup.cluster.inter_node.bandwidth * ours / paper / 1e9));
  }
  return d.missing_comm(TextArgs(args).set("parts", parts));
}

// "1281167" -> "1,281,167".
std::string grouped(long n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// What every template may name (see the data file's "about").
TextArgs entry_args(const Setup& setup, const std::vector<Setting>& settings,
                    const ReferenceTable& t1) {
  const Data& d = *setup.data;
  std::string batches, epochs, samples;
  for (const auto& s : settings) {
    batches += (batches.empty() ? "" : " / ") + std::to_string(s.batch);
    epochs += (epochs.empty() ? "" : " / ") + std::to_string(s.epochs);
  }
  for (const auto& ds : d.datasets) {
    samples += (samples.empty() ? "" : ", ") + ds.label + " " + grouped(ds.samples);
  }
  TextArgs a = cluster_facts(setup.cluster);
  return a.set("alpha", d.alpha_text)
      .set("freeze_steps", d.freeze_steps)
      .set("breakdown_dataset", d.breakdown_dataset)
      .set("paper_speedup", t1.number(t1.find("dataset", d.breakdown_dataset), "speedup"))
      .set("batches", batches)
      .set("epochs", epochs)
      .set("samples_per_epoch", samples);
}

ReproResult run_entry(const Data& d, const ReproContext& context) {
  const ReferenceTable t1 = load_reference(context, d.table1_reference);
  const ReferenceTable t2 = load_reference(context, d.table2_reference);
  const ReferenceTable text = load_reference(context, d.text_reference);
  const std::vector<Setting> all = settings(context, d);
  const Setup setup = make_setup(context, d, all);
  const TextArgs args = entry_args(setup, all, t1);
  const std::vector<SettingRuns> runs = run_table1(setup, all);
  const SettingRuns& breakdown = runs_of(runs, d.breakdown_dataset);
  ReproResult res;
  res.citation = d.citation(
      TextArgs(args).set("table1", t1.path).set("table2", t2.path).set("text", text.path));
  res.tables = {table1(d, args, t1, runs),
                figure9(d, args, text, breakdown),
                table2(d, args, t2, runs),
                figure10b(setup, args, breakdown),
                cache_timing(setup, args, text, all),
                alpha_table(setup, args, text, breakdown),
                sensitivity(setup, args, t1, all)};
  for (const Text& a : d.assumptions) res.assumptions.push_back(a(args));
  for (std::string note :
       {freeze_epoch_note(d, args, breakdown), baseline_time_note(d, args, t1, runs),
        comm_note(d, args, t2, setup, runs)}) {
    if (!note.empty()) res.assumptions.push_back(std::move(note));
  }
  return res;
}

}  // namespace

std::unique_ptr<ReproEntry> make_pipetransformer_entry() {
  return std::make_unique<DataEntry<Data>>("pipetransformer", load_data, cluster_title<Data>,
                                           run_entry);
}

}  // namespace pipetwin::sim
