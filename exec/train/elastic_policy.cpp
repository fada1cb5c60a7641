#include "exec/train/elastic_policy.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/elastic/autopipe.hpp"
#include "core/elastic/decision.hpp"
#include "core/error.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::exec {

using namespace pipetwin::elastic;

void ElasticOptions::validate() const {
  if (!(alpha > 0 && alpha < 1)) {
    throw InputError(fmt::format("--alpha must be in (0, 1) ({} given)", alpha));
  }
  if (interval < 1) {
    throw InputError(fmt::format("--freeze-interval must be positive ({} given)", interval));
  }
  if (!(lambda_frozen >= 0 && lambda_frozen <= 1)) {
    throw InputError(fmt::format("--lambda-frozen must be in [0, 1] ({} given)", lambda_frozen));
  }
}

namespace {

ElasticOptions validated(const ElasticOptions& o) {
  o.validate();
  return o;
}

// The initial plan's pipeline length, once the plan is one the policy can re-plan.
int elastic_length(const Plan& initial) {
  const int K = initial.num_stages();
  if (initial.devices_per_replica() != K) {
    throw InputError(fmt::format(
        "--elastic: the plan puts {} stages on {} devices; elastic training needs one stage per "
        "device (AutoPipe re-partitions over devices)",
        K, initial.devices_per_replica()));
  }
  if (initial.batch_size % initial.dp != 0) {
    throw InputError(fmt::format("--elastic: plan batch_size {} does not split over dp {}",
                                 initial.batch_size, initial.dp));
  }
  return K;
}

}  // namespace

ElasticPolicy::ElasticPolicy(const Plan& initial, ElasticOptions options)
    : initial_(initial),
      options_(validated(options)),
      autopipe_(initial.profile, elastic_length(initial), options_.lambda_frozen),
      devices_(autopipe_.layout().K * initial.dp),
      batch_(initial.batch_size / initial.dp),
      accumulator_(layers()) {}

std::vector<double> ElasticPolicy::transformer_norms(
    const std::vector<double>& squared_by_layer) const {
  const TransformerLayers& tl = transformer_layers();
  std::vector<double> out;
  for (int i = 0; i < tl.layers(); ++i) {
    double sq = 0;
    for (int l = tl.first(i); l < tl.first(i + 1); ++l) sq += squared_by_layer.at(l);
    out.push_back(std::sqrt(sq));
  }
  return out;
}

void ElasticPolicy::observe(const std::vector<double>& norms) {
  accumulator_.add(norms);
  pending_.push_back(norms);
}

bool ElasticPolicy::due(int64_t step, bool epoch_end, int64_t epochs_done) const {
  if (options_.unit == FreezeUnit::kStep) return step > 0 && step % options_.interval == 0;
  return epoch_end && epochs_done > 0 && epochs_done % options_.interval == 0;
}

int ElasticPolicy::freeze_step() {
  // Equation 1, as FreezePolicy::freeze_step applies it (freeze_policy.hpp), on state that a
  // checkpoint can hold.
  const int argmin = options_.gradient_norms ? argmin_count(accumulator_.mean(), frozen_) : -1;
  real_ = equation1(real_, layers(), options_.alpha, argmin);
  frozen_ = std::max(frozen_, static_cast<int>(std::floor(real_ + 1e-9)));
  accumulator_.reset();
  pending_.clear();
  ++T_;
  return frozen_;
}

Transition ElasticPolicy::transition(int frozen) {
  if (frozen < 0 || frozen > layers()) {
    throw InputError(fmt::format("elastic transition: frozen layers must be in 0..{} ({} given)",
                                 layers(), frozen));
  }
  // Algorithm 1 lines 25-33: re-partition, then K -> K/2 while Equation 2 holds.
  return Transition{plan_of(autopipe_.on_freeze(frozen)), frozen,
                    frozen > 0 && cache_pays_off(frozen)};
}

Transition ElasticPolicy::fewer_devices(int devices) {
  if (devices < 1 || devices >= devices_) {
    throw InputError(
        fmt::format("elastic: the job can only lose devices ({} -> {})", devices_, devices));
  }
  devices_ = devices;
  int length = K();
  while (devices_ % length != 0) --length;
  return Transition{plan_of(autopipe_.restore(frozen_, length)), frozen_,
                    frozen_ > 0 && cache_pays_off(frozen_)};
}

void ElasticPolicy::configure_cache(long samples, CacheConfig config, CacheCosts costs) {
  cache_samples_ = samples;
  cache_config_ = config;
  cache_costs_ = costs;
}

bool ElasticPolicy::cache_pays_off(int frozen) const {
  // The replay's decision (core/elastic/decision.hpp), on the plan's profile and cluster.
  CacheInputs in;
  in.samples = cache_samples_;
  in.config = cache_config_;
  in.costs = cache_costs_;
  in.batch = batch_;
  return elastic::cache_on(initial_, transformer_layers().frozen_profile_layers(frozen), in);
}

Plan ElasticPolicy::plan_for(int frozen, int K) const {
  return plan_of(autopipe_.layout_for(frozen, K));
}

Plan ElasticPolicy::plan_of(const PipelineLayout& layout) const {
  PipelineState s;
  s.frozen_profile = layout.frozen_profile_layers;
  s.K = layout.K;
  s.dp = devices_ / layout.K;  // AutoDP: every device of the job drives a stage
  s.stages = layout.stages;
  Plan p = state_plan(initial_, s, batch_, options_.lambda_frozen);
  p.chunks = choose_chunks(p);
  return p;
}

int ElasticPolicy::choose_chunks(const Plan& base) const {
  // get_optimal_chunks (Algorithm 1 line 35): the simulator's iteration for M in [K, 6K], with
  // F_frozen's forward outside the Pipe, as the replay times it.
  Plan p = base;
  p.profile = outside_pipe(base.profile, base.frozen_layers);
  return elastic::choose_chunks(p.num_stages(), batch_, [&](int m) {
    p.chunks = m;
    return sim::simulate_plan(PlanContext(p, 0)).metrics.iteration_time_s;
  });
}

Json ElasticPolicy::state() const {
  Json pending = Json::array();
  for (const auto& n : pending_) pending.push_back(n);
  return {{"T", T_},
          {"real_frozen", real_},
          {"frozen_layers", frozen_},
          {"K", K()},
          {"layers", layers()},
          {"alpha", options_.alpha},
          {"pending_norms", std::move(pending)}};
}

void ElasticPolicy::restore(const JsonView& v) {
  if (v.int32("layers") != layers()) {
    v.at("layers").fail(fmt::format("the plan's model has {} layers", layers()));
  }
  if (v.number("alpha") != options_.alpha) {
    v.at("alpha").fail(
        fmt::format("{}, but this run has --alpha {}", v.number("alpha"), options_.alpha));
  }
  T_ = v.int32("T");
  real_ = v.number("real_frozen");
  frozen_ = v.int32("frozen_layers");
  const int length = v.int32("K");
  if (length < 1 || length > devices_ || frozen_ < 0 || frozen_ > layers()) {
    v.fail(fmt::format("K {} and frozen layers {} do not fit {} devices and {} layers", length,
                       frozen_, devices_, layers()));
  }
  try {
    autopipe_.restore(frozen_, length);
  } catch (const InputError& e) {
    v.fail(e.what());
  }
  accumulator_.reset();
  pending_.clear();
  for (const auto& step : v.at("pending_norms").items()) {
    std::vector<double> norms;
    for (const auto& x : step.items()) norms.push_back(x.as_number());
    observe(norms);
  }
}

}  // namespace pipetwin::exec
