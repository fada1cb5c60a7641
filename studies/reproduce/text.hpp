// Text of a reproduction entry: templates read from its data file, filled with named values.
//
// An entry's titles, notes and assumptions live in its data file (experiments/reference/<id>.json,
// studies/reproduce/entry_data.hpp) as templates in fmt's syntax with named fields: "{gpus} x
// Tesla P40 ({gpu_memory_gib:g} GiB usable)". The entry supplies the values (TextArgs): its own
// numbers, and the cluster's facts read from the hardware catalog (cluster_facts), so no figure
// of a device or link is typed twice. A template that names a field the entry does not supply,
// or is not valid fmt syntax, is a one-line InputError naming the data file and the JSON path.
// Literal braces are written doubled ("{{16, 32}}").
//
// Thread-safety: value types; Text::operator() is const and may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <variant>

#include "core/cluster.hpp"
#include "core/json_io.hpp"

namespace pipetwin::sim {

// Named values for a template.
class TextArgs {
 public:
  using Value = std::variant<int64_t, double, std::string>;

  template <class T>
  TextArgs& set(const std::string& name, const T& value) {
    if constexpr (std::is_integral_v<T>) {
      values_[name] = static_cast<int64_t>(value);
    } else if constexpr (std::is_floating_point_v<T>) {
      values_[name] = static_cast<double>(value);
    } else {
      values_[name] = std::string(value);
    }
    return *this;
  }
  // Adds every value of `other` (replacing those of the same name).
  TextArgs& merge(const TextArgs& other);
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  std::map<std::string, Value> values_;
};

// A template and where it was read ("torchgpipe.json", "assumptions[0]").
struct Text {
  std::string text;
  std::string origin;
  std::string path;

  // The template filled with `args`; InputError "<origin>: <path>: ..." naming the unknown field
  // or the syntax error.
  std::string operator()(const TextArgs& args = {}) const;
};

// The string at `node` as a template (InputError when it is not a string).
Text text_at(const JsonView& node);

// The facts of a cluster as named values, each name prefixed by `prefix`:
//   cluster                  the cluster's name ("torchgpipe-8x-p40")
//   gpus, nodes, gpus_per_node
//   gpu                      the device's catalog name ("tesla-p40")
//   gpu_memory_gib           memory_bytes / 2^30
//   gpu_tflops_float32       peak float32 FLOP/s / 1e12
//   gpu_memory_bandwidth_gbs memory bandwidth, GB/s (1e9 bytes/s)
//   intra_gbs, intra_latency_us   the intra-node link: GB/s one direction, microseconds
//   inter_gbs, inter_gbit, inter_latency_us   the inter-node link (gbit: 1e9 bits/s)
//   nics_per_node, nics_per_node_word   the topology's NICs per node (1 without a topology),
//                                       and as a word ("one") up to twelve
TextArgs cluster_facts(const Cluster& cluster, const std::string& prefix = "");

}  // namespace pipetwin::sim
