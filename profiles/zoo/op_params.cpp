#include "profiles/zoo/op_params.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "profiles/zoo/ops.hpp"

namespace pipetwin::zoo {

namespace {

constexpr const char* kFormat = "pipetwin.op_params";
constexpr int kVersion = 1;

enum class Range { positive, nonneg, fraction };

std::string checked_source(const JsonView& v) {
  const JsonView s = v.at("source");
  const std::string text = s.as_string();
  if (text.empty()) s.fail("say where the number comes from (an empty source)");
  return text;
}

Sourced sourced(const JsonView& parent, const char* key, Range range) {
  const JsonView v = parent.at(key);
  if (!v.raw().is_object()) v.fail("expected an object {\"value\": ..., \"source\": \"...\"}");
  v.allow_only({"value", "source"});
  Sourced s;
  const JsonView value = v.at("value");
  s.value = range == Range::nonneg ? value.as_nonneg() : value.as_positive();
  if (range == Range::fraction && s.value > 1) {
    value.fail(fmt::format("expected a fraction in (0, 1], got {}", s.value));
  }
  s.source = checked_source(v);
  return s;
}

bool sourced_bool(const JsonView& parent, const char* key, std::string& source) {
  const JsonView v = parent.at(key);
  if (!v.raw().is_object())
    v.fail("expected an object {\"value\": true|false, \"source\": \"...\"}");
  v.allow_only({"value", "source"});
  source = checked_source(v);
  return v.at("value").as_bool();
}

Json sourced_json(const Sourced& s) {
  return {{"value", s.value}, {"source", s.source}};
}

GemmParams gemm_from(const JsonView& v) {
  if (!v.raw().is_object()) v.fail("expected an object with tile_m, tile_n, unit_flops, ...");
  v.allow_only({"tile_m", "tile_n", "unit_flops", "tile_k_overhead"});
  GemmParams g;
  g.tile_m = sourced(v, "tile_m", Range::positive);
  g.tile_n = sourced(v, "tile_n", Range::positive);
  g.unit_flops = sourced(v, "unit_flops", Range::positive);
  g.tile_k_overhead = sourced(v, "tile_k_overhead", Range::nonneg);
  return g;
}

void read_conv(const JsonView& v, OpParams& p) {
  if (!v.raw().is_object()) v.fail("expected an object with efficiency and winograd_dtypes");
  v.allow_only({"efficiency", "winograd_dtypes", "fixed_s"});
  if (v.has("fixed_s")) p.conv_fixed_s = sourced(v, "fixed_s", Range::nonneg);
  const JsonView e = v.at("efficiency");
  if (!e.raw().is_object()) e.fail("expected an object with forward, dgrad and wgrad");
  e.allow_only({"forward", "dgrad", "wgrad"});
  p.conv_forward = sourced(e, "forward", Range::positive);
  p.conv_dgrad = sourced(e, "dgrad", Range::positive);
  p.conv_wgrad = sourced(e, "wgrad", Range::positive);
  const JsonView w = v.at("winograd_dtypes");
  if (!w.raw().is_object()) w.fail("expected an object {\"value\": [dtypes], \"source\": \"...\"}");
  w.allow_only({"value", "source"});
  p.winograd_source = checked_source(w);
  const JsonView list = w.at("value");
  if (!list.raw().is_array()) list.fail("expected an array of dtypes");
  for (const auto& item : list.items()) {
    const std::string dtype = item.as_string();
    try {
      dtype_info(dtype);
    } catch (const InputError&) {
      item.fail(fmt::format("unknown dtype \"{}\"", dtype));
    }
    p.winograd_dtypes.push_back(dtype);
  }
}

void read_elementwise(const JsonView& v, OpParams& p) {
  if (!v.raw().is_object()) v.fail("expected an object of class -> {forward, backward}");
  for (const auto& name : v.keys()) {
    bool known = false;
    for (EltClass c : all_elt_classes()) known = known || name == elt_name(c);
    const JsonView r = v.at(name);
    if (!known) r.fail(fmt::format("unknown element-wise class \"{}\"", name));
    if (!r.raw().is_object()) r.fail("expected an object with forward and backward");
    r.allow_only({"forward", "backward"});
    p.elementwise[name] = {sourced(r, "forward", Range::positive),
                           sourced(r, "backward", Range::positive)};
  }
}

void read_attention(const JsonView& a, OpParams& p) {
  if (!a.raw().is_object()) a.fail("expected an object with forward and backward");
  a.allow_only({"forward", "backward"});
  p.attention_forward = sourced(a, "forward", Range::fraction);
  p.attention_backward = sourced(a, "backward", Range::fraction);
}

void read_gemm(const JsonView& g, OpParams& p) {
  if (!g.raw().is_object() || g.keys().empty()) g.fail("expected an object of dtype -> GEMM");
  for (const auto& dtype : g.keys()) {
    try {
      dtype_info(dtype);
    } catch (const InputError&) {
      g.at(dtype).fail(fmt::format("unknown dtype \"{}\"", dtype));
    }
    p.gemm[dtype] = gemm_from(g.at(dtype));
  }
}

LayerRefinement refinement_from(const JsonView& r) {
  if (!r.raw().is_object()) r.fail("expected an object with scale and the boundary times");
  r.allow_only(
      {"scale", "first_forward_s", "first_backward_s", "last_forward_s", "last_backward_s"});
  LayerRefinement f;
  f.scale = sourced(r, "scale", Range::positive);
  f.first_forward_s = sourced(r, "first_forward_s", Range::nonneg);
  f.first_backward_s = sourced(r, "first_backward_s", Range::nonneg);
  f.last_forward_s = sourced(r, "last_forward_s", Range::nonneg);
  f.last_backward_s = sourced(r, "last_backward_s", Range::nonneg);
  return f;
}

}  // namespace

const GemmParams& OpParams::gemm_for(const std::string& dtype) const {
  const auto it = gemm.find(dtype);
  if (it == gemm.end()) {
    std::string known;
    for (const auto& [name, g] : gemm) known += (known.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("{}: gemm: no parameters for dtype {} (the file has: {})",
                                 origin.empty() ? device : origin, dtype, known));
  }
  return it->second;
}

OpParams op_params_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format",
                  "version",
                  "device",
                  "derivation",
                  "notes",
                  "units",
                  "async",
                  "launch_s",
                  "host_s",
                  "host_node_s",
                  "host_tensor_s",
                  "bandwidth",
                  "cache_bytes",
                  "cache_bandwidth",
                  "fused_attention",
                  "attention_efficiency",
                  "gemm",
                  "conv",
                  "elementwise",
                  "layer_refinement",
                  "fit"});
  OpParams p;
  p.origin = doc.origin();
  p.device = doc.string("device");
  p.derivation = doc.string("derivation");
  if (p.derivation != "datasheet" && p.derivation != "derived" && p.derivation != "measured") {
    doc.at("derivation")
        .fail(fmt::format("expected datasheet, derived or measured, got \"{}\"", p.derivation));
  }
  p.notes = doc.string_or("notes", "");
  p.units = sourced(doc, "units", Range::positive);
  p.async = sourced_bool(doc, "async", p.async_source);
  p.launch_s = sourced(doc, "launch_s", Range::nonneg);
  p.host_s = sourced(doc, "host_s", Range::nonneg);
  p.host_node_s = sourced(doc, "host_node_s", Range::nonneg);
  p.host_tensor_s = sourced(doc, "host_tensor_s", Range::nonneg);
  p.bandwidth = sourced(doc, "bandwidth", Range::positive);
  p.cache_bytes = sourced(doc, "cache_bytes", Range::nonneg);
  p.cache_bandwidth = sourced(doc, "cache_bandwidth", Range::positive);
  p.fused_attention = sourced_bool(doc, "fused_attention", p.fused_attention_source);
  read_attention(doc.at("attention_efficiency"), p);
  read_gemm(doc.at("gemm"), p);
  read_conv(doc.at("conv"), p);
  if (auto e = doc.find("elementwise")) read_elementwise(*e, p);
  if (auto r = doc.find("layer_refinement")) p.refinement = refinement_from(*r);
  if (auto fit = doc.find("fit")) p.fit = fit->raw();
  return p;
}

Json op_params_to_json(const OpParams& p) {
  Json doc = json_document(kFormat, kVersion);
  doc["device"] = p.device;
  doc["derivation"] = p.derivation;
  if (!p.notes.empty()) doc["notes"] = p.notes;
  doc["units"] = sourced_json(p.units);
  doc["async"] = {{"value", p.async}, {"source", p.async_source}};
  doc["launch_s"] = sourced_json(p.launch_s);
  doc["host_s"] = sourced_json(p.host_s);
  doc["host_node_s"] = sourced_json(p.host_node_s);
  doc["host_tensor_s"] = sourced_json(p.host_tensor_s);
  doc["bandwidth"] = sourced_json(p.bandwidth);
  doc["cache_bytes"] = sourced_json(p.cache_bytes);
  doc["cache_bandwidth"] = sourced_json(p.cache_bandwidth);
  doc["fused_attention"] = {{"value", p.fused_attention}, {"source", p.fused_attention_source}};
  doc["attention_efficiency"] = {{"forward", sourced_json(p.attention_forward)},
                                 {"backward", sourced_json(p.attention_backward)}};
  Json gemm = Json::object();
  for (const auto& [dtype, g] : p.gemm) {
    gemm[dtype] = {{"tile_m", sourced_json(g.tile_m)},
                   {"tile_n", sourced_json(g.tile_n)},
                   {"unit_flops", sourced_json(g.unit_flops)},
                   {"tile_k_overhead", sourced_json(g.tile_k_overhead)}};
  }
  doc["gemm"] = std::move(gemm);
  doc["conv"] = {{"efficiency",
                  {{"forward", sourced_json(p.conv_forward)},
                   {"dgrad", sourced_json(p.conv_dgrad)},
                   {"wgrad", sourced_json(p.conv_wgrad)}}},
                 {"winograd_dtypes", {{"value", p.winograd_dtypes}, {"source", p.winograd_source}}},
                 {"fixed_s", sourced_json(p.conv_fixed_s)}};
  if (!p.elementwise.empty()) {
    Json elt = Json::object();
    for (const auto& [name, r] : p.elementwise) {
      elt[name] = {{"forward", sourced_json(r.forward)}, {"backward", sourced_json(r.backward)}};
    }
    doc["elementwise"] = std::move(elt);
  }
  if (p.refinement) {
    const LayerRefinement& f = *p.refinement;
    doc["layer_refinement"] = {{"scale", sourced_json(f.scale)},
                               {"first_forward_s", sourced_json(f.first_forward_s)},
                               {"first_backward_s", sourced_json(f.first_backward_s)},
                               {"last_forward_s", sourced_json(f.last_forward_s)},
                               {"last_backward_s", sourced_json(f.last_backward_s)}};
  }
  if (!p.fit.is_null()) doc["fit"] = p.fit;
  return doc;
}

OpParams load_op_params(const std::string& path) {
  const Json doc = load_json_file(path);
  return op_params_from_json(JsonView(doc, path));
}

void save_op_params(const OpParams& p, const std::string& path) {
  write_file_atomic(path, dump_json(op_params_to_json(p)));
}

std::string op_params_path(const std::string& catalog_dir, const std::string& device) {
  return (std::filesystem::path(catalog_dir) / "ops" / (device + ".json")).string();
}

}  // namespace pipetwin::zoo
