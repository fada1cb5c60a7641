#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/train/trainer.hpp"

namespace pipetwin::exec {

namespace {

Json optional_number(const std::optional<double>& x) {
  return x ? Json(*x) : Json(nullptr);
}

}  // namespace

Json EpochReport::to_json() const {
  Json j;
  j["epoch"] = epoch;
  j["step"] = step;
  j["K"] = K;
  j["dp"] = dp;
  j["M"] = M;
  j["frozen_layers"] = frozen_layers;
  j["steps"] = steps;
  j["samples"] = samples;
  j["lr"] = lr;
  j["samples_per_s"] = samples_per_s;
  j["train_loss"] = train_loss;
  j["eval_loss"] = eval_loss;
  j["eval_accuracy"] = optional_number(eval_accuracy);
  j["train_s"] = train_s;
  j["transition_s"] = transition_s;
  j["wall_s"] = wall_s;
  j["cache"] = cache;
  if (cache_stats) j["cache_stats"] = elastic::cache_counts_to_json(*cache_stats);
  return j;
}

EpochReport EpochReport::from_json(const JsonView& v) {
  EpochReport r;
  r.epoch = v.int32("epoch");
  r.step = v.integer("step");
  r.K = v.int32("K");
  r.dp = v.int32("dp");
  r.M = v.int32("M");
  r.frozen_layers = v.int32("frozen_layers");
  r.steps = v.integer("steps");
  r.samples = v.integer("samples");
  r.lr = v.number("lr");
  r.samples_per_s = v.number("samples_per_s");
  r.train_loss = v.number("train_loss");
  r.eval_loss = v.number("eval_loss");
  if (!v.at("eval_accuracy").raw().is_null()) r.eval_accuracy = v.number("eval_accuracy");
  r.train_s = v.number("train_s");
  r.transition_s = v.nonneg_or("transition_s", 0);
  r.wall_s = v.number("wall_s");
  r.cache = v.bool_or("cache", false);
  if (v.has("cache_stats")) r.cache_stats = elastic::cache_counts_from_json(v.at("cache_stats"));
  return r;
}

}  // namespace pipetwin::exec
