#include "core/profile.hpp"

#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace pipetwin {

namespace {

constexpr const char* kFormat = "pipetwin.profile";
constexpr int kVersion = 1;

// The figures of a cold-start array: one non-negative number per cold pause.
std::vector<double> cold_from_json(const JsonView& j, std::string_view key, size_t pauses) {
  std::vector<double> v;
  const auto a = j.find(key);
  if (!a) return v;
  if (a->size() != pauses) {
    a->fail(fmt::format("needs one figure per cold_pauses_s entry ({} given, {} expected)",
                        a->size(), pauses));
  }
  for (const auto& x : a->items()) v.push_back(x.as_nonneg());
  return v;
}

LayerTiming timing_from_json(const JsonView& j, size_t pauses) {
  j.allow_only({"micro_batch", "forward_s", "backward_s", "recompute_s", "backward_weight_s",
                "contention", "contention_backward", "cold_forward_s", "cold_backward_s"});
  LayerTiming t;
  const int64_t mb = j.integer("micro_batch");
  if (mb < 1) j.at("micro_batch").fail(fmt::format("must be at least 1 ({} given)", mb));
  if (mb > std::numeric_limits<int>::max()) {
    j.at("micro_batch")
        .fail(fmt::format("must be at most {} ({} given)", std::numeric_limits<int>::max(), mb));
  }
  t.micro_batch = static_cast<int>(mb);
  t.forward_s = j.nonneg("forward_s");
  t.backward_s = j.nonneg("backward_s");
  t.recompute_s = j.nonneg_or("recompute_s", t.forward_s);
  if (j.has("backward_weight_s")) {
    t.backward_weight_s = j.nonneg("backward_weight_s");
    if (t.backward_weight_s > t.backward_s) {
      j.at("backward_weight_s")
          .fail(fmt::format("must not exceed backward_s ({} > {})", t.backward_weight_s,
                            t.backward_s));
    }
  }
  t.contention = j.positive_or("contention", 1.0);
  t.contention_backward = j.positive_or("contention_backward", 0);  // 0: absent
  for (const auto& [key, k] : {std::pair<const char*, double>{"contention", t.contention},
                               {"contention_backward", t.contention_backward}}) {
    if (k != 0 && k < 1) j.at(key).fail(fmt::format("must be at least 1 ({} given)", k));
  }
  t.cold_forward_s = cold_from_json(j, "cold_forward_s", pauses);
  t.cold_backward_s = cold_from_json(j, "cold_backward_s", pauses);
  return t;
}

LayerProfile layer_from_json(const JsonView& j, size_t pauses) {
  j.allow_only({"name", "kind", "timings", "output_bytes_per_sample", "saved_bytes_per_sample",
                "backward_bytes_per_sample", "forward_workspace_bytes_per_sample",
                "backward_workspace_bytes_per_sample", "param_bytes", "optimizer_bytes",
                "optimizer_step_s", "optimizer_new_version_s", "tp_forward", "tp_backward"});
  LayerProfile l;
  l.name = j.string("name");
  if (l.name.empty()) j.at("name").fail("must not be empty");
  l.kind = j.string_or("kind", "layer");
  const JsonView timings = j.at("timings");
  if (timings.size() == 0) timings.fail("needs at least one micro-batch size");
  std::set<int> seen;
  for (const auto& t : timings.items()) {
    l.timings.push_back(timing_from_json(t, pauses));
    if (!seen.insert(l.timings.back().micro_batch).second) {
      t.at("micro_batch")
          .fail(fmt::format("micro-batch size {} profiled twice", l.timings.back().micro_batch));
    }
  }
  l.output_bytes_per_sample = j.nonneg("output_bytes_per_sample");
  l.saved_bytes_per_sample = j.nonneg_or("saved_bytes_per_sample", l.output_bytes_per_sample);
  l.backward_bytes_per_sample = j.nonneg_or("backward_bytes_per_sample", 0);
  l.forward_workspace_bytes_per_sample = j.nonneg_or("forward_workspace_bytes_per_sample", 0);
  l.backward_workspace_bytes_per_sample = j.nonneg_or("backward_workspace_bytes_per_sample", 0);
  l.param_bytes = j.nonneg("param_bytes");
  l.optimizer_bytes = j.nonneg_or("optimizer_bytes", 0);
  l.optimizer_step_s = j.nonneg_or("optimizer_step_s", 0);
  l.optimizer_new_version_s = j.nonneg_or("optimizer_new_version_s", 0);
  if (auto c = j.find("tp_forward")) l.tp_forward = collectives_from_json(*c);
  if (auto c = j.find("tp_backward")) l.tp_backward = collectives_from_json(*c);
  return l;
}

}  // namespace

std::vector<ProfileEdge> Profile::effective_edges() const {
  if (!edges.empty()) return edges;
  std::vector<ProfileEdge> chain;
  for (int i = 0; i + 1 < num_layers(); ++i) {
    chain.push_back({i, i + 1, layers[static_cast<size_t>(i)].output_bytes_per_sample});
  }
  return chain;
}

Profile profile_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format", "version", "model", "device", "dtype", "source", "notes", "optimizer",
                  "input_bytes_per_sample", "layers", "edges", "core_slowdown", "cold_pauses_s",
                  "tensor_parallel"});
  Profile p;
  p.model = doc.string("model");
  p.device = doc.string("device");
  p.dtype = doc.string_or("dtype", "float32");
  p.source = doc.string_or("source", "measured");
  if (p.source != "measured" && p.source != "analytic" && p.source != "synthetic") {
    doc.at("source").fail(
        fmt::format("expected \"measured\", \"analytic\" or \"synthetic\", got \"{}\"", p.source));
  }
  p.notes = doc.string_or("notes", "");
  p.optimizer = doc.string_or("optimizer", "");
  if (!p.optimizer.empty() && p.optimizer != "sgd" && p.optimizer != "momentum" &&
      p.optimizer != "adam") {
    doc.at("optimizer")
        .fail(fmt::format("expected \"sgd\", \"momentum\" or \"adam\", got \"{}\"", p.optimizer));
  }
  p.input_bytes_per_sample = doc.nonneg_or("input_bytes_per_sample", 0);
  if (auto pauses = doc.find("cold_pauses_s")) {
    for (const auto& v : pauses->items()) {
      const double w = v.as_positive();
      if (!p.cold_pauses_s.empty() && w <= p.cold_pauses_s.back()) {
        v.fail(fmt::format("cold pauses must increase ({} after {})", w, p.cold_pauses_s.back()));
      }
      p.cold_pauses_s.push_back(w);
    }
  }
  if (auto tp = doc.find("tensor_parallel")) p.tensor_parallel = tensor_parallel_from_json(*tp);
  const JsonView layers = doc.at("layers");
  if (layers.size() == 0) layers.fail("a profile needs at least one layer");
  std::set<std::string> names;
  for (const auto& l : layers.items()) {
    p.layers.push_back(layer_from_json(l, p.cold_pauses_s.size()));
    if (!names.insert(p.layers.back().name).second) {
      l.at("name").fail(fmt::format("duplicate layer name \"{}\"", p.layers.back().name));
    }
  }
  if (auto edges = doc.find("edges")) {
    for (const auto& e : edges->items()) {
      e.allow_only({"from", "to", "bytes_per_sample"});
      ProfileEdge edge;
      const int64_t from = e.integer("from"), to = e.integer("to");
      if (from < 0 || from >= p.num_layers()) {
        e.at("from").fail(
            fmt::format("layer index {} out of range 0..{}", from, p.num_layers() - 1));
      }
      if (to < 0 || to >= p.num_layers()) {
        e.at("to").fail(fmt::format("layer index {} out of range 0..{}", to, p.num_layers() - 1));
      }
      if (from == to) e.fail("an edge cannot connect a layer to itself");
      edge.from = static_cast<int>(from);
      edge.to = static_cast<int>(to);
      edge.bytes_per_sample = e.nonneg("bytes_per_sample");
      p.edges.push_back(edge);
    }
  }
  if (auto slow = doc.find("core_slowdown")) {
    for (const auto& v : slow->items()) p.core_slowdown.push_back(v.as_positive());
  }
  return p;
}

Json profile_to_json(const Profile& p) {
  Json doc = json_document(kFormat, kVersion);
  doc["model"] = p.model;
  doc["device"] = p.device;
  doc["dtype"] = p.dtype;
  doc["source"] = p.source;
  if (!p.notes.empty()) doc["notes"] = p.notes;
  if (!p.optimizer.empty()) doc["optimizer"] = p.optimizer;
  doc["input_bytes_per_sample"] = p.input_bytes_per_sample;
  if (!p.core_slowdown.empty()) doc["core_slowdown"] = p.core_slowdown;
  if (!p.cold_pauses_s.empty()) doc["cold_pauses_s"] = p.cold_pauses_s;
  if (p.tensor_parallel != TensorParallel{}) {
    doc["tensor_parallel"] = tensor_parallel_to_json(p.tensor_parallel);
  }
  Json layers = Json::array();
  for (const auto& l : p.layers) {
    Json jl;
    jl["name"] = l.name;
    jl["kind"] = l.kind;
    Json timings = Json::array();
    for (const auto& t : l.timings) {
      Json jt = {{"micro_batch", t.micro_batch},
                 {"forward_s", t.forward_s},
                 {"backward_s", t.backward_s},
                 {"recompute_s", t.recompute_s}};
      if (t.backward_weight_s >= 0) jt["backward_weight_s"] = t.backward_weight_s;
      if (t.contention != 1.0) jt["contention"] = t.contention;
      if (t.backward_contention() != t.contention)
        jt["contention_backward"] = t.contention_backward;
      if (!t.cold_forward_s.empty()) jt["cold_forward_s"] = t.cold_forward_s;
      if (!t.cold_backward_s.empty()) jt["cold_backward_s"] = t.cold_backward_s;
      timings.push_back(std::move(jt));
    }
    jl["timings"] = std::move(timings);
    jl["output_bytes_per_sample"] = l.output_bytes_per_sample;
    jl["saved_bytes_per_sample"] = l.saved_bytes_per_sample;
    if (l.backward_bytes_per_sample > 0)
      jl["backward_bytes_per_sample"] = l.backward_bytes_per_sample;
    if (l.forward_workspace_bytes_per_sample > 0)
      jl["forward_workspace_bytes_per_sample"] = l.forward_workspace_bytes_per_sample;
    if (l.backward_workspace_bytes_per_sample > 0)
      jl["backward_workspace_bytes_per_sample"] = l.backward_workspace_bytes_per_sample;
    jl["param_bytes"] = l.param_bytes;
    jl["optimizer_bytes"] = l.optimizer_bytes;
    jl["optimizer_step_s"] = l.optimizer_step_s;
    if (l.optimizer_new_version_s > 0) jl["optimizer_new_version_s"] = l.optimizer_new_version_s;
    if (!l.tp_forward.empty()) jl["tp_forward"] = collectives_to_json(l.tp_forward);
    if (!l.tp_backward.empty()) jl["tp_backward"] = collectives_to_json(l.tp_backward);
    layers.push_back(std::move(jl));
  }
  doc["layers"] = std::move(layers);
  if (!p.edges.empty()) {
    Json edges = Json::array();
    for (const auto& e : p.edges) {
      edges.push_back({{"from", e.from}, {"to", e.to}, {"bytes_per_sample", e.bytes_per_sample}});
    }
    doc["edges"] = std::move(edges);
  }
  return doc;
}

Profile load_profile(const std::string& path) {
  return load_json_as(path, profile_from_json);
}

void save_profile(const Profile& profile, const std::string& path) {
  save_json_file(path, profile_to_json(profile));
}

}  // namespace pipetwin
