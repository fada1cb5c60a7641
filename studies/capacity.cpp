#include "studies/capacity.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/memory_pools.hpp"
#include "profiles/model_source.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "sim/planner.hpp"
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

std::string default_prices_path(const Catalog& catalog) {
  return (std::filesystem::path(catalog.dir()) / "prices.json").string();
}

namespace {

struct Target {
  Cluster cluster;
  Profile profile;
  double price = 0;
};

struct Group {
  size_t target = 0;
  int stages = 1, dp = 1;
  std::string schedule;
  int virtual_stages = 1;  // model chunks per device
};

struct GroupResult {
  int candidates = 0;
  bool found = false;  // some M fits
  Evaluation best;     // the fastest that fits
  bool missed = false;
  Evaluation closest;  // the smallest overshoot among those that do not fit
  std::string first_error;
};

std::vector<int> powers_of_two(int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; v *= 2) out.push_back(v);
  return out;
}

void try_candidate(const PlanRequest& pr, GroupResult& g) {
  const Evaluation e = evaluate_request(pr, 0, false);
  ++g.candidates;
  if (!e.ok()) {
    if (g.first_error.empty()) g.first_error = e.error;
  } else if (e.fits) {
    if (!g.found || e.iteration_time_s < g.best.iteration_time_s - 1e-15) g.best = e;
    g.found = true;
  } else if (!g.missed || e.over_bytes < g.closest.over_bytes) {
    g.closest = e;
    g.missed = true;
  }
}

GroupResult run_group(const Group& grp, const Target& t, const CapacityRequest& r) {
  GroupResult g;
  PlanRequest pr;
  pr.model = r.model.empty() ? t.profile.model : r.model;
  pr.profile = t.profile;
  pr.cluster = t.cluster;
  pr.catalog = r.catalog;
  pr.stages = grp.stages;
  pr.schedule = grp.schedule;
  pr.virtual_stages = grp.virtual_stages;
  pr.batch_size = r.batch;
  pr.partitioner = r.partitioner;
  pr.dp = grp.dp;
  const int per_replica = r.batch / grp.dp;
  for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast}) {
    pr.checkpoint = ck;
    for (int m = 1; m <= std::min(per_replica, 6 * grp.stages); ++m) {
      if (per_replica % m != 0 || !request_refusal(pr, m).empty()) continue;
      pr.chunks = m;
      try_candidate(pr, g);
    }
    if (g.found) break;  // checkpointing is only a way to fit
  }
  return g;
}

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

void choose(ClusterCapacity& out, const std::vector<const GroupResult*>& groups,
            const CapacityRequest& r) {
  const GroupResult* closest = nullptr;
  for (const GroupResult* g : groups) {
    out.candidates += g->candidates;
    if (g->missed && (!closest || g->closest.over_bytes < closest->closest.over_bytes)) closest = g;
    if (!g->found) continue;
    const CapacityChoice c = make_choice(g->best, r, out.price_per_gpu_hour);
    out.fits = true;
    const bool affordable = r.budget <= 0 || c.cost <= r.budget;
    if (affordable && (!out.fastest.found || c.total_time_s < out.fastest.total_time_s ||
                       (c.total_time_s == out.fastest.total_time_s && c.gpus < out.fastest.gpus))) {
      out.fastest = c;
    }
    if (!out.cheapest.found || c.cost < out.cheapest.cost ||
        (c.cost == out.cheapest.cost && c.total_time_s < out.cheapest.total_time_s)) {
      out.cheapest = c;
    }
  }
  if (out.fits && !out.fastest.found) {
    out.note = fmt::format("no plan within the budget {:.2f} (the cheapest costs {:.2f})", r.budget,
                           out.cheapest.cost);
  }
  if (!out.fits && closest) {
    const Evaluation& e = closest->closest;
    out.oom_device = e.oom_device;
    out.need_bytes = e.capacity_bytes + e.over_bytes;
    out.capacity_bytes = e.capacity_bytes;
    out.over_bytes = e.over_bytes;
    out.note = fmt::format(
        "does not fit: at best {} needs {:.2f} GiB, it has {:.2f} GiB (over by {:.2f} GiB)",
        e.oom_device, out.need_bytes / kGiB, e.capacity_bytes / kGiB, e.over_bytes / kGiB);
  } else if (!out.fits) {
    std::string why;
    for (const GroupResult* g : groups) {
      if (why.empty()) why = g->first_error;
    }
    out.note = "no feasible plan" + (why.empty() ? std::string() : ": " + why);
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
  make_partitioner(r.partitioner);
}

std::vector<Target> load_targets(const CapacityRequest& r) {
  const std::vector<std::string>& names = r.clusters.empty() ? r.prices.order : r.clusters;
  if (names.empty()) throw InputError("capacity: no cluster to plan (the prices file lists none)");
  std::vector<Target> targets;
  for (const auto& name : names) {
    Target t;
    t.cluster = load_cluster(name, *r.catalog);
    auto price = r.prices.per_gpu_hour.find(name);
    if (price == r.prices.per_gpu_hour.end()) price = r.prices.per_gpu_hour.find(t.cluster.name);
    if (price == r.prices.per_gpu_hour.end()) {
      throw InputError(
          fmt::format("--clusters: cluster \"{}\" has no price (add it to the prices file)", name));
    }
    t.price = price->second;
    t.profile = resolve_profile(r.model, r.profile_path, t.cluster.device, r.precision);
    targets.push_back(std::move(t));
  }
  return targets;
}

// Without a pipeline (K = 1) virtual stages and a split backward only fill bubbles there are
// none of: the schedules that have them are tried there only when no other schedule is.
bool skip_without_pipeline(const std::string& schedule, const std::vector<std::string>& all) {
  auto fancy = [](const std::string& s) {
    return schedule_info(s).splits_backward || stage_layout_of(s) != StageLayout::kOnePerDevice;
  };
  return fancy(schedule) && !std::all_of(all.begin(), all.end(), fancy);
}

std::vector<Group> make_groups(const std::vector<Target>& targets, const CapacityRequest& r) {
  std::vector<Group> groups;
  for (size_t i = 0; i < targets.size(); ++i) {
    const int devices = targets[i].cluster.num_devices();
    for (int k : powers_of_two(std::min(devices, targets[i].profile.num_layers()))) {
      for (int dp : powers_of_two(devices / k)) {
        if (r.batch % dp != 0) continue;
        for (const auto& s : r.schedules) {
          if (k == 1 && skip_without_pipeline(s, r.schedules)) continue;
          const int v =
              stage_layout_of(s) == StageLayout::kInterleaved ? 2 : default_virtual_stages(s);
          if (v * k > targets[i].profile.num_layers()) continue;
          groups.push_back({i, k, dp, s, v});
        }
      }
    }
  }
  return groups;
}

std::vector<GroupResult> run_groups(const std::vector<Group>& groups,
                                    const std::vector<Target>& targets, const CapacityRequest& r) {
  std::vector<GroupResult> results(groups.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    try {
      for (size_t i = next++; i < groups.size(); i = next++) {
        results[i] = run_group(groups[i], targets[groups[i].target], r);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      next = groups.size();
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t jobs = std::min<size_t>(r.jobs > 0 ? static_cast<size_t>(r.jobs) : hw,
                                       std::max<size_t>(groups.size(), 1));
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace

CapacityReport plan_capacity(const CapacityRequest& r) {
  check_request(r);
  keep_freed_memory();
  const std::vector<Target> targets = load_targets(r);
  const std::vector<Group> groups = make_groups(targets, r);
  const std::vector<GroupResult> results = run_groups(groups, targets, r);
  CapacityReport report;
  for (size_t i = 0; i < targets.size(); ++i) {
    ClusterCapacity c;
    c.cluster = targets[i].cluster.name;
    c.device = targets[i].cluster.device.name;
    std::vector<int> all(static_cast<size_t>(targets[i].cluster.num_devices()));
    std::iota(all.begin(), all.end(), 0);
    c.devices = physical_units(targets[i].cluster, all);  // GPUs, not their stream sets
    c.price_per_gpu_hour = targets[i].price;
    c.capacity_bytes = targets[i].cluster.device.memory_bytes;
    std::vector<const GroupResult*> mine;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].target == i) mine.push_back(&results[g]);
    }
    choose(c, mine, r);
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
