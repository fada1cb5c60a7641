#include "models/torchscript_spec.hpp"

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/json_io.hpp"

namespace pipetwin::models {

namespace {

const std::vector<std::string> kOptions = {"input_shape", "input_dtype", "vocab",
                                           "loss",        "classes",     "target_shape"};

// A per-sample shape from the name ("4/16"; "" is a scalar).
std::vector<int64_t> shape_option(const ModelSpec& spec, const std::string& key) {
  std::vector<int64_t> out;
  if (spec.args.at(key).empty()) return out;
  for (double d : spec.numbers(key)) {
    if (d < 1 || d != std::floor(d) || d > 1e12) {
      throw InputError(
          fmt::format("{}: model option {}: expected positive integers D1/D2/..., "
                      "got \"{}\"",
                      spec.origin, key, spec.args.at(key)));
    }
    out.push_back(static_cast<int64_t>(d));
  }
  return out;
}

int64_t positive_option(const ModelSpec& spec, const std::string& key) {
  const long n = spec.integer(key, 0);
  if (n < 1) {
    throw InputError(fmt::format("{}: model option {}: expected a positive integer, got \"{}\"",
                                 spec.origin, key, spec.args.at(key)));
  }
  return n;
}

// Whether `dtype` names token ids (true) or real values (false); InputError otherwise.
bool token_dtype(const std::string& dtype, const std::string& where) {
  if (dtype == "int64" || dtype == "long") return true;
  if (dtype == "float32" || dtype == "float64" || dtype == "float16" || dtype == "bfloat16" ||
      dtype == "float" || dtype == "double") {
    return false;
  }
  throw InputError(fmt::format(
      "{}: expected float32, float64 (real values, made in the run's dtype) or int64 (token ids), "
      "got \"{}\"",
      where, dtype));
}

void check_loss(const std::string& loss, const std::string& where) {
  if (loss != "cross_entropy" && loss != "mse") {
    throw InputError(fmt::format("{}: expected cross_entropy or mse, got \"{}\"", where, loss));
  }
}

std::vector<int64_t> json_shape(const JsonView& v) {
  std::vector<int64_t> out;
  for (const auto& d : v.items()) {
    const int64_t n = d.as_int();
    if (n < 1) d.fail("expected a positive integer");
    out.push_back(n);
  }
  return out;
}

// FILE.pt.json into `ts`, where the name does not set a field already.
void read_metadata(const JsonView& doc, const ModelSpec& spec, TorchScriptSpec& ts) {
  doc.check_format("pipetwin.torchscript", 1);
  doc.allow_only({"format", "version", "model", "torch", "dtype", "parameters", "input_shape",
                  "input_dtype", "vocab", "loss", "classes", "target_shape", "output_shape",
                  "layers"});
  if (!spec.has("input_shape") && doc.has("input_shape")) {
    ts.input_shape = json_shape(doc.at("input_shape"));
    ts.has_input_shape = true;
  }
  if (!spec.has("input_dtype") && doc.has("input_dtype")) {
    const JsonView d = doc.at("input_dtype");
    ts.token_input = token_dtype(d.as_string(), fmt::format("{}: {}", d.origin(), d.path()));
  }
  if (!spec.has("vocab") && doc.has("vocab")) ts.vocab = doc.integer("vocab");
  if (!spec.has("loss") && doc.has("loss")) {
    const JsonView l = doc.at("loss");
    ts.loss = l.as_string();
    check_loss(ts.loss, fmt::format("{}: {}", l.origin(), l.path()));
  }
  // The metadata's classes and target shape are its loss's: a name that picks another loss
  // leaves them to the output.
  const bool same_loss = !spec.has("loss") || doc.string_or("loss", "cross_entropy") == ts.loss;
  if (same_loss && !spec.has("classes") && doc.has("classes")) ts.classes = doc.integer("classes");
  if (same_loss && !spec.has("target_shape") && doc.has("target_shape"))
    ts.target_shape = json_shape(doc.at("target_shape"));
  if (ts.vocab < 0 || ts.classes < 0) doc.fail("vocab and classes must not be negative");
  if (!doc.has("layers")) return;
  std::set<std::string> names;
  for (const auto& l : doc.at("layers").items()) {
    l.allow_only({"name", "kind", "skip_from", "param_bytes"});
    TorchScriptLayerMeta m{l.string("name"), l.string_or("kind", ""), ""};
    if (l.has("skip_from") && !l.at("skip_from").raw().is_null())
      m.skip_from = l.string("skip_from");
    if (!names.insert(m.name).second) l.at("name").fail("a second layer of this name");
    ts.layers.push_back(m);
  }
}

std::string joined_shape(const std::string& flag, const std::string& text) {
  std::vector<std::string> dims;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1) {
      throw InputError(fmt::format(
          "{}: expected positive integers D1,D2,... (one sample), got \"{}\"", flag, text));
    }
    dims.push_back(std::to_string(n));
  }
  return fmt::format("{}", fmt::join(dims, "/"));
}

}  // namespace

bool is_torchscript_model(const std::string& name) {
  return name.rfind(std::string(kTorchScriptFamily) + ":", 0) == 0 || name == kTorchScriptFamily;
}

TorchScriptSpec torchscript_spec(const ModelSpec& spec) {
  TorchScriptSpec ts;
  ts.name = spec.to_string();
  if (spec.presets.size() != 1) {
    throw InputError(fmt::format(
        "{}: \"{}\": expected torchscript:FILE.pt[,key=value...] with one file name (without "
        "',' or '='), got {} bare words",
        spec.origin, ts.name, spec.presets.size()));
  }
  ts.path = spec.presets.front();
  spec.allow_only(kOptions);
  if (spec.has("input_shape")) {
    ts.input_shape = shape_option(spec, "input_shape");
    ts.has_input_shape = true;
  }
  if (spec.has("input_dtype"))
    ts.token_input = token_dtype(spec.args.at("input_dtype"), spec.origin + ": input_dtype");
  if (spec.has("vocab")) ts.vocab = positive_option(spec, "vocab");
  if (spec.has("loss")) {
    ts.loss = spec.args.at("loss");
    check_loss(ts.loss, spec.origin + ": loss");
  }
  if (spec.has("classes")) ts.classes = positive_option(spec, "classes");
  if (spec.has("target_shape")) ts.target_shape = shape_option(spec, "target_shape");
  if (!std::filesystem::is_regular_file(ts.path)) {
    throw InputError(fmt::format("{}: {}: no such file (a module saved with torch.jit.save)",
                                 spec.origin, ts.path));
  }
  const std::string meta = ts.path + ".json";
  if (std::filesystem::is_regular_file(meta)) {
    ts.metadata_path = meta;
    const Json doc = load_json_file(meta);
    read_metadata(JsonView(doc, meta), spec, ts);
  }
  return ts;
}

bool TorchScriptFlags::any() const {
  return !input_shape.empty() || !input_dtype.empty() || !loss.empty() || !target_shape.empty() ||
         classes != 0 || vocab != 0;
}

std::string torchscript_model_name(const std::string& model, const TorchScriptFlags& flags) {
  if (!flags.any()) return model;
  if (!is_torchscript_model(model)) {
    throw InputError(fmt::format(
        "--input-shape, --input-dtype, --loss, --classes, --target-shape and --vocab describe a "
        "torchscript:FILE.pt model, not \"{}\"",
        model));
  }
  ModelSpec spec = ModelSpec::parse(model, "--model");
  auto set = [&](const std::string& flag, const std::string& key, const std::string& value) {
    if (spec.has(key)) {
      throw InputError(
          fmt::format("{}: the model name already sets {}=\"{}\"", flag, key, spec.args.at(key)));
    }
    spec.args[key] = value;
  };
  if (!flags.input_shape.empty())
    set("--input-shape", "input_shape", joined_shape("--input-shape", flags.input_shape));
  if (!flags.input_dtype.empty()) {
    token_dtype(flags.input_dtype, "--input-dtype");
    set("--input-dtype", "input_dtype", flags.input_dtype);
  }
  if (!flags.loss.empty()) {
    check_loss(flags.loss, "--loss");
    set("--loss", "loss", flags.loss);
  }
  if (!flags.target_shape.empty())
    set("--target-shape", "target_shape", joined_shape("--target-shape", flags.target_shape));
  auto count = [&](const std::string& flag, const std::string& key, int64_t n) {
    if (n == 0) return;
    if (n < 0) throw InputError(fmt::format("{}: expected a positive integer, got {}", flag, n));
    set(flag, key, std::to_string(n));
  };
  count("--classes", "classes", flags.classes);
  count("--vocab", "vocab", flags.vocab);
  return spec.to_string();
}

}  // namespace pipetwin::models
