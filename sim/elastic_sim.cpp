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
#include "core/elastic/decision.hpp"
#include "core/elastic/elastic_sampler.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"

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

// A pipeline configuration the simulator times: the shared state (core/elastic/decision.hpp)
// and the transformer layers it freezes.
struct State : PipelineState {
  int frozen = 0;  // transformer layers
};

// The plan fields a state does not decide (core/elastic/decision.hpp fills in the rest).
Plan base_plan(const ElasticConfig& c) {
  return sim::base_plan(PlanRequest{.model = c.model,
                                    .profile = c.profile,
                                    .cluster = c.cluster,
                                    .compute_scale = c.compute_scale,
                                    .schedule = c.schedule,
                                    .checkpoint = c.checkpoint});
}

// One Pipe iteration of a state: its length and the first replica's all-reduce time.
struct PipeTime {
  double iteration_s = 0;
  double comm_s = 0;
};

// Length of the union of intervals (the communication "with time gaps between buckets removed").
double union_length(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, lo = 0, hi = -1;
  for (const auto& [a, b] : v) {
    if (a > hi) {
      total += std::max(0.0, hi - lo);
      lo = a;
      hi = b;
    } else {
      hi = std::max(hi, b);
    }
  }
  return total + std::max(0.0, hi - lo);
}

// Pipe iterations per state, from the pipeline simulator, memoised.
class IterationTimer {
 public:
  explicit IterationTimer(const ElasticConfig& c) : c_(c) {}

  PipeTime time(const State& s) {
    std::vector<int> balance;
    for (const auto& st : s.stages) balance.push_back(static_cast<int>(st.size()));
    const auto key = std::make_tuple(s.frozen_profile, s.K, s.dp, s.chunks, balance);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const PlanContext ctx(make_plan(s), 0);
    const SimResult r = simulate_plan(ctx);
    const PipeTime t{r.metrics.iteration_time_s, first_replica_comm_s(r.timeline, s.K)};
    memo_.emplace(key, t);
    return t;
  }

  int best_chunks(State s) {
    return choose_chunks(s.K, c_.batch, [&](int m) {
      s.chunks = m;
      return time(s).iteration_s;
    });
  }

 private:
  // The last simulated step's all-reduces on replica 0's devices (schedule devices 0..K-1).
  static double first_replica_comm_s(const Timeline& t, int K) {
    int last = -1;
    for (const auto& e : t.events) last = std::max(last, e.action.step);
    std::vector<std::pair<double, double>> spans;
    for (const auto& e : t.events) {
      if (e.action.op == Op::kAllReduce && e.device < K && e.action.step == last)
        spans.emplace_back(e.start_s, e.end_s);
    }
    return union_length(std::move(spans));
  }

  // F_frozen runs outside the Pipe (see the header): its layers cost the Pipe nothing.
  Plan make_plan(const State& s) const {
    Plan base = base_plan(c_);
    if (c_.autopipe) base.profile = outside_pipe(c_.profile, s.frozen_profile);
    return state_plan(base, s, c_.batch, c_.lambda_frozen);
  }

  const ElasticConfig& c_;
  std::map<std::tuple<int, int, int, int, std::vector<int>>, PipeTime> memo_;
};

CostOptions scaled(double compute_scale) {
  CostOptions o;
  o.compute_scale = compute_scale;
  return o;
}

// F_frozen's forward over `n` samples, profile layers [from, to).
double frozen_forward_s(const CostModel& cost, int from, int to, double n) {
  double t = 0;
  for (int l = from; l < to; ++l) t += cost.forward_s(l, n);
  return t;
}

// Section 3.4, as the live run decides it (core/elastic/decision.hpp).
bool cache_on(const ElasticConfig& c, int frozen_profile) {
  CacheInputs in;
  in.samples = c.samples;
  in.config = c.cache;
  in.costs = c.cache_costs;
  in.batch = c.batch;
  return elastic::cache_on(base_plan(c), frozen_profile, in);
}

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
    costs_ = resolved_costs(c.cache_costs, c.cluster);
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
    s_.chunks = timer_.best_chunks(s_);
    pipe_ = timer_.time(s_);
    pending_s_ = c_.overheads.start_s(s_.K);
    out_.transitions.push_back(
        {0, 0, 0, 0, s_.K, s_.dp, s_.chunks, false, pending_s_, 0, chunk_times(s_)});
  }

  // The Pipe's iteration for every candidate M of a state (memoised by the timer).
  std::vector<std::pair<int, double>> chunk_times(State s) {
    std::vector<std::pair<int, double>> out;
    for (int m : chunk_candidates(s.K, c_.batch)) {
      s.chunks = m;
      out.emplace_back(m, timer_.time(s).iteration_s);
    }
    return out;
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
    complete_epoch_row(cur_);
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
        cur_.compute_s += frozen_batch_s_ + pipe_.iteration_s;
      }
      out_.comm_s += pipe_.comm_s;
    }
    cur_.steps += k;
    step_ += k;
  }

  // One step with AutoCache: each replica's samples say what its F_frozen work is (reads, frozen
  // layers still to run, write-backs); the slowest replica, then the Pipe, set the step.
  double cached_step() {
    const int rpn = s_.dp / nodes();
    const ElasticSampler::Step step = sampler_.next_step(rpn, c_.batch);
    cur_.samples += step.samples;
    double frozen = 0, disk = 0;
    for (int n = 0; n < nodes(); ++n) {
      double disk_bytes = 0;
      for (int j = 0; j < rpn; ++j) {
        const auto& ids = step.ids[static_cast<size_t>(n * rpn + j)];
        if (ids.empty()) continue;
        const BatchWork w = caches_[static_cast<size_t>(n)].use_batch(ids);
        double t =
            (w.memory_read_bytes + w.disk_read_bytes + w.memory_write_bytes + w.disk_write_bytes) /
            costs_.host_bandwidth;
        for (size_t from = 0; from < w.runs_from.size(); ++from) {
          if (w.runs_from[from] > 0)
            t += frozen_forward_s(cost_, static_cast<int>(from), s_.frozen_profile,
                                  static_cast<double>(w.runs_from[from]));
        }
        frozen = std::max(frozen, t);
        disk_bytes += w.disk_read_bytes + w.disk_write_bytes;
      }
      disk = std::max(disk, disk_bytes / costs_.disk_bandwidth);
    }
    return std::max(frozen + pipe_.iteration_s, disk);
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
    out_.transitions.push_back(
        {e, sampler_.consumed(), step_, s_.frozen, s_.K, s_.dp, s_.chunks, s_.cache, overhead,
         transfer, c_.autopipe ? chunk_times(s_) : std::vector<std::pair<int, double>>{}});
    out_.trace.events.push_back({e, sampler_.consumed(), step_, s_.frozen});
  }

  // Chunks, F_frozen's cost and AutoCache for a new state. M only changes the Pipe, so it is
  // chosen with or without the cache alike (the paper profiles M once per K).
  void configure(State& n) {
    n.cache = false;
    if (c_.autopipe) n.chunks = timer_.best_chunks(n);
    pipe_ = timer_.time(n);
    frozen_batch_s_ = c_.autopipe ? frozen_forward_s(cost_, 0, n.frozen_profile, c_.batch) : 0;
    if (c_.autopipe && c_.autocache && n.frozen_profile > 0) decide_cache(n);
  }

  void decide_cache(State& n) {
    if (!cache_on(c_, n.frozen_profile)) return;
    n.cache = true;
    if (caches_.empty())
      caches_.assign(static_cast<size_t>(nodes()), ActivationCache(c_.samples, c_.cache));
    const double bytes = boundary_bytes(c_.profile, n.frozen_profile);
    for (auto& cache : caches_) cache.set_boundary(n.frozen_profile, bytes);
  }

  const ElasticConfig& c_;
  IterationTimer timer_;
  CostModel cost_;
  AutoPipe autopipe_;
  ElasticSampler sampler_;
  CacheCosts costs_;
  std::vector<ActivationCache> caches_;  // one per machine
  State s_;
  PipeTime pipe_;              // the current state's Pipe iteration
  double frozen_batch_s_ = 0;  // F_frozen's forward over a replica's batch, without the cache
  double pending_s_ = 0;       // start-up overhead, charged to epoch 0
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

std::vector<ChunkPoint> profile_chunks(const ElasticConfig& config, int frozen) {
  config.validate();
  const int K0 = config.stages > 0 ? config.stages : config.cluster.devices_per_node;
  AutoPipe autopipe(config.profile, K0, config.lambda_frozen);
  const PipelineLayout layout = frozen > 0 ? autopipe.on_freeze(frozen) : autopipe.layout();
  State s;
  s.frozen = frozen;
  s.frozen_profile = autopipe.transformer_layers().frozen_profile_layers(frozen);
  s.K = layout.K;
  s.stages = layout.stages;
  s.dp = dp_layout(config.cluster.nodes, config.cluster.devices_per_node, config.autodp ? s.K : K0)
             .replicas();
  IterationTimer timer(config);
  const int best = timer.best_chunks(s);
  std::vector<ChunkPoint> out;
  for (int m : chunk_candidates(s.K, config.batch)) {
    s.chunks = m;
    const double t = timer.time(s).iteration_s;
    out.push_back({frozen, s.K, s.dp, m, t, t > 0 ? s.dp * config.batch / t : 0, m == best});
  }
  return out;
}

int cache_threshold_layers(const ElasticConfig& config) {
  config.validate();
  const TransformerLayers tl = TransformerLayers::from_profile(config.profile);
  for (int f = 1; f < tl.layers(); ++f) {
    if (cache_on(config, tl.frozen_profile_layers(f))) return f;
  }
  return 0;
}

}  // namespace pipetwin::sim
