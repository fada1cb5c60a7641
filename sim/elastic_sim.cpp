#include "sim/elastic_sim.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/cost_model.hpp"
#include "core/elastic/autodp.hpp"
#include "core/elastic/autopipe.hpp"
#include "core/elastic/elastic_sampler.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::sim {

using namespace pipetwin::elastic;

void ElasticConfig::validate() const {
  auto bad = [](const std::string& what) { throw InputError("elastic simulation: " + what); };
  if (profile.num_layers() == 0) bad("the profile has no layers");
  if (!(compute_scale > 0))
    bad(fmt::format("compute scale must be positive ({} given)", compute_scale));
  if (batch < 1) bad(fmt::format("batch must be positive ({} given)", batch));
  if (epochs < 1) bad(fmt::format("epochs must be positive ({} given)", epochs));
  if (samples < cluster.nodes) {
    bad(fmt::format("samples per epoch must be at least the nodes ({} < {})", samples,
                    cluster.nodes));
  }
  if (stages < 0) bad(fmt::format("stages must be positive ({} given)", stages));
  dp_layout(cluster.nodes, cluster.devices_per_node,
            stages == 0 ? cluster.devices_per_node : stages);
  if (lambda_frozen < 0 || lambda_frozen > 1) {
    bad(fmt::format("lambda_frozen must be in [0, 1] ({} given)", lambda_frozen));
  }
  const int L = TransformerLayers::from_profile(profile).layers();
  if (trace) {
    trace->validate("freeze trace");
    if (trace->layers != L) {
      bad(fmt::format("the freeze trace counts {} layers, the model has {}", trace->layers, L));
    }
  } else if (freeze) {
    FreezeConfig{L, alpha, unit, interval}.validate("elastic simulation");
  }
  if (autodp && !autopipe) bad("AutoDP needs AutoPipe (replicas come from shorter pipelines)");
  if (autocache && !freeze) bad("AutoCache needs freezing (it caches the frozen layers' output)");
  if (cache_costs.host_bandwidth < 0 || cache_costs.disk_bandwidth < 0) {
    bad("cache bandwidths must not be negative");
  }
}

namespace {

// A pipeline configuration the simulator times.
struct State {
  int frozen = 0;          // transformer layers
  int frozen_profile = 0;  // profile layers
  int K = 1;
  int dp = 1;
  int chunks = 1;
  bool cache = false;
  std::vector<std::vector<int>> stages;
};

// Iteration times per state, from the pipeline simulator, memoised.
class IterationTimer {
 public:
  explicit IterationTimer(const ElasticConfig& c) : c_(c) {}

  // With `extra_s` per sample on stage 0 in place of the frozen forward pass when s.cache.
  double time(const State& s, double extra_s) {
    std::vector<int> balance;
    for (const auto& st : s.stages) balance.push_back(static_cast<int>(st.size()));
    const auto key = std::make_tuple(s.frozen_profile, s.K, s.dp, s.chunks, s.cache,
                                     std::llround(extra_s * 1e12), balance);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const PlanContext ctx(make_plan(s, extra_s), 0);
    const double t = simulate_plan(ctx).metrics.iteration_time_s;
    memo_.emplace(key, t);
    return t;
  }

  int best_chunks(State s, double extra_s) {
    return choose_chunks(s.K, c_.batch, [&](int m) {
      s.chunks = m;
      return time(s, extra_s);
    });
  }

 private:
  Plan make_plan(const State& s, double extra_s) const {
    Plan p;
    p.model = c_.model.empty() ? c_.profile.model : c_.model;
    p.profile = s.cache ? cached_profile(s.frozen_profile, extra_s) : c_.profile;
    p.cluster = c_.cluster;
    p.schedule = c_.schedule;
    p.partitioner = "autopipe";
    p.batch_size = s.dp * c_.batch;
    p.chunks = s.chunks;
    p.dp = s.dp;
    p.checkpoint = c_.checkpoint;
    for (size_t k = 0; k < s.stages.size(); ++k)
      p.stages.push_back({s.stages[k], static_cast<int>(k)});
    // Pipelines stay inside a node (Figure 7): replica j of node n on devices n I + j K + stage.
    const int I = c_.cluster.devices_per_node, per_node = s.dp / c_.cluster.nodes;
    for (int n = 0; n < c_.cluster.nodes; ++n) {
      for (int j = 0; j < per_node; ++j) {
        for (int k = 0; k < s.K; ++k) p.placement.push_back(n * I + j * s.K + k);
      }
    }
    p.compute_scale = c_.compute_scale;
    p.frozen_layers = s.frozen_profile;
    p.lambda_frozen = c_.lambda_frozen;
    p.cache = s.cache;
    return p;
  }

  // The frozen layers' forward pass replaced by `extra_s` per sample on the last frozen layer.
  Profile cached_profile(int frozen, double extra_s) const {
    Profile p = c_.profile;
    for (int l = 0; l < frozen; ++l) {
      for (auto& t : p.layers[static_cast<size_t>(l)].timings) {
        t.forward_s = l + 1 == frozen ? extra_s * t.micro_batch / c_.compute_scale : 0.0;
        t.recompute_s = t.forward_s;
      }
    }
    return p;
  }

  const ElasticConfig& c_;
  std::map<std::tuple<int, int, int, int, bool, long long, std::vector<int>>, double> memo_;
};

CostOptions scaled(double compute_scale) {
  CostOptions o;
  o.compute_scale = compute_scale;
  return o;
}

}  // namespace

namespace {

// One training run replayed step by step through the freeze points.
class Replay {
 public:
  Replay(const ElasticConfig& c, std::string name)
      : c_(c),
        timer_(c),
        cost_(c.profile, c.cluster, scaled(c.compute_scale)),
        autopipe_(c.profile, c.stages > 0 ? c.stages : c.cluster.devices_per_node, c.lambda_frozen),
        sampler_(c.samples, c.cluster.nodes, c.seed) {
    out_.name = std::move(name);
    out_.log.model = c.model.empty() ? c.profile.model : c.model;
    out_.trace.model = out_.log.model;
    out_.trace.layers = autopipe_.transformer_layers().layers();
    out_.trace.alpha = c.trace ? c.trace->alpha : c.alpha;
    out_.trace.source = "simulator";
    costs_ = c.cache_costs;
    if (costs_.host_bandwidth <= 0) costs_.host_bandwidth = c.cluster.intra_node.bandwidth;
    if (costs_.disk_bandwidth <= 0) costs_.disk_bandwidth = 2e9;
  }

  ElasticRun run() {
    start();
    for (int e = 0; e < c_.epochs; ++e) run_epoch(e);
    return out_;
  }

 private:
  int nodes() const { return c_.cluster.nodes; }
  int per_node() const { return c_.cluster.devices_per_node; }

  void start() {
    const PipelineLayout& initial = autopipe_.layout();
    s_.K = initial.K;
    s_.stages = initial.stages;
    s_.dp = dp_layout(nodes(), per_node(), s_.K).replicas();
    s_.chunks = timer_.best_chunks(s_, 0);
    iteration_s_ = timer_.time(s_, 0);
    pending_s_ = c_.overheads.start_s(s_.K);
    out_.transitions.push_back({0, 0, 0, 0, s_.K, s_.dp, s_.chunks, false, pending_s_, 0});
  }

  // Frozen layers in effect at the start of epoch e, and after a point inside it.
  int target_at_epoch_start(int e) const {
    if (!c_.freeze) return 0;
    if (c_.trace) return c_.trace->frozen_at(e, 0);
    if (c_.unit == FreezeUnit::kEpoch && e > 0 && e % c_.interval == 0) {
      return bound_frozen_layers(out_.trace.layers, c_.alpha, e / c_.interval);
    }
    return s_.frozen;
  }
  int target_inside(int e) const {
    if (!c_.freeze) return 0;
    if (c_.trace) return c_.trace->frozen_at(e, sampler_.consumed());
    if (c_.unit == FreezeUnit::kStep && step_ > 0 && step_ % c_.interval == 0) {
      return bound_frozen_layers(out_.trace.layers, c_.alpha,
                                 static_cast<int>(step_ / c_.interval));
    }
    return s_.frozen;
  }
  // Steps until the next freeze point inside epoch e (LONG_MAX: none).
  long steps_to_point(int e) const {
    if (!c_.freeze) return LONG_MAX;
    if (!c_.trace)
      return c_.unit == FreezeUnit::kStep ? c_.interval - step_ % c_.interval : LONG_MAX;
    const long done = sampler_.consumed(), per_step = static_cast<long>(s_.dp) * c_.batch;
    for (const auto& ev : c_.trace->events) {
      if (ev.epoch == e && ev.sample > done) return (ev.sample - done + per_step - 1) / per_step;
    }
    return LONG_MAX;
  }

  void run_epoch(int e) {
    sampler_.begin_epoch(e);
    cur_ = EpochRecord{};
    cur_.epoch = e;
    cur_.transition_s = pending_s_;
    pending_s_ = 0;
    freeze_to(target_at_epoch_start(e), e);
    while (!sampler_.epoch_done()) {
      run_steps(steps_to_point(e));
      freeze_to(target_inside(e), e);
    }
    cur_.frozen_layers = s_.frozen;
    cur_.K = s_.K;
    cur_.dp = s_.dp;
    cur_.chunks = s_.chunks;
    cur_.cache = s_.cache;
    cur_.time_s = cur_.compute_s + cur_.transition_s;
    cur_.throughput_samples_per_s = cur_.time_s > 0 ? cur_.samples / cur_.time_s : 0;
    out_.log.epochs.push_back(cur_);
    out_.total_s += cur_.time_s;
    out_.samples += cur_.samples;
  }

  void run_steps(long n) {
    long k = 0;
    for (; k < n && !sampler_.epoch_done(); ++k) {
      if (s_.cache) {
        cur_.compute_s += cached_step();
      } else {
        cur_.samples += sampler_.skip_step(s_.dp / nodes(), c_.batch);
        cur_.compute_s += iteration_s_;
      }
    }
    cur_.steps += k;
    step_ += k;
  }

  // One step with AutoCache: each machine's cache says what its samples need; the slowest
  // machine sets the step (DDP synchronises the replicas).
  double cached_step() {
    const int rpn = s_.dp / nodes();
    const ElasticSampler::Step step = sampler_.next_step(rpn, c_.batch);
    cur_.samples += step.samples;
    double worst = 0;
    for (int n = 0; n < nodes(); ++n) {
      std::vector<long> ids;
      for (int j = 0; j < rpn; ++j) {
        const auto& r = step.ids[static_cast<size_t>(n * rpn + j)];
        ids.insert(ids.end(), r.begin(), r.end());
      }
      if (ids.empty()) continue;
      const BatchWork w = caches_[static_cast<size_t>(n)].use_batch(ids);
      double extra =
          (w.memory_read_bytes + w.disk_read_bytes + w.memory_write_bytes + w.disk_write_bytes) /
          costs_.host_bandwidth;
      long kinds = w.hits > 0 ? 1 : 0;
      for (size_t from = 0; from < w.runs_from.size(); ++from) {
        extra += w.runs_from[from] * (forward_prefix_.back() - forward_prefix_[from]);
        kinds += w.runs_from[from] > 0 ? 1 : 0;
      }
      extra /= static_cast<double>(w.samples);
      const double disk_s = (w.disk_read_bytes + w.disk_write_bytes) / costs_.disk_bandwidth;
      worst = std::max({worst, kinds <= 1 ? timer_.time(s_, extra) : mixed_step_s(extra), disk_s});
    }
    return worst;
  }

  // A step whose samples need different work (some hit, some run frozen layers): interpolated
  // between the two nearest points of a grid of 1/100 of the full frozen forward pass, as the
  // exact mix varies from step to step and each distinct value would cost a simulation.
  double mixed_step_s(double extra) {
    const double q = 1e-2 * (forward_prefix_.back() + hit_extra_);
    const double k = std::floor(extra / q);
    const double lo = timer_.time(s_, k * q), hi = timer_.time(s_, (k + 1) * q);
    return lo + (hi - lo) * (extra / q - k);
  }

  void freeze_to(int frozen, int e) {
    if (frozen <= s_.frozen) return;
    State n = s_;
    n.frozen = frozen;
    n.frozen_profile = autopipe_.transformer_layers().frozen_profile_layers(frozen);
    double overhead = 0, transfer = 0;
    if (c_.autopipe) {
      const PipelineLayout& layout = autopipe_.on_freeze(frozen);
      n.K = layout.K;
      n.stages = layout.stages;
      if (c_.autodp) n.dp = dp_layout(nodes(), per_node(), n.K).replicas();
      const bool spawn = n.dp > s_.dp;
      overhead =
          n.K < s_.K ? c_.overheads.compression_s(n.K, spawn) : c_.overheads.repartition_s(n.K);
      if (spawn && c_.state_transfer) {
        transfer = state_transfer_s(cost_, state_transfer(c_.profile, n.frozen_profile),
                                    dp_layout(nodes(), per_node(), s_.K),
                                    dp_layout(nodes(), per_node(), n.K));
      }
    }
    configure(n);
    s_ = n;
    cur_.transition_s += overhead + transfer;
    out_.transitions.push_back({e, sampler_.consumed(), step_, s_.frozen, s_.K, s_.dp, s_.chunks,
                                s_.cache, overhead, transfer});
    out_.trace.events.push_back({e, sampler_.consumed(), step_, s_.frozen});
  }

  // Chunks and AutoCache for a new state.
  void configure(State& n) {
    n.cache = false;
    if (c_.autopipe) n.chunks = timer_.best_chunks(n, 0);
    if (c_.autocache && n.frozen_profile > 0) decide_cache(n);
    iteration_s_ = timer_.time(n, n.cache ? hit_extra_ : 0);
  }

  // Bytes per sample crossing the frozen boundary (the activation AutoCache keeps).
  double boundary_bytes(int frozen) const {
    double bytes = 0;
    for (const auto& e : c_.profile.effective_edges()) {
      if (e.from < frozen && e.to >= frozen) bytes += e.bytes_per_sample;
    }
    return bytes;
  }

  // Frozen forward time per sample of layers [0, l), l = 0..frozen, at micro-batch size mb.
  std::vector<double> forward_prefix(int frozen, double mb) const {
    std::vector<double> prefix(1, 0.0);
    for (int l = 0; l < frozen; ++l) prefix.push_back(prefix.back() + cost_.forward_s(l, mb) / mb);
    return prefix;
  }

  void decide_cache(State& n) {
    const double bytes = boundary_bytes(n.frozen_profile);
    const double forward =
        forward_prefix(n.frozen_profile, static_cast<double>(c_.batch) / n.chunks).back();
    const double node_samples = std::ceil(static_cast<double>(c_.samples) / nodes());
    const double budget = c_.cache.memory_budget_bytes;
    const double spilled = bytes > 0 && std::isfinite(budget)
                               ? std::max(0.0, 1.0 - budget / (node_samples * bytes))
                               : 0.0;
    if (!cache_pays_off(forward, cache_read_s(bytes, spilled, costs_))) return;
    n.cache = true;
    hit_extra_ = bytes / costs_.host_bandwidth;
    if (c_.autopipe) n.chunks = timer_.best_chunks(n, hit_extra_);
    forward_prefix_ = forward_prefix(n.frozen_profile, static_cast<double>(c_.batch) / n.chunks);
    if (caches_.empty())
      caches_.assign(static_cast<size_t>(nodes()), ActivationCache(c_.samples, c_.cache));
    for (auto& cache : caches_) cache.set_boundary(n.frozen_profile, bytes);
  }

  const ElasticConfig& c_;
  IterationTimer timer_;
  CostModel cost_;
  AutoPipe autopipe_;
  ElasticSampler sampler_;
  CacheCosts costs_;
  std::vector<ActivationCache> caches_;  // one per machine
  std::vector<double> forward_prefix_;
  double hit_extra_ = 0;
  State s_;
  double iteration_s_ = 0;
  double pending_s_ = 0;  // start-up overhead, charged to epoch 0
  long step_ = 0;
  EpochRecord cur_;
  ElasticRun out_;
};

const char* run_name(const ElasticConfig& c) {
  if (!c.freeze) return "no freeze";
  if (!c.autopipe) return "freeze only";
  if (!c.autodp) return "freeze + AutoPipe";
  if (!c.autocache) return "freeze + AutoPipe + AutoDP";
  return "freeze + AutoPipe + AutoDP + AutoCache";
}

ElasticConfig with(const ElasticConfig& c, bool freeze, bool autopipe, bool autodp,
                   bool autocache) {
  ElasticConfig v = c;
  v.freeze = freeze;
  v.autopipe = autopipe;
  v.autodp = autodp;
  v.autocache = autocache;
  return v;
}

}  // namespace

namespace {

Json run_to_json(const ElasticRun& run, double baseline_s) {
  Json j;
  j["name"] = run.name;
  j["total_s"] = run.total_s;
  j["samples"] = run.samples;
  j["throughput_samples_per_s"] = run.throughput();
  j["speedup"] = run.total_s > 0 ? baseline_s / run.total_s : 0;
  Json transitions = Json::array();
  for (const auto& t : run.transitions) {
    transitions.push_back({{"epoch", t.epoch},
                           {"sample", t.sample},
                           {"step", t.step},
                           {"frozen_layers", t.frozen_layers},
                           {"K", t.K},
                           {"dp", t.dp},
                           {"chunks", t.chunks},
                           {"cache", t.cache},
                           {"overhead_s", t.overhead_s},
                           {"state_transfer_s", t.state_transfer_s}});
  }
  j["transitions"] = transitions;
  return j;
}

}  // namespace

Json elastic_report_to_json(const ElasticReport& r) {
  Json doc;
  doc["format"] = "pipetwin.elastic_report";
  doc["version"] = 1;
  doc["model"] = r.elastic.log.model;
  doc["speedup"] = r.speedup;
  doc["elastic"] = run_to_json(r.elastic, r.baseline.total_s);
  doc["baseline"] = run_to_json(r.baseline, r.baseline.total_s);
  Json breakdown = Json::array();
  for (const auto& run : r.breakdown) breakdown.push_back(run_to_json(run, r.baseline.total_s));
  doc["breakdown"] = breakdown;
  return doc;
}

ElasticRun simulate_elastic_run(const ElasticConfig& config) {
  config.validate();
  return Replay(config, run_name(config)).run();
}

ElasticReport simulate_elastic(const ElasticConfig& config, bool breakdown) {
  config.validate();
  ElasticReport r;
  r.baseline = simulate_elastic_run(with(config, false, false, false, false));
  const bool all = config.freeze && config.autopipe && config.autodp && config.autocache;
  if (breakdown) {
    r.breakdown.push_back(simulate_elastic_run(with(config, true, false, false, false)));
    r.breakdown.push_back(simulate_elastic_run(with(config, true, true, false, false)));
    r.breakdown.push_back(simulate_elastic_run(with(config, true, true, true, false)));
    r.breakdown.push_back(all ? Replay(config, run_name(config)).run()
                              : simulate_elastic_run(with(config, true, true, true, true)));
  }
  r.elastic = breakdown && all ? r.breakdown.back() : simulate_elastic_run(config);
  r.speedup = r.elastic.total_s > 0 ? r.baseline.total_s / r.elastic.total_s : 0;
  return r;
}

}  // namespace pipetwin::sim
