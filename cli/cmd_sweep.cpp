// `pipetwin sweep`: what-if sweeps over a grid of plans (studies/sweep/), and `pipetwin sweep
// merge` to put the shards of a sharded sweep back together.
//
//   pipetwin sweep --grid 'stages=1,2,4;chunks=auto,4:32:4;schedule=gpipe,1f1b' --model M
//                  [--cluster C] [-B 64] [--jobs N] [--shard i/n] -o SWEEP.csv
//   pipetwin sweep merge SWEEP.0.csv SWEEP.1.csv ... -o SWEEP.csv
//
// Progress goes to stderr: a bar with rate and time left on a terminal, a plain line every 10%
// otherwise. Ctrl-C stops after the points in flight (every finished point is in the CSV) and
// exits 130 (SIGTERM likewise, 143); the same command resumes. A second Ctrl-C kills at once (rows
// already written are safe; a torn last row is cut off on resume).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"
#include "studies/sweep/sweep_options.hpp"

namespace pipetwin::cli {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) {
  g_signal.store(sig);
  g_interrupted.store(true);
}

// SIGINT and SIGTERM stop the sweep cleanly. A SIGINT the shell set to be ignored (a background
// job of a script) stays ignored, as the GNU coding standards ask.
void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // a second signal kills at once
  struct sigaction old {};
  sigaction(SIGINT, nullptr, &old);
  if (old.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

struct SweepArgs {
  sim::SweepOptions sweep;
  bool quiet = false;
  std::vector<std::string> merge_inputs;
  std::string merge_output;
};

// Progress on stderr: a redrawn bar on a terminal, a line per 10% otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(2) != 0) {}

  void operator()(const sim::SweepProgress& p) {
    if (quiet_ || p.total == 0) return;
    const double frac = static_cast<double>(p.done) / static_cast<double>(p.total);
    const double left = p.rate > 0 ? static_cast<double>(p.total - p.done) / p.rate : 0;
    const std::string tail = fmt::format("{}/{} {:3.0f}%  {:.0f} points/s  {} left", p.done,
                                         p.total, frac * 100, p.rate, fmt_seconds(left));
    if (tty_) {
      const int width = 30, filled = static_cast<int>(frac * width);
      std::fprintf(stderr, "\rsweep [%s%s] %s   ",
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(width - filled), '.').c_str(), tail.c_str());
      drawn_ = true;
    } else if (static_cast<int>(frac * 10) > last_decile_ || p.done == p.total) {
      if (p.done == last_done_) return;
      last_decile_ = static_cast<int>(frac * 10);
      last_done_ = p.done;
      std::fprintf(stderr, "sweep: %s\n", tail.c_str());
    }
    std::fflush(stderr);
  }
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }

 private:
  bool quiet_, tty_;
  bool drawn_ = false;
  int last_decile_ = -1;
  int64_t last_done_ = -1;
};

void print_best(const sim::SweepTable& all, const sim::SweepTable& best, const std::string& path) {
  size_t feasible = 0, fit = 0;
  const size_t fits = sim::csv_column(all.header, "fits", path);
  for (const auto& r : all.rows) {
    feasible += r[fits].empty() ? 0 : 1;
    fit += r[fits] == "yes" ? 1 : 0;
  }
  std::printf("%zu points: %zu feasible, %zu fit in memory; best by throughput (%s):\n",
              all.rows.size(), feasible, fit, path.c_str());
  // Elastic sweeps rank by the throughput of the whole run (studies/sweep/results.hpp).
  std::vector<std::string> head = {"rank"};
  const std::vector<size_t> vary = sim::varying_inputs(all);
  for (size_t c : vary) head.push_back(all.header[c]);
  for (const char* m : {"M", "iteration", "throughput", "bubble", "peak memory"})
    head.emplace_back(m);
  const bool elastic =
      std::count(all.header.begin(), all.header.end(), std::string("elastic_total_s")) > 0;
  if (elastic) {
    for (const char* m : {"training run", "speedup", "final K x dp"}) head.emplace_back(m);
  }
  Table t(head);
  auto col = [&](const char* name) { return sim::csv_column(all.header, name, path) + 1; };
  for (const auto& r : best.rows) {
    std::vector<std::string> cells = {r[0]};
    for (size_t c : vary) cells.push_back(r[c + 1]);
    cells.push_back(r[col("plan_M")]);
    cells.push_back(fmt_seconds(std::stod(r[col("iteration_time_s")])));
    cells.push_back(fmt::format("{:.2f} samples/s", std::stod(r[col("throughput_samples_per_s")])));
    cells.push_back(fmt_percent(std::stod(r[col("bubble_fraction")])));
    cells.push_back(fmt_bytes(std::stod(r[col("peak_memory_max_bytes")])));
    if (elastic) {
      cells.push_back(fmt_seconds(std::stod(r[col("elastic_total_s")])));
      cells.push_back(fmt::format("{:.2f}x", std::stod(r[col("speedup")])));
      cells.push_back(r[col("final_K")] + " x " + r[col("final_dp")]);
    }
    t.add(cells);
  }
  std::fputs(t.render().c_str(), stdout);
}

void summarize(const std::string& csv, int top, bool quiet) {
  const sim::BestPoints b = sim::save_best_points(csv, top);
  if (!quiet) print_best(b.all, b.best, b.path);
}

void run_sweep_verb(const SweepArgs& a) {
  const sim::SweepOptions& s = a.sweep;
  const sim::SweepInputs in = s.inputs();
  const sim::Sweep sweep(sim::Grid::parse(s.grid), in);
  sim::RunOptions o = s.run_options();
  o.stop = &g_interrupted;
  ProgressPrinter printer(a.quiet);
  o.progress = [&printer](const sim::SweepProgress& p) { printer(p); };
  install_signal_handlers();
  const sim::RunResult r = sim::run_sweep(sweep, o);
  printer.finish();
  if (!r.complete) {
    std::fprintf(
        stderr,
        "sweep: %s after %lld of %lld points (%lld computed now); run the same command to resume\n",
        g_interrupted ? "interrupted" : "stopped at --limit",
        static_cast<long long>(r.resumed + r.computed), static_cast<long long>(r.total),
        static_cast<long long>(r.computed));
    if (g_interrupted) std::exit(128 + g_signal.load());
    return;
  }
  if (o.shards > 1) {
    if (!a.quiet) {
      std::printf("shard %d/%d: %lld points in %s; merge the shards with `pipetwin sweep merge`\n",
                  o.shard, o.shards, static_cast<long long>(r.total), s.output.c_str());
    }
    return;
  }
  if (!a.quiet && r.resumed > 0)
    std::printf("resumed: %lld points were already done\n", static_cast<long long>(r.resumed));
  summarize(s.output, s.top, a.quiet);
}

void run_merge(const SweepArgs& a) {
  const sim::SweepTable merged = sim::merge_sweeps(a.merge_inputs);
  sim::save_sweep(merged, a.merge_output);
  if (!a.quiet)
    std::printf("merged %zu files: %zu points in %s\n", a.merge_inputs.size(), merged.rows.size(),
                a.merge_output.c_str());
  summarize(a.merge_output, a.sweep.top, a.quiet);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "Simulate every point of a grid of plans into a CSV");
  using O = sim::SweepOption;
  const auto add = [&](O option) {
    const auto& spec = sim::sweep_option_spec(option);
    add_option_spec(cmd, &a->sweep, spec, spec.help);
  };
  add(O::kGrid);
  add_plan_flags(cmd, &a->sweep.plan, all_plan_flags());
  for (O option : {O::kMicroBatch, O::kAlpha, O::kSamples, O::kEpochs, O::kJobs, O::kShard,
                   O::kLimit, O::kTop})
    add(option);
  cmd->add_flag("-q,--quiet", a->quiet, "no progress, no summary");
  add(O::kOutput);
  CLI::App* merge = cmd->add_subcommand("merge", "Merge the CSVs of a sharded sweep into one");
  merge->add_option("inputs", a->merge_inputs, "shard CSVs")->required();
  merge->add_option("-o,--output", a->merge_output, "merged CSV")->required();
  merge->add_option("--top", a->sweep.top, "best points to print and write")->capture_default_str();
  merge->add_flag("-q,--quiet", a->quiet, "print nothing");
  merge->callback([a] { run_merge(*a); });
  cmd->callback([a, merge] {
    if (!merge->parsed()) run_sweep_verb(*a);
  });
}

}  // namespace pipetwin::cli
