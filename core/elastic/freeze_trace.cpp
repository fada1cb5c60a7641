#include "core/elastic/freeze_trace.hpp"

#include <fmt/format.h>

#include "core/elastic/freeze_policy.hpp"
#include "core/error.hpp"

namespace pipetwin::elastic {

namespace {

constexpr const char* kFormat = "pipetwin.freeze_trace";
constexpr int kVersion = 1;

bool before(const FreezeEvent& a, const FreezeEvent& b) {
  return a.epoch < b.epoch || (a.epoch == b.epoch && a.sample < b.sample);
}

// The rule an event breaks given its predecessor (nullptr for the first), or "" if none.
std::string broken_rule(const FreezeEvent& e, const FreezeEvent* prev, int layers) {
  if (e.epoch < 0) return fmt::format("epoch must not be negative ({} given)", e.epoch);
  if (e.sample < 0) return fmt::format("sample must not be negative ({} given)", e.sample);
  if (e.frozen_layers < 0 || e.frozen_layers > layers) {
    return fmt::format("frozen_layers must be in 0..{} ({} given)", layers, e.frozen_layers);
  }
  if (prev == nullptr) return "";
  if (!before(*prev, e)) {
    return fmt::format(
        "events must be in time order at distinct points (epoch {} sample {} "
        "follows epoch {} sample {})",
        e.epoch, e.sample, prev->epoch, prev->sample);
  }
  if (e.frozen_layers < prev->frozen_layers) {
    return fmt::format("frozen_layers must not decrease ({} after {})", e.frozen_layers,
                       prev->frozen_layers);
  }
  return "";
}

}  // namespace

int FreezeTrace::frozen_at(int epoch, long sample) const {
  int frozen = 0;
  const FreezeEvent point{epoch, sample, -1, 0};
  for (const auto& e : events) {
    if (before(point, e)) break;
    frozen = e.frozen_layers;
  }
  return frozen;
}

void FreezeTrace::validate(const std::string& origin) const {
  if (layers < 1)
    throw InputError(fmt::format("{}: layers must be positive ({} given)", origin, layers));
  if (alpha < 0 || alpha >= 1) {
    throw InputError(fmt::format("{}: alpha must be in [0, 1) ({} given)", origin, alpha));
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string rule = broken_rule(events[i], i ? &events[i - 1] : nullptr, layers);
    if (!rule.empty()) throw InputError(fmt::format("{}: events[{}]: {}", origin, i, rule));
  }
}

FreezeTrace bound_trace(int layers, double alpha, int epochs, int interval) {
  FreezeConfig config{layers, alpha, FreezeUnit::kEpoch, interval};
  config.validate("alpha bound");
  FreezeTrace t;
  t.layers = layers;
  t.alpha = alpha;
  t.source = "alpha-bound";
  int frozen = 0, T = 0;
  for (int e = interval; e < epochs; e += interval) {
    const int n = bound_frozen_layers(layers, alpha, ++T);
    if (n != frozen) t.events.push_back({e, 0, -1, n});
    frozen = n;
  }
  return t;
}

FreezeTrace bound_trace_over_run(int layers, double alpha, int epochs, long samples, int steps) {
  FreezeConfig{layers, alpha, FreezeUnit::kEpoch, 1}.validate("alpha bound");
  if (epochs < 1 || samples < 1 || steps < 1) {
    throw InputError(fmt::format(
        "alpha bound: epochs, samples and freeze steps must be positive ({}, {}, {} given)", epochs,
        samples, steps));
  }
  FreezeTrace t;
  t.layers = layers;
  t.alpha = alpha;
  t.source = "alpha-bound";
  const long total = static_cast<long>(epochs) * samples;
  int frozen = 0;
  for (int T = 1; T < steps; ++T) {
    const long at = total * T / steps;  // samples of the run trained before freeze step T
    const int n = bound_frozen_layers(layers, alpha, T);
    if (n != frozen) t.events.push_back({static_cast<int>(at / samples), at % samples, -1, n});
    frozen = n;
  }
  return t;
}

FreezeTrace freeze_trace_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format", "version", "model", "layers", "alpha", "source", "events"});
  FreezeTrace t;
  t.model = doc.string_or("model", "");
  t.layers = doc.int32_at_least("layers", 1);
  t.alpha = doc.nonneg_or("alpha", 0);
  if (t.alpha >= 1) doc.at("alpha").fail(fmt::format("must be in [0, 1) ({} given)", t.alpha));
  t.source = doc.string_or("source", "executor");
  const JsonView events = doc.at("events");
  for (size_t i = 0; i < events.size(); ++i) {
    const JsonView e = events.at(i);
    e.allow_only({"epoch", "sample", "step", "frozen_layers"});
    FreezeEvent ev;
    ev.epoch = e.int32("epoch");
    ev.sample = static_cast<long>(e.integer_or("sample", 0));
    ev.step = static_cast<long>(e.integer_or("step", -1));
    ev.frozen_layers = e.int32("frozen_layers");
    const std::string rule = broken_rule(ev, i ? &t.events.back() : nullptr, t.layers);
    if (!rule.empty()) e.fail(rule);
    t.events.push_back(ev);
  }
  return t;
}

Json freeze_trace_to_json(const FreezeTrace& t) {
  Json doc = json_document(kFormat, kVersion);
  if (!t.model.empty()) doc["model"] = t.model;
  doc["layers"] = t.layers;
  if (t.alpha > 0) doc["alpha"] = t.alpha;
  doc["source"] = t.source;
  doc["events"] = json_array(t.events, [](const FreezeEvent& e) {
    Json j = {{"epoch", e.epoch}, {"sample", e.sample}};
    if (e.step >= 0) j["step"] = e.step;
    j["frozen_layers"] = e.frozen_layers;
    return j;
  });
  return doc;
}

FreezeTrace load_freeze_trace(const std::string& path) {
  return load_json_as(path, freeze_trace_from_json);
}

void save_freeze_trace(const FreezeTrace& trace, const std::string& path) {
  trace.validate(path);
  save_json_file(path, freeze_trace_to_json(trace));
}

}  // namespace pipetwin::elastic
