#include "studies/sweep/sweep.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "sim/elastic_sim.hpp"
#include "sim/planner.hpp"

namespace pipetwin::sim {

namespace fs = std::filesystem;

std::vector<std::string> Sweep::result_columns() const {
  std::vector<std::string> c = {"plan_M",
                                "plan_micro_batch",
                                "plan_batch",
                                "plan_devices",
                                "iteration_time_s",
                                "throughput_samples_per_s",
                                "bubble_fraction",
                                "peak_memory_max_bytes",
                                "memory_capacity_bytes",
                                "fits",
                                "oom_device",
                                "over_bytes"};
  if (elastic_) {
    for (const char* e : {"elastic_total_s", "elastic_samples_per_s", "baseline_total_s", "speedup",
                          "final_frozen", "final_K", "final_dp"}) {
      c.emplace_back(e);
    }
  }
  c.emplace_back("error");
  return c;
}

Sweep::Sweep(Grid grid, SweepInputs inputs) : grid_(std::move(grid)), inputs_(std::move(inputs)) {
  catalog_ =
      Catalog::load(inputs_.catalog_dir.empty() ? Catalog::default_dir() : inputs_.catalog_dir);
  for (const auto& a : grid_.axes()) order_.push_back(a.knob);
  for (const auto& k : knobs()) {
    if (grid_.axis(k.name) == nullptr && (k.listed == nullptr || k.listed(inputs_.base))) {
      order_.push_back(&k);
    }
  }
  check_batch_fields();
  elastic_ = grid_.axis("alpha") != nullptr || inputs_.base.alpha >= 0;
  if (elastic_ && inputs_.samples < 1) {
    throw InputError(
        "--grid: alpha needs --samples (samples per epoch): each point is a whole "
        "elastic training run");
  }
  if (elastic_ && inputs_.epochs < 1) {
    throw InputError(fmt::format("--epochs must be positive ({} given)", inputs_.epochs));
  }
  resolve_clusters();
  resolve_models();
}

void Sweep::check_batch_fields() const {
  const Axis* micro = grid_.axis("micro_batch");
  if (micro == nullptr && inputs_.base.micro_batch <= 0) return;
  if (grid_.axis("batch") != nullptr) {
    throw InputError(
        "--grid: batch and micro_batch are both given; batch = micro_batch x chunks x dp");
  }
  const Axis* chunks = grid_.axis("chunks");
  const bool automatic = chunks
                             ? std::count(chunks->values.begin(), chunks->values.end(), "auto") > 0
                             : inputs_.base.chunks <= 0;
  if (automatic) {
    throw InputError(
        "--grid: micro_batch needs a fixed chunk count (chunks=auto given); "
        "batch = micro_batch x chunks x dp");
  }
}

void Sweep::resolve_clusters() {
  const Axis* axis = grid_.axis("cluster");
  if (axis == nullptr) {
    clusters_[inputs_.base.cluster] = load_cluster(inputs_.base.cluster, catalog_);
    return;
  }
  for (const auto& name : axis->values) {
    const fs::path named = fs::path(catalog_.dir()) / "clusters" / (name + ".json");
    if (!fs::exists(name) && !fs::exists(named)) {
      throw InputError(fmt::format("--grid: cluster: unknown cluster \"{}\" (known: {})", name,
                                   fmt::join(catalog_.cluster_names(), ", ")));
    }
    clusters_[name] = load_cluster(name, catalog_);
  }
}

void Sweep::resolve_models() {
  const Axis* axis = grid_.axis("model");
  if (axis != nullptr && !inputs_.profile_path.empty()) {
    throw InputError("--grid: model: cannot sweep models with --profile (one profile, one model)");
  }
  const auto values = [this](const char* name, const std::string& fixed) {
    const Axis* a = grid_.axis(name);
    return a ? a->values : std::vector<std::string>{fixed};
  };
  std::vector<std::string> models = values("model", inputs_.base.model);
  std::set<std::string> devices;
  for (const auto& [name, c] : clusters_) devices.insert(c.device.name);
  for (const auto& model : models) {
    for (const auto& device : devices) {
      for (const auto& dtype : values("dtype", inputs_.base.dtype)) {
        for (const auto& optimizer : values("optimizer", inputs_.base.optimizer)) {
          resolve_one(model, device, {dtype, optimizer, ""}, axis != nullptr);
          for (const TensorParallel& tp : tensor_parallel_values()) {
            resolve_shard(model, device, {dtype, optimizer, "", tp}, axis != nullptr);
          }
        }
      }
    }
  }
}

void Sweep::resolve_one(const std::string& model, const std::string& device,
                        const ResolveOptions& precision, bool model_axis) {
  try {
    Profile p = resolve_profile(model, inputs_.profile_path, device, precision);
    if (inputs_.base.model.empty() && !model_axis) inputs_.base.model = p.model;
    const std::string& key = model_axis ? model : inputs_.base.model;
    profiles_[{key, device, precision.dtype, precision.optimizer, describe(TensorParallel{})}] =
        std::move(p);
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (!model_axis || what.rfind("--model: ", 0) != 0) throw;
    throw InputError("--grid: model: " + what.substr(9));
  }
}

// Every tensor-parallel setting the grid can name but the whole model's.
std::vector<TensorParallel> Sweep::tensor_parallel_values() const {
  std::vector<PointConfig> configs = {inputs_.base};
  for (const char* name : {"tp", "sequence_parallel", "selective_recompute"}) {
    const Axis* a = grid_.axis(name);
    if (a == nullptr) continue;
    std::vector<PointConfig> next;
    for (const auto& c : configs) {
      for (size_t i = 0; i < a->values.size(); ++i) {
        PointConfig v = c;
        a->knob->apply(v, a->values[i], a->numbers[i]);
        next.push_back(v);
      }
    }
    configs = std::move(next);
  }
  std::vector<TensorParallel> out;
  for (const auto& c : configs) {
    const TensorParallel tp{c.tp, c.sequence_parallel, c.selective_recompute};
    if (tp != TensorParallel{} && std::find(out.begin(), out.end(), tp) == out.end())
      out.push_back(tp);
  }
  return out;
}

// A shard's profile, or why the point cannot have one (a row's error, not the sweep's).
void Sweep::resolve_shard(const std::string& model, const std::string& device,
                          const ResolveOptions& o, bool model_axis) {
  const std::string& key = model_axis ? model : inputs_.base.model;
  const std::array<std::string, 5> k = {key, device, o.dtype, o.optimizer, describe(o.tensor_parallel)};
  try {
    profiles_[k] = resolve_profile(model, inputs_.profile_path, device, o);
  } catch (const InputError& e) {
    shard_errors_[k] = e.what();
  }
}

const Cluster& Sweep::cluster(const std::string& name) const {
  return clusters_.at(name);
}

const Profile& Sweep::profile(const PointConfig& c, const std::string& device) const {
  const TensorParallel tp{c.tp, c.sequence_parallel, c.selective_recompute};
  const std::array<std::string, 5> key = {c.model, device, c.dtype, c.optimizer, describe(tp)};
  if (auto bad = shard_errors_.find(key); bad != shard_errors_.end()) throw InputError(bad->second);
  return profiles_.at(key);
}

PointConfig Sweep::config(int64_t index) const {
  PointConfig c = inputs_.base;
  grid_.apply(index, c);
  return c;
}

CsvRow Sweep::header() const {
  CsvRow h = {"point", "points"};
  for (const Knob* k : order_) h.emplace_back(k->name);
  for (const auto& c : result_columns()) h.push_back(c);
  return h;
}

CsvRow Sweep::inputs_row(int64_t index) const {
  const PointConfig c = config(index);
  CsvRow row = {std::to_string(index), std::to_string(size())};
  for (const Knob* k : order_) row.push_back(k->show(c));
  return row;
}

Cluster Sweep::point_cluster(const PointConfig& c) const {
  Cluster cl = cluster(c.cluster);
  if (c.nics_per_node == 0 && c.p2p.empty()) return cl;
  if (!cl.topology) cl.topology = Topology{};
  if (c.nics_per_node > 0) {
    if (c.nics_per_node > cl.devices_per_node) {
      throw InputError(fmt::format(
          "--grid: nics_per_node: {} NICs per node on {}, which has {} devices per node (at most "
          "one NIC per device)",
          c.nics_per_node, cl.name, cl.devices_per_node));
    }
    cl.topology->nics_per_node = c.nics_per_node;
  }
  if (!c.p2p.empty()) cl.topology->p2p = c.p2p == "yes";
  return cl;
}

Evaluation Sweep::evaluate(const PointConfig& c) const {
  const int64_t batch = c.micro_batch > 0 ? int64_t{c.micro_batch} * c.chunks * c.dp : c.batch;
  if (batch > 1'000'000'000) {
    return Evaluation::failure(
        fmt::format("batch micro_batch x chunks x dp = {} is too large", batch));
  }
  PlanRequest r;
  try {
    r.cluster = point_cluster(c);
  } catch (const InputError& error) {
    return Evaluation::failure(error.what());
  }
  r.model = c.model;
  try {
    r.profile = profile(c, r.cluster.device.name);
  } catch (const InputError& error) {
    return Evaluation::failure(error.what());
  }
  r.tensor_parallel = r.profile.tensor_parallel;
  r.distributed_optimizer = c.distributed_optimizer;
  r.catalog = &catalog_;
  r.stages = c.stages;
  r.schedule = c.schedule;
  r.virtual_stages = c.virtual_stages;
  r.batch_size = static_cast<int>(batch);
  r.chunks = c.chunks;
  r.partitioner = c.partitioner;
  r.dp = c.dp;
  r.checkpoint = c.checkpoint;
  r.frozen_layers = c.frozen;
  r.iterations = inputs_.iterations;
  r.framework = inputs_.framework;
  return evaluate_request(r, inputs_.iterations, true);
}

namespace {

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

}  // namespace

std::string Sweep::run_elastic(const PointConfig& c, CsvRow& columns) const {
  ElasticConfig ec;
  ec.cluster = point_cluster(c);  // evaluate() checked it
  ec.model = c.model;
  ec.profile = profile(c, ec.cluster.device.name);
  ec.compute_scale = resolve_compute_scale(ec.profile, ec.cluster, &catalog_);
  ec.stages = c.stages;
  ec.batch = c.resolved_batch() / c.dp;  // per pipeline; the plain plan checked divisibility
  ec.epochs = inputs_.epochs;
  ec.samples = inputs_.samples;
  ec.schedule = c.schedule;
  ec.checkpoint = c.checkpoint;
  ec.alpha = c.alpha;
  if (c.alpha == 0) ec.freeze = ec.autopipe = ec.autodp = ec.autocache = false;
  try {
    const ElasticReport r = simulate_elastic(ec, false);
    const auto& last = r.elastic.log.epochs.back();
    columns = {fmt::format("{}", r.elastic.total_s),
               fmt::format("{}", r.elastic.throughput()),
               fmt::format("{}", r.baseline.total_s),
               fmt::format("{}", r.speedup),
               std::to_string(last.frozen_layers),
               std::to_string(last.K),
               std::to_string(last.dp)};
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

CsvRow Sweep::row(int64_t index) const {
  CsvRow row = inputs_row(index);
  const PointConfig c = config(index);
  Evaluation e = evaluate(c);
  CsvRow elastic;
  if (e.ok() && elastic_) e.error = run_elastic(c, elastic);
  if (!e.ok()) {
    row.resize(row.size() + result_columns().size() - 1);
    row.push_back(one_line(e.error));
    return row;
  }
  const Plan& p = e.plan;
  row.push_back(std::to_string(p.chunks));
  row.push_back(std::to_string(p.micro_batch_size()));
  row.push_back(std::to_string(p.batch_size));
  row.push_back(std::to_string(p.dp * p.devices_per_replica() * p.tp()));
  row.push_back(fmt::format("{}", e.iteration_time_s));
  row.push_back(fmt::format("{}", e.throughput_samples_per_s));
  row.push_back(fmt::format("{}", e.bubble_fraction));
  row.push_back(fmt::format("{:.0f}", e.peak_memory_max_bytes));
  row.push_back(fmt::format("{:.0f}", e.capacity_bytes));
  row.push_back(e.fits ? "yes" : "no");
  row.push_back(e.oom_device);
  row.push_back(fmt::format("{:.0f}", e.over_bytes));
  row.insert(row.end(), elastic.begin(), elastic.end());
  row.emplace_back();
  return row;
}

}  // namespace pipetwin::sim
