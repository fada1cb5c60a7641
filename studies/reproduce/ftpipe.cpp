// `pipetwin reproduce ftpipe`: the entry and its tables (see ftpipe.hpp).
//
// 1. Epoch-time speed-ups over GPipe Seq-pipe (FTPipe Section 5.2/5.3, Figure 6), per dataset
//    whose sequence lengths the paper states (RTE and BoolQ: encoder 512, decoder 4), with the
//    mini-batch and micro-batch counts of its Table 4: GPipe (synchronous, "gpipe-seq/mixed") and
//    FTPipe (asynchronous, "ftpipe-seq", "ftpipe-mixed"), each on a Seq-pipe (contiguous stages,
//    one per GPU: our `optimal` min-max partition, memory-aware) and on Mixed-pipe.
//    An epoch is a fixed number of samples, so the epoch-time speed-up is the throughput ratio.
//    The paper reports time to accuracy (its Tables 2 and 3 are withheld from our copy); the
//    text gives ranges, which the notes quote. For the synchronous pipeline accuracy does not
//    depend on the partition, so its "up to 1.2x" is comparable with our epoch-time speed-up.
// 2. Figures stated in the text (experiments/reference/ftpipe-text-figures.csv): communication
//    per pass, Mixed-pipe's extra communication, the encoder/decoder load ratio, the load a
//    stage saves by not recomputing.
// 3. PipeDream's planner with memory limits ignored (where its plan does not fit: GPU and bytes
//    over) and enforced; and a simple pipeline with weight stashing.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "profiles/zoo/zoo.hpp"
#include "studies/reproduce/entries.hpp"
#include "studies/reproduce/ftpipe.hpp"

namespace pipetwin::sim {

namespace ftpipe {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Figures {
  ReferenceTable t;
  double low(const std::string& figure) const { return t.number(t.find("figure", figure), "low"); }
  double high(const std::string& figure) const {
    return t.number(t.find("figure", figure), "high");
  }
  std::string range(const std::string& figure) const {
    return fmt::format("{:g}x-{:g}x", low(figure), high(figure));
  }
};

struct Pipelines {
  Run gpipe_seq, gpipe_mixed, ftpipe_seq, ftpipe_mixed;
};

Pipelines run_dataset(const Setup& setup, const ReferenceTable& hp, const std::string& dataset) {
  auto row = [&](const std::string& pipeline) {
    for (size_t r = 0; r < hp.rows.size(); ++r) {
      if (hp.cell(r, "dataset") == dataset && hp.cell(r, "pipeline") == pipeline) return r;
    }
    return hp.find("pipeline", pipeline + " for " + dataset);  // throws, naming the file
  };
  auto run = [&](const std::string& pipeline, bool mixed, bool async) {
    const size_t r = row(pipeline);
    return run_pipeline(setup, mixed, async, static_cast<int>(hp.number(r, "batch")),
                        static_cast<int>(hp.number(r, "accum")));
  };
  Pipelines p;
  p.gpipe_seq = run("gpipe-seq/mixed", false, false);
  p.gpipe_mixed = run("gpipe-seq/mixed", true, false);
  p.ftpipe_seq = run("ftpipe-seq", false, true);
  p.ftpipe_mixed = run("ftpipe-mixed", true, true);
  return p;
}

std::string describe_run(const Run& r) {
  if (!r.fits) return "does not fit: " + r.error;
  const double hi = *std::max_element(r.peaks.begin(), r.peaks.end());
  const double lo = *std::min_element(r.peaks.begin(), r.peaks.end());
  return fmt::format("batch {}, M = {}, {}: {} stages on {} GPUs, GPU peaks {:.1f}-{:.1f} GiB",
                     r.batch, r.chunks, r.partitioner, r.partition.num_stages(),
                     r.partition.num_devices(), lo / kGiB, hi / kGiB);
}

ReproTable speedup_table(const std::string& dataset, const Pipelines& p, const Figures& f) {
  ReproTable t{"speedup-" + dataset,
               fmt::format("Epoch-time speed-up over GPipe Seq-pipe, T5-3B, {} (encoder 512, "
                           "decoder 4), 8 x RTX 2080 Ti",
                           dataset),
               {}};
  const double base = p.gpipe_seq.fits ? p.gpipe_seq.throughput : kNaN;
  struct Line {
    const Run* run;
    std::string name;
    double paper;
    std::string note;
  };
  const std::vector<Line> lines = {
      {&p.gpipe_seq, "GPipe Seq-pipe (sync)", 1.0, "the baseline"},
      {&p.gpipe_mixed, "GPipe Mixed-pipe (sync)", kNaN,
       "paper: up to 1.2x over its tasks, no per-task figure: see the text figures' best-task "
       "row"},
      {&p.ftpipe_seq, "FTPipe Seq-pipe (async)", kNaN,
       "paper: asynchrony adds " + f.range("async_speedup") + " (time to accuracy)"},
      {&p.ftpipe_mixed, "FTPipe Mixed-pipe (async)", kNaN,
       "paper: FTPipe " + f.range("ftpipe_over_gpipe") +
           " faster than GPipe on T5-3B (time to "
           "accuracy)"},
  };
  for (const auto& l : lines) {
    const double thr = l.run->fits ? l.run->throughput : kNaN;
    t.rows.push_back({l.name, "throughput", kNaN, thr, "samples/s", describe_run(*l.run)});
    t.rows.push_back({l.name, "epoch-time speed-up", l.paper, thr / base, "x", l.note});
  }
  for (const Run* r : {&p.gpipe_mixed, &p.ftpipe_mixed}) {
    const std::string name = r->async ? "FTPipe Mixed-pipe" : "GPipe Mixed-pipe";
    t.rows.push_back({name, "pipeline stages", f.low("mixed_stages"),
                      r->fits ? static_cast<double>(r->partition.num_stages()) : kNaN, "",
                      "paper: 16 stages, two per GPU; ours: the L mixed-pipe picks"});
  }
  // Why the synchronous Mixed-pipe gains little here: a flushed pipeline of K stages spends
  // about (M + K - 1) stage times per mini-batch; Seq-pipe's max stage time is its busiest GPU's
  // load per micro-batch, Mixed-pipe's stages hold a fraction of a GPU's. Mixed-pipe wins only
  // where the Seq-pipe baseline is imbalanced by more than its deeper fill and drain costs; our
  // Seq-pipe is the best of four memory-aware contiguous partitioners (min-max `optimal`
  // included), so its compute imbalance is what the rows below show.
  for (const Run* r : {&p.gpipe_seq, &p.gpipe_mixed}) {
    if (!r->fits) continue;
    double hi = 0, sum = 0;
    for (const auto& d : r->sim.metrics.devices) {
      hi = std::max(hi, d.busy_s);
      sum += d.busy_s;
    }
    const double mean = sum / static_cast<double>(r->sim.metrics.devices.size());
    t.rows.push_back({fmt::format("GPipe {}", r->mixed ? "Mixed-pipe" : "Seq-pipe"),
                      "compute imbalance (max / mean GPU busy time)", kNaN, hi / mean, "x",
                      "what Mixed-pipe can win back in a flushed pipeline"});
  }
  for (const Run* r : {&p.gpipe_seq, &p.gpipe_mixed, &p.ftpipe_seq, &p.ftpipe_mixed}) {
    if (!r->fits) continue;
    const double hi = *std::max_element(r->peaks.begin(), r->peaks.end());
    const double lo = *std::min_element(r->peaks.begin(), r->peaks.end());
    t.rows.push_back(
        {fmt::format("{} {}", r->async ? "FTPipe" : "GPipe", r->mixed ? "Mixed-pipe" : "Seq-pipe"),
         "GPU memory imbalance (max / min peak)", kNaN, hi / lo, "x",
         "paper: Mixed-pipe balances GPU memory (Figure 8)"});
  }
  return t;
}

ReproTable figures_table(const Setup& setup, const Figures& f, const Pipelines& rte,
                         const Pipelines& boolq) {
  ReproTable t{"text-figures", "Figures stated in FTPipe's text, T5-3B", {}};
  // Section 3.2: 8 stages, micro-batch 4, float32; activations forward plus gradients backward.
  if (rte.gpipe_seq.fits) {
    const double per_sample = cross_gpu_bytes_per_sample(setup, rte.gpipe_seq.partition);
    t.rows.push_back({"Seq-pipe, 8 stages, micro-batch 4", "communication per forward + backward",
                      f.low("seq_comm_per_pass_mb"), 2 * 4 * per_sample / 1e6, "MB",
                      "our Seq-pipe partition of the RTE run; MB = 1e6 bytes"});
  }
  for (const auto& [name, p] : {std::pair<std::string, const Pipelines*>{"rte", &rte},
                                std::pair<std::string, const Pipelines*>{"boolq", &boolq}}) {
    if (!p->ftpipe_seq.fits || !p->ftpipe_mixed.fits) continue;
    const double ratio = cross_gpu_bytes_per_sample(setup, p->ftpipe_mixed.partition) /
                         cross_gpu_bytes_per_sample(setup, p->ftpipe_seq.partition);
    t.rows.push_back({"FTPipe Mixed-pipe vs Seq-pipe, " + name, "inter-GPU communication volume",
                      f.low("comm_volume_mixed_over_seq_" + name), ratio, "x",
                      "bytes per sample crossing GPUs"});
  }
  // Section 5.3: "Mixed-pipe improves the time-to-accuracy of GPipe up to 1.2x" over RTE, WiC,
  // BoolQ and MultiRC (Figure 6): the best task against the best of the tasks we run.
  std::string best_task = "none";
  double best = kNaN;
  for (const auto& [name, p] : {std::pair<std::string, const Pipelines*>{"RTE", &rte},
                                std::pair<std::string, const Pipelines*>{"BoolQ", &boolq}}) {
    if (!p->gpipe_seq.fits || !p->gpipe_mixed.fits) continue;
    const double gain = p->gpipe_mixed.throughput / p->gpipe_seq.throughput;
    if (!(gain <= best)) {
      best = gain;
      best_task = name;
    }
  }
  t.rows.push_back({"GPipe Mixed-pipe over Seq-pipe (sync), best task", "epoch-time speed-up",
                    f.high("mixed_sync_speedup_max"), best, "x",
                    fmt::format("paper: up to 1.2x over RTE, WiC, BoolQ, MultiRC (time to "
                                "accuracy, Figure 6); ours: the best of RTE and BoolQ ({})",
                                best_task)});
  const CostModel cost(setup.profile, setup.cluster);
  const zoo::ZooModel model = zoo::describe_model(kModel, "reproduce ftpipe");
  double enc = 0, dec = 0, fwd = 0, rec = 0, bwd = 0;
  for (int l = 0; l < cost.num_layers(); ++l) {
    const std::string& name = model.layers[static_cast<size_t>(l)].name;
    const double c = cost.forward_s(l, 4) + cost.backward_s(l, 4);
    if (name.rfind("enc", 0) == 0) enc += c;
    if (name.rfind("dec", 0) == 0) dec += c;
    fwd += cost.forward_s(l, 4);
    rec += cost.recompute_s(l, 4);
    bwd += cost.backward_s(l, 4);
  }
  t.rows.push_back({"encoder vs decoder layers, sequences 512 / 4",
                    "computation-load ratio (Section 3.3's K)", f.low("encoder_decoder_load_ratio"),
                    enc / dec, "x", "forward + backward of the 24 encoder vs 24 decoder blocks"});
  t.rows.push_back({"a stage that recomputes vs the last stage", "load ratio",
                    f.low("recompute_extra_load"), (fwd + rec + bwd) / (fwd + bwd), "x",
                    "(forward + recompute + backward) / (forward + backward), whole model"});
  return t;
}

ReproTable pipedream_table(const Setup& setup, const Figures& f, const Pipelines& rte) {
  ReproTable t{"pipedream-memory",
               "PipeDream's planner on T5-3B, 8 x 11 GB, micro-batch 4 (FTPipe Section 5.5)",
               {}};
  const double capacity = setup.cluster.device.memory_bytes;
  const PipeDreamPlan free = pipedream_plan(setup, 4, false);
  if (!free.error.empty()) {
    t.rows.push_back({"memory limits ignored", "plan", kNaN, kNaN, "", free.error});
  } else {
    const Partition& p = free.partition;
    // One row per stage that does not fit (its replicas need the same).
    for (int s = 0; s < p.num_stages(); ++s) {
      const auto first = static_cast<size_t>(p.device_of(s));
      const double need = free.need[first];
      if (need <= capacity) continue;
      const auto& layers = p.stages[static_cast<size_t>(s)];
      const int copies = p.replicas_of(s);
      t.rows.push_back(
          {fmt::format("memory limits ignored: stage {} of {} (layers {}-{}) on GPU{} {}", s,
                       p.num_stages(), layers.front(), layers.back(), copies > 1 ? "s" : "",
                       copies > 1 ? fmt::format("{}-{}", first, first + copies - 1)
                                  : std::to_string(first)),
           "memory needed per GPU", kNaN, need / kGiB, "GiB",
           fmt::format("over the {:.2f} GiB GPU by {:.2f} GiB", capacity / kGiB,
                       (need - capacity) / kGiB)});
    }
    const zoo::ZooModel model = zoo::describe_model(kModel, "reproduce ftpipe");
    double last_params = 0;
    for (int l : p.stages.back()) {
      last_params += static_cast<double>(model.layers[static_cast<size_t>(l)].params);
    }
    const double claim = f.low("pipedream_last_stage_params");
    t.rows.push_back({"memory limits ignored: last stage",
                      fmt::format("more than {:.3g} parameters (1 = yes)", claim), 1.0,
                      last_params > claim ? 1.0 : 0.0, "",
                      fmt::format("ours {:.3g} parameters; {} stage(s), replicas {}", last_params,
                                  p.num_stages(), fmt::join(p.replicas, "/"))});
  }
  const PipeDreamPlan held = pipedream_plan(setup, 4, true);
  double worst = 0;
  for (double n : held.need) worst = std::max(worst, n);
  t.rows.push_back(
      {"memory limits enforced", "plan found (1 = yes)", kNaN, held.error.empty() ? 1.0 : 0.0, "",
       held.error.empty() ? fmt::format("{} stages; largest GPU needs {:.2f} GiB of {:.2f}",
                                        held.partition.num_stages(), worst / kGiB, capacity / kGiB)
                          : "refused, as FTPipe expects (\"a pipeline with weight stashing and "
                            "without gradient accumulation would not be able to train T5-3B on "
                            "11GB GPUs\", Section 5.5): " +
                                held.error});
  if (rte.gpipe_seq.fits) {
    const auto need = pipedream_memory(setup, rte.gpipe_seq.partition, 4);
    const double most = *std::max_element(need.begin(), need.end());
    t.rows.push_back({"simple pipeline (Seq-pipe, 8 stages) with weight stashing", "fits (1 = yes)",
                      f.low("pipedream_simple_pipeline_fits"), most <= capacity ? 1.0 : 0.0, "",
                      fmt::format("largest GPU needs {:.2f} GiB", most / kGiB)});
  }
  return t;
}

// The synchronous Mixed-pipe result and why, from both runs.
std::string mixed_sync_note(const Pipelines& rte, const Pipelines& boolq) {
  auto gain = [](const Pipelines& p) { return p.gpipe_mixed.throughput / p.gpipe_seq.throughput; };
  auto stages = [](const Pipelines& p) { return p.gpipe_mixed.partition.num_stages(); };
  return fmt::format(
      "synchronous Mixed-pipe (ours {:.2f}x on RTE with {} stages, {:.2f}x on BoolQ with {}; "
      "paper up to 1.2x): our Seq-pipe baseline is within about 11% of perfect compute balance "
      "(the imbalance rows), so a flushed GPipe has little to win back; with two stages per GPU "
      "as the paper's it gains a little, with more it pays the deeper fill and drain. The "
      "paper's larger gain suggests a less balanced Seq-pipe baseline, which its withheld Tables "
      "2-3 would show",
      gain(rte), stages(rte), gain(boolq), stages(boolq));
}

class FtpipeEntry : public ReproEntry {
 public:
  std::string id() const override { return "ftpipe"; }
  std::string title() const override {
    return "FTPipe: T5-3B on 8 x RTX 2080 Ti, Mixed-pipe vs Seq-pipe, sync and async; PipeDream's "
           "plan vs memory";
  }

  ReproResult run(const ReproContext& context) const override {
    const ReferenceTable hp = load_reference(context, "ftpipe-table4-hparams.csv");
    const Figures f{load_reference(context, "ftpipe-text-figures.csv")};
    const Setup setup = make_setup(context.catalog);
    ReproResult res;
    res.id = id();
    res.citation = fmt::format(
        "FTPipe (Eliad et al., USENIX ATC'21), Sections 3-5 and Table 4 ({}, {}); its Tables 2 "
        "and 3 are withheld from our copy as held-out validation targets",
        hp.path, f.t.path);
    const Pipelines rte = run_dataset(setup, hp, "rte");
    const Pipelines boolq = run_dataset(setup, hp, "boolq");
    res.tables = {speedup_table("rte", rte, f), speedup_table("boolq", boolq, f),
                  figures_table(setup, f, rte, boolq), pipedream_table(setup, f, rte)};
    res.assumptions = {
        "8 x RTX 2080 Ti (11 GB, 13.4 TFLOP/s float32, 616 GB/s) on PCIe 3.0 x16 (15.75 GB/s, "
        "5 us), hardware/clusters/ftpipe-8x-2080ti.json",
        "T5-3B from the analytic zoo (encoder sequence 512, decoder 4), float32; Adafactor, so no "
        "optimizer state; the roofline with Turing efficiencies from a published benchmark of "
        "another model, not fitted to this paper (hardware/efficiency/rtx-2080-ti-float32.json, "
        "written by hardware/efficiency/derive_published.py: the transformer kinds keep the "
        "built-in prior for want of a published Turing transformer benchmark; per-(kind, pass) "
        "launch overheads measured on this project's H100 host, which weigh on the 4-token "
        "decoder layers)",
        "GPipe: clock-cycle order, every micro-batch recomputed on every stage but the last "
        "(FTPipe "
        "Section 4.3: the last stage uses the no-recompute profile); FTPipe: ftpipe-async, "
        "recompute on all stages but the last, weights updated every `accum` micro-batches",
        "Seq-pipe: the fastest that fits of optimal (min-max), balance-time and balance-size, "
        "contiguous, one stage per GPU; Mixed-pipe: our mixed-pipe, candidates compared by "
        "simulating the schedule that runs; all checked with the schedule's memory walk against "
        "the 11 GB GPUs",
        "epoch-time speed-up = throughput ratio at the paper's Table 4 batch and accum; the "
        "paper's figures are time to accuracy, which also reflects staleness and epochs needed",
        mixed_sync_note(rte, boolq),
        "PipeDream: pipedream-dp at micro-batch 4, weight stashing without recomputation; stage s "
        "of S keeps S - s weight versions and micro-batches (its in-flight count)"};
    return res;
  }
};

}  // namespace

}  // namespace ftpipe

std::unique_ptr<ReproEntry> make_ftpipe_entry() {
  return std::make_unique<ftpipe::FtpipeEntry>();
}

}  // namespace pipetwin::sim
