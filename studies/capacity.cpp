#include "studies/capacity.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"
#include "sim/memory_pools.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/model_source.hpp"
#include "sim/planner.hpp"
#include "studies/capacity_space.hpp"
#include "studies/sweep/evaluate.hpp"
#include "studies/sweep/runner.hpp"

namespace pipetwin::sim {

PriceList load_prices(const std::string& path, const Catalog& catalog) {
  const Json doc = load_json_file(path);
  const JsonView v(doc, path);
  v.check_format("pipetwin.prices", 1);
  v.allow_only({"format", "version", "note", "currency", "prices"});
  PriceList p;
  p.currency = v.string_or("currency", "USD");
  p.note = v.string_or("note", "");
  const auto known = catalog.cluster_names();
  for (const auto& e : v.at("prices").items()) {
    e.allow_only({"cluster", "price_per_gpu_hour", "source"});
    const std::string name = e.string("cluster");
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      e.at("cluster").fail(
          fmt::format("unknown cluster \"{}\" (not in {}/clusters)", name, catalog.dir()));
    }
    if (p.per_gpu_hour.count(name))
      e.at("cluster").fail(fmt::format("cluster \"{}\" priced twice", name));
    p.per_gpu_hour[name] = e.positive("price_per_gpu_hour");
    p.order.push_back(name);
  }
  return p;
}

std::vector<std::string> default_capacity_schedules() {
  return {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"};
}

std::vector<std::string> default_capacity_partitioners() {
  return {"optimal", "balance-time"};
}

std::string default_prices_path(const Catalog& catalog) {
  return (std::filesystem::path(catalog.dir()) / "prices.json").string();
}

PlanRequest layout_request(const Layout& x, const CapacityTarget& t, const CapacityRequest& r) {
  // The model's name falls back to the profile's in base_plan (sim/planner.hpp).
  return PlanRequest{.model = r.model,
                     .profile = t.profile,
                     .cluster = t.cluster,
                     .catalog = r.catalog,
                     .stages = x.stages,
                     .schedule = x.schedule ? *x.schedule : "gpipe",
                     .virtual_stages = x.virtual_stages,
                     .batch_size = r.batch,
                     .chunks = x.chunks,
                     .partitioner = x.partitioner ? *x.partitioner : "uniform",
                     .dp = x.dp,
                     .checkpoint = x.checkpoint,
                     .framework = r.framework,
                     .tensor_parallel = t.tensor_parallel,
                     .distributed_optimizer = r.distributed_optimizer};
}

namespace {

CapacityChoice make_choice(const Evaluation& e, const CapacityRequest& r, double price) {
  CapacityChoice c;
  c.found = true;
  c.plan = e.plan;
  c.gpus = e.physical_units;  // stream sets of one GPU are one GPU
  c.iteration_time_s = e.iteration_time_s;
  c.throughput_samples_per_s = e.throughput_samples_per_s;
  c.epoch_time_s = std::ceil(r.samples / r.batch) * e.iteration_time_s;
  c.total_time_s = r.epochs * c.epoch_time_s;
  c.cost = c.total_time_s / 3600.0 * c.gpus * price;
  c.peak_memory_bytes = e.peak_memory_max_bytes;
  return c;
}

// "does not fit: the leanest plan tried (K=8 dp=1 M=512 1f1b ckpt=always optimal) needs 25.10 GiB
// on device 3 (rtx-4090 #3), it has 24.00 GiB (over by 1.10 GiB)".
void explain_no_fit(ClusterCapacity& out, const CapacityTarget& t, const CapacityRequest& r,
                    const ClusterSearch& s) {
  const Leanest lean = leanest_layout(t, r);
  if (!lean.found || lean.evaluation.fits) {
    out.note = "no feasible plan" + (s.first_error.empty() ? std::string() : ": " + s.first_error);
    return;
  }
  const Evaluation& e = lean.evaluation;
  out.has_leanest = true;
  out.leanest = e.plan;
  out.oom_device = e.oom_device;
  out.need_bytes = e.capacity_bytes + e.over_bytes;
  out.capacity_bytes = e.capacity_bytes;
  out.over_bytes = e.over_bytes;
  out.note = fmt::format(
      "does not fit: the leanest plan tried ({}) needs {:.2f} GiB on {}, it has {:.2f} GiB (over "
      "by {:.2f} GiB)",
      plan_summary(e.plan), out.need_bytes / kGiB, e.oom_device, e.capacity_bytes / kGiB,
      e.over_bytes / kGiB);
}

void choose(ClusterCapacity& out, const CapacityTarget& t, const CapacityRequest& r,
            const ClusterSearch& s) {
  out.search = s.counts;
  out.fits = s.cheapest_found;
  if (s.fastest_found) out.fastest = make_choice(s.fastest, r, out.price_per_gpu_hour);
  if (s.cheapest_found) out.cheapest = make_choice(s.cheapest, r, out.price_per_gpu_hour);
  if (out.fits && !out.fastest.found) {
    out.note = fmt::format("no plan within the budget {:.2f} (the cheapest costs {:.2f})", r.budget,
                           out.cheapest.cost);
  }
  if (!out.fits) explain_no_fit(out, t, r, s);
}

// Folds the search of one tensor-parallel size into the cluster's, in the search's own orders
// (faster, cheaper; the first searched on ties); counts add up.
void merge_search(ClusterSearch& into, const ClusterSearch& other) {
  for (long SearchCounts::*n : {&SearchCounts::layouts, &SearchCounts::memory_bound,
                                &SearchCounts::time_bound, &SearchCounts::no_fit,
                                &SearchCounts::refused, &SearchCounts::simulated}) {
    into.counts.*n += other.counts.*n;
  }
  if (into.first_error.empty()) into.first_error = other.first_error;
  // Cost is iteration time x GPUs x one price for every size of a cluster; ties keep `into`.
  const auto gpu_seconds = [](const Evaluation& e) { return e.iteration_time_s * e.physical_units; };
  const Evaluation &f = other.fastest, &c0 = into.fastest;
  if (other.fastest_found &&
      (!into.fastest_found ||
       capacity_faster(f.iteration_time_s, f.physical_units, 1, c0.iteration_time_s, c0.physical_units, 0))) {
    into.fastest = f;
    into.fastest_found = true;
  }
  const Evaluation &k = other.cheapest, &k0 = into.cheapest;
  if (other.cheapest_found &&
      (!into.cheapest_found || capacity_cheaper(gpu_seconds(k), k.physical_units, k.iteration_time_s, 1,
                                       gpu_seconds(k0), k0.physical_units, k0.iteration_time_s, 0))) {
    into.cheapest = k;
    into.cheapest_found = true;
  }
}

void check_request(const CapacityRequest& r) {
  if (r.catalog == nullptr) throw InputError("capacity: no hardware catalog");
  if (r.batch < 1) throw InputError(fmt::format("--batch must be positive ({} given)", r.batch));
  if (!(r.samples > 0))
    throw InputError(fmt::format("--samples must be positive ({} given)", r.samples));
  if (!(r.epochs > 0))
    throw InputError(fmt::format("--epochs must be positive ({} given)", r.epochs));
  if (r.budget < 0)
    throw InputError(fmt::format("--budget must not be negative ({} given)", r.budget));
  if (r.schedules.empty()) throw InputError("--schedules: give at least one schedule");
  for (const auto& s : r.schedules) schedule_info(s);
  if (r.partitioners.empty()) throw InputError("--partitioner: give at least one partitioner");
  for (const auto& p : r.partitioners) make_partitioner(p);
  if (r.checkpoints.empty()) throw InputError("--checkpoint-modes: give at least one mode");
  for (int t : r.tp_sizes) {
    if (t < 1) throw InputError(fmt::format("--tp-sizes: sizes must be positive ({} given)", t));
  }
}

// The cluster once more per tensor-parallel size t > 1 the model splits and a node's devices
// divide, with the shard's profile and sequence parallelism.
void add_tensor_parallel_targets(const CapacityTarget& whole, const CapacityRequest& r,
                                 std::vector<CapacityTarget>& targets) {
  for (int t : r.tp_sizes) {
    // A group needs t GPUs of a node, not stream sets of one (Plan::validate).
    if (t < 2 || whole.cluster.devices_per_node % t != 0 || whole.cluster.device.core_sharing >= 2)
      continue;
    ResolveOptions o = r.precision;
    o.tensor_parallel = {t, true, false};
    CapacityTarget shard = whole;
    try {
      shard.profile = resolve_profile(r.model, r.profile_path, whole.cluster.device, o);
    } catch (const InputError&) {
      continue;  // the model has no split, or not t ways (tensor_parallel_refusal)
    }
    shard.tensor_parallel = o.tensor_parallel;
    targets.push_back(std::move(shard));
  }
}

std::vector<CapacityTarget> load_targets(const CapacityRequest& r) {
  const std::vector<std::string>& names = r.clusters.empty() ? r.prices.order : r.clusters;
  if (names.empty()) throw InputError("capacity: no cluster to plan (the prices file lists none)");
  std::vector<CapacityTarget> targets;
  for (const auto& name : names) {
    CapacityTarget t;
    t.cluster = load_cluster(name, *r.catalog);
    auto price = r.prices.per_gpu_hour.find(name);
    if (price == r.prices.per_gpu_hour.end()) price = r.prices.per_gpu_hour.find(t.cluster.name);
    if (price == r.prices.per_gpu_hour.end()) {
      throw InputError(
          fmt::format("--clusters: cluster \"{}\" has no price (add it to the prices file)", name));
    }
    t.price = price->second;
    t.profile = resolve_profile(r.model, r.profile_path, t.cluster.device, r.precision);
    targets.push_back(t);
    add_tensor_parallel_targets(t, r, targets);
  }
  return targets;
}

}  // namespace

CapacityReport plan_capacity(const CapacityRequest& r) {
  check_request(r);
  keep_freed_memory();
  const std::vector<CapacityTarget> targets = load_targets(r);
  const std::vector<ClusterSearch> results = search_capacity(targets, r);
  CapacityReport report;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].tensor_parallel.size > 1) continue;  // merged into its cluster's below
    const CapacityTarget& t = targets[i];
    ClusterCapacity c;
    c.cluster = t.cluster.name;
    c.device = t.cluster.device.name;
    std::vector<int> all(static_cast<size_t>(t.cluster.num_devices()));
    std::iota(all.begin(), all.end(), 0);
    c.devices = physical_units(t.cluster, all);  // GPUs, not their stream sets
    c.price_per_gpu_hour = t.price;
    c.capacity_bytes = t.cluster.device.memory_bytes;
    ClusterSearch best = results[i];
    for (size_t j = i + 1; j < targets.size() && targets[j].tensor_parallel.size > 1; ++j) {
      merge_search(best, results[j]);
    }
    choose(c, t, r, best);
    report.clusters.push_back(std::move(c));
  }
  for (size_t i = 0; i < report.clusters.size(); ++i) {
    if (report.clusters[i].fastest.found) report.by_time.push_back(i);
    if (report.clusters[i].cheapest.found) report.by_cost.push_back(i);
  }
  const auto& cs = report.clusters;
  std::stable_sort(report.by_time.begin(), report.by_time.end(), [&](size_t a, size_t b) {
    return cs[a].fastest.total_time_s < cs[b].fastest.total_time_s;
  });
  std::stable_sort(report.by_cost.begin(), report.by_cost.end(),
                   [&](size_t a, size_t b) { return cs[a].cheapest.cost < cs[b].cheapest.cost; });
  return report;
}

}  // namespace pipetwin::sim
