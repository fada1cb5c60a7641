// The zoo's dispatch (name -> family), its name lists, the option helpers (options.hpp) and the
// layer helpers families share.
#include <algorithm>
#include <cctype>

#include "profiles/zoo/families.hpp"

namespace pipetwin::zoo {

int64_t ZooModel::parameters() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}

double ZooModel::forward_flops() const {
  double f = 0;
  for (const auto& l : layers) f += l.forward_flops;
  return f;
}

int ZooModel::layer_index(const std::string& layer_name) const {
  for (int i = 0; i < num_layers(); ++i) {
    if (layers[static_cast<size_t>(i)].name == layer_name) return i;
  }
  return -1;
}

bool is_resnet_alias(const std::string& family) {
  if (family.size() <= 6 || family.compare(0, 6, "resnet") != 0) return false;
  return std::all_of(family.begin() + 6, family.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::vector<std::string> shared_families() {
  return {"vit", "bert", "gpt2", "resnet", "unet", "mlp"};
}

std::vector<std::string> preset_models(const std::string& family) {
  std::vector<std::string> names;
  auto add = [&names](const std::string& prefix, const std::vector<std::string>& words) {
    for (const auto& w : words) names.push_back(prefix + w);
  };
  if (family == "vit") {
    add("vit:", preset_names(vit_presets()));
  } else if (family == "bert") {
    add("bert:", preset_names(bert_presets()));
  } else if (family == "gpt2") {
    add("gpt2:", preset_names(gpt2_presets()));
  } else if (family == "resnet") {  // CIFAR depths are family aliases, ImageNet ones presets
    names = {"resnet20", "resnet32", "resnet44", "resnet56", "resnet110"};
    add("resnet:", preset_names(resnet_presets()));
  } else {
    names = {family};  // options only: unet, mlp
  }
  return names;
}

bool is_zoo_family(const ModelSpec& spec) {
  static const std::vector<std::string> families = {"vit",  "bert", "gpt2",      "t5",  "resnet",
                                                    "unet", "mlp",  "amoebanet", "vgg", "alexnet"};
  return is_resnet_alias(spec.family) || is_vgg_alias(spec.family) ||
         std::find(families.begin(), families.end(), spec.family) != families.end();
}

ZooModel describe_model(const ModelSpec& spec) {
  const std::string& f = spec.family;
  ZooModel m;
  if (f == "vit") {
    m = describe_vit(vit_config(spec));
  } else if (f == "bert") {
    m = describe_bert(bert_config(spec));
  } else if (f == "gpt2") {
    m = describe_gpt2(gpt2_config(spec));
  } else if (f == "t5") {
    m = describe_t5(spec);
  } else if (f == "resnet" || is_resnet_alias(f)) {
    m = describe_resnet(resnet_config(spec));
  } else if (f == "mlp") {
    m = describe_mlp(mlp_config(spec));
  } else if (f == "unet") {
    m = describe_unet(unet_config(spec));
  } else if (f == "amoebanet") {
    m = describe_amoebanet(spec);
  } else if (f == "vgg" || is_vgg_alias(f)) {
    m = describe_vgg(spec);
  } else if (f == "alexnet") {
    m = describe_alexnet(spec);
  } else {
    throw InputError(fmt::format(
        "{}: no analytic descriptor for model family \"{}\" (known: vit, bert, gpt2, t5, resnet, "
        "resnet20, ..., mlp, unet, amoebanet, vgg, vgg16, ..., alexnet)",
        spec.origin, f));
  }
  m.name = spec.to_string();
  m.family = is_resnet_alias(f) ? "resnet" : is_vgg_alias(f) ? "vgg" : f;
  return m;
}

ZooModel describe_model(const std::string& name, const std::string& origin) {
  return describe_model(ModelSpec::parse(name, origin));
}

std::vector<std::string> zoo_names() {
  return {"mlp",        "resnet20",    "resnet32",      "resnet44",
          "resnet56",   "resnet110",   "resnet:50",     "resnet:101",
          "resnet:152", "vit:test",    "vit:tiny",      "vit:small",
          "vit:b16",    "vit:l16",     "bert:tiny",     "bert:mini",
          "bert:small", "bert:medium", "bert:base",     "bert:large",
          "gpt2:tiny",  "gpt2:124m",   "gpt2:355m",     "gpt2:774m",
          "gpt2:1.5b",  "t5:small",    "t5:base",       "t5:large",
          "t5:3b",      "t5:11b",      "unet:B=5,C=64", "amoebanet:L=18,F=256",
          "vgg:16",     "alexnet"};
}

// ---- options -------------------------------------------------------------------------------

int64_t int_option(const ModelSpec& spec, const std::string& key, int64_t fallback,
                   int64_t minimum) {
  const long v = spec.integer(key, static_cast<long>(fallback));
  if (v < minimum) {
    throw InputError(fmt::format("{}: {}: option {} must be at least {} ({} given)", spec.origin,
                                 spec.family, key, minimum, v));
  }
  return v;
}

int64_t int_option2(const ModelSpec& spec, const std::string& key, const std::string& alias,
                    int64_t fallback) {
  if (spec.has(key) && spec.has(alias)) {
    throw InputError(
        fmt::format("{}: {}: give {} or {}, not both", spec.origin, spec.family, key, alias));
  }
  return int_option(spec, spec.has(alias) ? alias : key, fallback);
}

bool group_norm_option(const ModelSpec& spec) {
  const std::string norm = spec.has("norm") ? spec.args.at("norm") : "batch";
  if (norm != "batch" && norm != "group") {
    throw InputError(fmt::format("{}: {}: option norm must be batch or group (\"{}\" given)",
                                 spec.origin, spec.family, norm));
  }
  return norm == "group";
}

double dropout_option(const ModelSpec& spec, double fallback) {
  const double p = spec.number("dropout", fallback);
  if (!(p >= 0 && p < 1)) {
    throw InputError(fmt::format("{}: {}: option dropout must be in [0, 1) ({} given)", spec.origin,
                                 spec.family, p));
  }
  return p;
}

void require_multiple(const ModelSpec& spec, const std::string& what, int64_t value,
                      const std::string& by, int64_t divisor) {
  if (value % divisor != 0) {
    throw InputError(fmt::format("{}: {}: {} {} is not a multiple of {} {}", spec.origin,
                                 spec.family, what, value, by, divisor));
  }
}

void reject_presets(const ModelSpec& spec) {
  if (!spec.presets.empty()) {
    throw InputError(fmt::format("{}: {} takes key=value options only, got \"{}\"", spec.origin,
                                 spec.family, spec.presets.front()));
  }
}

// ---- layers --------------------------------------------------------------------------------

void LayerAcc::conv_bn(const ConvShape& c, bool relu, const std::string& name) {
  params += c.params() + 2 * c.c_out;
  flops += c.flops();
  saved += c.out_elems() * (relu ? 2 : 1);
  OpSpec conv = conv_op(name, c.c_in, c.c_out, c.k, c.h, c.w, c.stride, c.k / 2);
  if (c.kw != 0 && c.kw != c.k) {  // a k x kw kernel, "same" padding
    conv.kw = c.kw;
    conv.ow = c.out_w();
  }
  ops.push_back(conv);
  ops.push_back(elt_op(name + ".bn", EltClass::batch_norm, c.out_elems(), false, 2));
  if (relu) ops.push_back(elt_op(name + ".relu", EltClass::relu, c.out_elems()));
}

void add_loss_ops(std::vector<OpSpec>& ops, double rows, int64_t classes) {
  const double elems = rows * static_cast<double>(classes);
  ops.push_back(elt_op("loss.log_softmax", EltClass::log_softmax, elems, true));
  ops.push_back(elt_op("loss.nll", EltClass::nll, elems, true));
}

OpSpec dropout_op(const std::string& name, double elems, double p) {
  OpSpec o = elt_op(name, EltClass::dropout, elems);
  o.dropout = p;
  return o;
}

ZooLayer make_layer(std::string name, std::string kind, const LayerAcc& acc, double input_elems,
                    double output_elems) {
  ZooLayer l;
  l.name = std::move(name);
  l.kind = std::move(kind);
  l.params = acc.params;
  l.forward_flops = acc.flops;
  l.output_elems = output_elems;
  l.saved_elems = acc.saved;
  l.traffic_elems = input_elems + 2 * acc.saved;
  l.ops = acc.ops;
  return l;
}

}  // namespace pipetwin::zoo
