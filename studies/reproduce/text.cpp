#include "studies/reproduce/text.hpp"

#include <cctype>
#include <vector>

#include <fmt/args.h>
#include <fmt/format.h>

#include "core/cost_model.hpp"
#include "core/error.hpp"

namespace pipetwin::sim {

namespace {

// The names of the replacement fields of `text` ("{name}", "{name:spec}"), skipping "{{"; a
// positional or empty field is returned as "" so that the caller rejects it.
std::vector<std::string> field_names(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                 text[end] == '_' || text[end] == '.'))
      ++end;
    std::string name = text.substr(i + 1, end - i - 1);
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) name.clear();
    out.push_back(std::move(name));
    i = end - 1;
  }
  return out;
}

std::string number_word(int n) {
  static const char* const words[] = {"zero",  "one",   "two",  "three", "four",   "five",  "six",
                                      "seven", "eight", "nine", "ten",   "eleven", "twelve"};
  return n >= 0 && n <= 12 ? words[n] : std::to_string(n);
}

}  // namespace

TextArgs& TextArgs::merge(const TextArgs& other) {
  for (const auto& [name, value] : other.values_) values_[name] = value;
  return *this;
}

std::string Text::operator()(const TextArgs& args) const {
  auto fail = [&](const std::string& what) -> std::string {
    throw InputError(fmt::format("{}: {}: {}", origin, path.empty() ? "(top level)" : path, what));
  };
  for (const std::string& name : field_names(text)) {
    if (name.empty()) return fail("a text field needs a name, like {gpus}");
    if (args.values().count(name) == 0) {
      std::string known;
      for (const auto& [k, v] : args.values()) known += (known.empty() ? "" : ", ") + k;
      return fail(fmt::format("unknown text field {{{}}} (known: {})", name,
                              known.empty() ? "none" : known));
    }
  }
  fmt::dynamic_format_arg_store<fmt::format_context> store;
  for (const auto& arg : args.values()) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda.
    const char* name = arg.first.c_str();
    std::visit([&](const auto& v) { store.push_back(fmt::arg(name, v)); }, arg.second);
  }
  try {
    return fmt::vformat(text, store);
  } catch (const fmt::format_error& e) {
    return fail(fmt::format("bad text template: {}", e.what()));
  }
}

Text text_at(const JsonView& node) {
  return Text{node.as_string(), node.origin(), node.path()};
}

TextArgs cluster_facts(const Cluster& c, const std::string& prefix) {
  const int nics = c.topology ? c.topology->nics_per_node : 1;
  TextArgs a;
  a.set(prefix + "cluster", c.name)
      .set(prefix + "gpus", c.num_devices())
      .set(prefix + "nodes", c.nodes)
      .set(prefix + "gpus_per_node", c.devices_per_node)
      .set(prefix + "gpu", c.device.name)
      .set(prefix + "gpu_memory_gib", c.device.memory_bytes / kGiB)
      .set(prefix + "gpu_tflops_float32", c.device.flops("float32") / 1e12)
      .set(prefix + "gpu_memory_bandwidth_gbs", c.device.memory_bandwidth / 1e9)
      .set(prefix + "intra_gbs", c.intra_node.bandwidth / 1e9)
      .set(prefix + "intra_latency_us", c.intra_node.latency * 1e6)
      .set(prefix + "inter_gbs", c.inter_node.bandwidth / 1e9)
      .set(prefix + "inter_gbit", c.inter_node.bandwidth * 8 / 1e9)
      .set(prefix + "inter_latency_us", c.inter_node.latency * 1e6)
      .set(prefix + "nics_per_node", nics)
      .set(prefix + "nics_per_node_word", number_word(nics));
  return a;
}

}  // namespace pipetwin::sim
