// `pipetwin capacity`: rank the clusters of a priced catalog by the time and the cost to train a
// model (studies/capacity.hpp).
//
//   pipetwin capacity --model M -B 64 --samples 1281167 [--epochs 90] [--clusters a,b]
//                     [--prices FILE] [--budget 500] [-o DIR]
//
// Prints the clusters ranked by the fastest plan's time and by the cheapest plan's cost, and the
// clusters where nothing fits (which device runs out, by how much). -o DIR writes
// DIR/capacity.csv and DIR/plans/<cluster>.{fastest,cheapest}.plan.json, ready for
// `pipetwin simulate --plan` and `pipetwin run --plan`.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "studies/capacity.hpp"
#include "studies/sweep/csv.hpp"

namespace pipetwin::cli {

namespace {

namespace fs = std::filesystem;

struct CapacityArgs {
  std::string model, profile, catalog, prices, partitioner = "balance-time", output;
  std::vector<std::string> clusters, schedules = sim::default_capacity_schedules();
  int batch = 0, jobs = 0;
  double samples = 0, epochs = 1, budget = 0;
  bool quiet = false;
  ResolveOptions precision;
};

// Model chunks per device of a plan (v x K stages on K devices).
int virtual_stages(const Plan& p) {
  return p.num_stages() / p.devices_per_replica();
}

// "K=4 dp=2 M=16 gpipe +ckpt", "K=4 dp=1 M=8 zbv v=2": K counts devices.
std::string plan_text(const sim::CapacityChoice& c) {
  const Plan& p = c.plan;
  const int v = virtual_stages(p);
  return fmt::format("K={} dp={} M={} {}{}{}", p.devices_per_replica(), p.dp, p.chunks, p.schedule,
                     v > 1 ? fmt::format(" v={}", v) : "",
                     p.checkpoint == Checkpoint::kNone ? "" : " +ckpt");
}

std::string money(double v, const std::string& currency) {
  return fmt::format("{:.2f} {}", v, currency);
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
  if (x != nullptr) {
    const Plan& p = x->plan;
    for (const auto& v :
         {std::to_string(x->gpus), std::to_string(p.devices_per_replica()),
          std::to_string(virtual_stages(p)), std::to_string(p.dp), std::to_string(p.chunks),
          std::to_string(p.micro_batch_size()), p.schedule,
          std::string(checkpoint_name(p.checkpoint)), p.partitioner,
          fmt::format("{}", x->iteration_time_s), fmt::format("{}", x->throughput_samples_per_s),
          fmt::format("{}", x->epoch_time_s), fmt::format("{}", x->total_time_s),
          fmt::format("{}", x->cost), fmt::format("{:.0f}", x->peak_memory_bytes)}) {
      row.push_back(v);
    }
  } else {
    row.resize(row.size() + 14);
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
  check_precision_options(a.precision);
  const Catalog catalog = load_catalog(a.catalog);
  sim::CapacityRequest q;
  q.model = a.model;
  q.profile_path = a.profile;
  q.precision = a.precision;
  q.catalog = &catalog;
  q.prices =
      sim::load_prices(a.prices.empty() ? sim::default_prices_path(catalog) : a.prices, catalog);
  q.clusters = a.clusters;
  q.batch = a.batch;
  q.samples = a.samples;
  q.epochs = a.epochs;
  q.schedules = a.schedules;
  q.partitioner = a.partitioner;
  q.budget = a.budget;
  q.jobs = a.jobs;
  const sim::CapacityReport r = sim::plan_capacity(q);
  if (q.model.empty() && !r.clusters.empty()) q.model = a.profile;
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
  cmd->add_option("--model", a->model, "model name: zoo name or uniform:layers=L,...");
  cmd->add_option("--profile", a->profile, "profile JSON (instead of resolving --model)");
  cmd->add_option("-B,--batch", a->batch, "global batch size")->required();
  cmd->add_option("--samples", a->samples, "samples per epoch (time to this many samples)")
      ->required();
  cmd->add_option("--epochs", a->epochs, "epochs")->capture_default_str();
  cmd->add_option("--catalog", a->catalog, "hardware catalog folder (default: hardware/)");
  add_precision_options(cmd, &a->precision);
  cmd->add_option("--prices", a->prices, "prices file (default: <catalog>/prices.json)");
  cmd->add_option("--clusters", a->clusters, "clusters to consider (default: every priced one)")
      ->delimiter(',');
  cmd->add_option("--schedules", a->schedules,
                  "schedules to try (interleaved-1f1b with 2 model chunks per device)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--partitioner", a->partitioner, "partitioner")->capture_default_str();
  cmd->add_option("--budget", a->budget, "most the fastest plan may cost (0: no limit)");
  cmd->add_option("-j,--jobs", a->jobs, "worker threads (default: all cores)");
  cmd->add_option("-o,--output", a->output, "folder for capacity.csv and the plans");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing");
  cmd->callback([a] { run_capacity(*a); });
}

}  // namespace pipetwin::cli
