// `pipetwin reproduce ID|all|list [-o DIR]`: the papers' figures, side by side with ours
// (studies/reproduce/). Prints each entry's tables and writes DIR/ID/*.csv, DIR/ID/README.md and
// DIR/summary.csv.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "studies/reproduce/reproduce.hpp"

namespace pipetwin::cli {

namespace {

struct ReproduceArgs {
  std::string id = "all";
  std::string out = "results/reproduce";
  std::string catalog, reference;
  bool quiet = false;
};

void run_reproduce(const ReproduceArgs& a) {
  sim::ReproContext ctx{load_catalog(a.catalog),
                        a.reference.empty() ? sim::default_reference_dir() : a.reference};
  if (a.id == "list") {  // the titles come from the entries' data files
    for (const auto& e : sim::repro_entries())
      std::printf("%-18s %s\n", e->id().c_str(), e->title(ctx).c_str());
    return;
  }
  std::vector<const sim::ReproEntry*> todo;
  if (a.id == "all") {
    for (const auto& e : sim::repro_entries()) todo.push_back(e.get());
  } else {
    todo.push_back(&sim::find_repro_entry(a.id));
  }
  std::vector<sim::ReproResult> results;
  for (const sim::ReproEntry* e : todo) {
    const auto t0 = std::chrono::steady_clock::now();
    results.push_back(e->run(ctx));
    const std::string text = sim::write_repro_result(results.back(), a.out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a.quiet)
      std::printf("%s(%.1f s, written to %s/%s)\n\n", text.c_str(), s, a.out.c_str(),
                  e->id().c_str());
  }
  sim::write_repro_summary(results, a.out);
}

}  // namespace

void add_reproduce_command(CLI::App& app) {
  auto args = std::make_shared<ReproduceArgs>();
  CLI::App* cmd =
      app.add_subcommand("reproduce", "Reproduce the papers' figures side by side with them");
  cmd->add_option("id", args->id, "entry id, `all` (default) or `list`");
  cmd->add_option("-o,--output", args->out, "output folder (default results/reproduce)");
  cmd->add_option("--catalog", args->catalog, "hardware catalog folder (default: the shipped one)");
  cmd->add_option(
      "--reference", args->reference,
      "folder of the papers' tables (default: experiments/reference of the data folder)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  cmd->callback([args] { run_reproduce(*args); });
}

}  // namespace pipetwin::cli
