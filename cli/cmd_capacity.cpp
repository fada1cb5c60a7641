// `pipetwin capacity`: rank the clusters of a priced catalog by the time and the cost to train a
// model (studies/capacity.hpp).
//
//   pipetwin capacity --model M -B 64 --samples 1281167 [--epochs 90] [--clusters a,b]
//                     [--prices FILE] [--budget 500] [--partitioner a,b] [--checkpoint-modes a,b]
//                     [-o DIR]
//
// Prints the clusters ranked by the fastest plan's time and by the cheapest plan's cost, the
// clusters where nothing fits (the leanest plan tried: which device runs out, by how much), and
// what the search did with each cluster's layouts. -o DIR writes DIR/capacity.csv and
// DIR/plans/<cluster>.{fastest,cheapest}.plan.json, ready for `pipetwin simulate --plan` and
// `pipetwin run --plan`.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "studies/capacity.hpp"
#include "studies/capacity_options.hpp"
#include "studies/capacity_space.hpp"
#include "studies/sweep/csv.hpp"

namespace pipetwin::cli {

namespace {

namespace fs = std::filesystem;

// --partitioner is the plan flag's text, a comma-separated list here.
struct CapacityArgs : sim::CapacityOptions {
  CapacityArgs() {
    // A search over many plans: every partitioner that takes memory into account (a list).
    flags.partitioner = fmt::format("{}", fmt::join(partitioners, ","));
  }
  std::string output;
  bool quiet = false;
};

// "K=4 dp=2 M=16 gpipe ckpt=always optimal", "K=4 dp=1 M=8 zbv v=2 balance-time": K counts
// devices.
std::string plan_text(const sim::CapacityChoice& c) {
  return sim::plan_summary(c.plan);
}

// Model chunks per device of a plan (v x K stages on K devices).
int virtual_stages(const Plan& p) {
  return p.num_stages() / p.devices_per_replica();
}

std::string money(double v, const std::string& currency) {
  return fmt::format("{:.2f} {}", v, currency);
}

// What the search did with each cluster's layouts (studies/capacity_search.hpp).
std::string search_table(const sim::CapacityReport& r) {
  Table t({"cluster", "layouts", "over memory bound", "beaten by time bound", "no partition fits",
           "refused", "simulated"});
  for (const auto& c : r.clusters) {
    const sim::SearchCounts& n = c.search;
    t.add({c.cluster, std::to_string(n.layouts), std::to_string(n.memory_bound),
           std::to_string(n.time_bound), std::to_string(n.no_fit), std::to_string(n.refused),
           std::to_string(n.simulated)});
  }
  return "search (layouts of K, dp, M, schedule, v, checkpoint mode and partitioner; skipped by "
         "lower bounds, planned, simulated):\n" +
         t.render();
}

void print_report(const sim::CapacityReport& r, const sim::CapacityRequest& q) {
  std::printf("capacity: %s, batch %d, %.0f samples x %g epochs; prices per GPU-hour in %s%s\n",
              q.model.c_str(), q.batch, q.samples, q.epochs, q.prices.currency.c_str(),
              q.prices.note.empty() ? "" : (" (" + q.prices.note + ")").c_str());
  auto table = [&](const std::vector<size_t>& order, bool fastest) {
    Table t(
        {"rank", "cluster", "GPUs", "plan", "iteration", "epoch", "total", "cost", "peak memory"});
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& c = r.clusters[order[i]];
      const auto& x = fastest ? c.fastest : c.cheapest;
      t.add({std::to_string(i + 1), c.cluster, fmt::format("{}/{}", x.gpus, c.devices),
             plan_text(x), fmt_seconds(x.iteration_time_s), fmt_seconds(x.epoch_time_s),
             fmt_seconds(x.total_time_s), money(x.cost, q.prices.currency),
             fmt_bytes(x.peak_memory_bytes)});
    }
    return t.render();
  };
  std::printf("\nby time (the fastest plan of each cluster%s):\n%s",
              q.budget > 0 ? " within the budget" : "", table(r.by_time, true).c_str());
  std::printf("\nby cost (the cheapest plan of each cluster):\n%s",
              table(r.by_cost, false).c_str());
  for (const auto& c : r.clusters) {
    if (!c.note.empty()) std::printf("%s: %s\n", c.cluster.c_str(), c.note.c_str());
  }
  std::printf("\n%s", search_table(r).c_str());
}

sim::CsvRow csv_row(const std::string& objective, size_t rank, const sim::ClusterCapacity& c,
                    const sim::CapacityChoice* x, const std::string& plan_file) {
  sim::CsvRow row = {objective,
                     rank ? std::to_string(rank) : "",
                     c.cluster,
                     c.device,
                     std::to_string(c.devices),
                     fmt::format("{}", c.price_per_gpu_hour),
                     c.fits ? "yes" : "no"};
  // The plan's columns: of the plan chosen, or of the leanest plan tried where nothing fits.
  auto plan_columns = [&row](const Plan& p, const std::string& gpus) {
    for (const auto& v :
         {gpus, std::to_string(p.devices_per_replica()), std::to_string(virtual_stages(p)),
          std::to_string(p.dp), std::to_string(p.chunks), std::to_string(p.micro_batch_size()),
          p.schedule, std::string(checkpoint_name(p.checkpoint)), p.partitioner}) {
      row.push_back(v);
    }
  };
  if (x != nullptr) {
    plan_columns(x->plan, std::to_string(x->gpus));
    for (const auto& v :
         {fmt::format("{}", x->iteration_time_s), fmt::format("{}", x->throughput_samples_per_s),
          fmt::format("{}", x->epoch_time_s), fmt::format("{}", x->total_time_s),
          fmt::format("{}", x->cost), fmt::format("{:.0f}", x->peak_memory_bytes)}) {
      row.push_back(v);
    }
  } else {
    if (c.has_leanest) {
      plan_columns(c.leanest, "");
    } else {
      row.resize(row.size() + 9);
    }
    row.resize(row.size() + 5);
    row.push_back(c.need_bytes > 0 ? fmt::format("{:.0f}", c.need_bytes) : "");
  }
  row.push_back(c.capacity_bytes > 0 ? fmt::format("{:.0f}", c.capacity_bytes) : "");
  row.push_back(c.oom_device);
  row.push_back(c.over_bytes > 0 ? fmt::format("{:.0f}", c.over_bytes) : "");
  row.push_back(c.note);
  row.push_back(plan_file);
  return row;
}

void write_outputs(const sim::CapacityReport& r, const std::string& dir) {
  fs::create_directories(fs::path(dir) / "plans");
  std::string csv = sim::csv_line({"objective",
                                   "rank",
                                   "cluster",
                                   "device",
                                   "devices",
                                   "price_per_gpu_hour",
                                   "fits",
                                   "gpus",
                                   "stages",
                                   "virtual_stages",
                                   "dp",
                                   "chunks",
                                   "micro_batch",
                                   "schedule",
                                   "checkpoint",
                                   "partitioner",
                                   "iteration_time_s",
                                   "throughput_samples_per_s",
                                   "epoch_time_s",
                                   "total_time_s",
                                   "cost",
                                   "peak_memory_bytes",
                                   "memory_capacity_bytes",
                                   "oom_device",
                                   "over_bytes",
                                   "note",
                                   "plan_file"});
  auto emit = [&](const std::vector<size_t>& order, bool fastest) {
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& c = r.clusters[order[i]];
      const auto& x = fastest ? c.fastest : c.cheapest;
      const std::string file =
          fmt::format("plans/{}.{}.plan.json", c.cluster, fastest ? "fastest" : "cheapest");
      save_plan(x.plan, (fs::path(dir) / file).string());
      csv += sim::csv_line(
          csv_row(fastest ? "fastest" : "cheapest", i + 1, r.clusters[order[i]], &x, file));
    }
  };
  emit(r.by_time, true);
  emit(r.by_cost, false);
  for (const auto& c : r.clusters) {
    if (!c.fits) csv += sim::csv_line(csv_row("none", 0, c, nullptr, ""));
  }
  write_file_atomic((fs::path(dir) / "capacity.csv").string(), csv);
}

void run_capacity(const CapacityArgs& a) {
  const PlanFlags& f = a.flags;
  f.check_precision();
  const Catalog catalog = load_catalog(f.catalog);
  sim::CapacityOptions o = a;
  o.partitioners = sim::split_commas(f.partitioner);
  sim::CapacityRequest q = o.request(catalog);
  const sim::CapacityReport r = sim::plan_capacity(q);
  if (q.model.empty() && !r.clusters.empty()) q.model = f.profile;
  if (!a.output.empty()) write_outputs(r, a.output);
  if (!a.quiet) {
    print_report(r, q);
    if (!a.output.empty())
      std::printf("wrote %s/capacity.csv and %s/plans/\n", a.output.c_str(), a.output.c_str());
  }
}

}  // namespace

void add_capacity_command(CLI::App& app) {
  auto a = std::make_shared<CapacityArgs>();
  CLI::App* cmd =
      app.add_subcommand("capacity", "Rank priced clusters by time and cost to train a model");
  using F = PlanFlag;
  add_plan_flags(cmd, &a->flags,
                 {F::kModel, F::kProfile, F::kCatalog, F::kDtype, F::kOptimizer, F::kBatch,
                  F::kPartitioner, F::kFramework, F::kDistributedOptimizer});
  cmd->get_option("--batch")->required()->default_str("");  // no default: the user's batch
  cmd->get_option("--partitioner")
      ->description(
          "partitioners to try, comma-separated (memory-aware: a partition that fits "
          "where one exists)");
  cmd->add_option("--samples", a->samples, "samples per epoch (time to this many samples)")
      ->required();
  cmd->add_option("--epochs", a->epochs, "epochs")->capture_default_str();
  cmd->add_option("--prices", a->prices, "prices file (default: <catalog>/prices.json)");
  cmd->add_option("--clusters", a->clusters, "clusters to consider (default: every priced one)")
      ->delimiter(',');
  cmd->add_option("--schedules", a->schedules,
                  "schedules to try (interleaved-1f1b with 2, and 4 where the model has 4K "
                  "layers, model chunks per device)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--checkpoint-modes", a->checkpoint_modes, "checkpoint modes to try")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tp-sizes", a->tp_sizes,
                  "tensor-parallel sizes to try, with sequence parallelism (those the model splits "
                  "and that divide a node)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--budget", a->budget, "most the fastest plan may cost (0: no limit)");
  cmd->add_option("-j,--jobs", a->jobs, "worker threads (default: all cores)");
  cmd->add_option("-o,--output", a->output, "folder for capacity.csv and the plans");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing");
  cmd->callback([a] { run_capacity(*a); });
}

}  // namespace pipetwin::cli
