#include "core/tensor_parallel.hpp"

#include <utility>

#include <fmt/format.h>

#include "core/name_table.hpp"

namespace pipetwin {

namespace {

constexpr std::pair<CollectiveKind, const char*> kCollectives[] = {
    {CollectiveKind::kAllReduce, "all_reduce"},
    {CollectiveKind::kAllGather, "all_gather"},
    {CollectiveKind::kReduceScatter, "reduce_scatter"}};

}  // namespace

const char* collective_name(CollectiveKind kind) {
  return name_in(kCollectives, kind, "?");
}

bool parse_collective(const std::string& name, CollectiveKind& out) {
  return parse_name(kCollectives, name, out);
}

std::string describe(const TensorParallel& tp) {
  std::string text = fmt::format("t={}", tp.size);
  if (tp.sequence_parallel) text += ", sequence parallel";
  if (tp.selective_recompute) text += ", selective recompute";
  return text;
}

double ring_bytes_sent(CollectiveKind kind, int t, double bytes) {
  if (t <= 1) return 0;
  const double share = static_cast<double>(t - 1) / t * bytes;
  return kind == CollectiveKind::kAllReduce ? 2 * share : share;
}

double ring_collective_s(CollectiveKind kind, int t, double bytes, double bandwidth,
                         double latency) {
  if (t <= 1) return 0;
  const double steps = kind == CollectiveKind::kAllReduce ? 2.0 * (t - 1) : t - 1.0;
  return ring_bytes_sent(kind, t, bytes) / bandwidth + steps * latency;
}

TensorParallel tensor_parallel_from_json(const JsonView& j) {
  j.allow_only({"size", "sequence_parallel", "selective_recompute"});
  TensorParallel tp;
  tp.size = j.int32_or("size", 1);
  tp.sequence_parallel = j.bool_or("sequence_parallel", false);
  tp.selective_recompute = j.bool_or("selective_recompute", false);
  if (const std::string why = tensor_parallel_refusal(tp); !why.empty()) j.fail(why);
  return tp;
}

Json tensor_parallel_to_json(const TensorParallel& tp) {
  Json j = {{"size", tp.size}};
  if (tp.sequence_parallel) j["sequence_parallel"] = true;
  if (tp.selective_recompute) j["selective_recompute"] = true;
  return j;
}

std::vector<TpCollective> collectives_from_json(const JsonView& j) {
  std::vector<TpCollective> list;
  for (const auto& c : j.items()) {
    c.allow_only({"kind", "bytes_per_sample"});
    TpCollective one;
    const std::string kind = c.string("kind");
    if (!parse_collective(kind, one.kind)) {
      c.at("kind").fail(fmt::format(
          "expected \"all_reduce\", \"all_gather\" or \"reduce_scatter\", got \"{}\"", kind));
    }
    one.bytes_per_sample = c.nonneg("bytes_per_sample");
    list.push_back(one);
  }
  return list;
}

Json collectives_to_json(const std::vector<TpCollective>& list) {
  Json j = Json::array();
  for (const auto& c : list) {
    j.push_back({{"kind", collective_name(c.kind)}, {"bytes_per_sample", c.bytes_per_sample}});
  }
  return j;
}

std::string tensor_parallel_refusal(const TensorParallel& tp) {
  if (tp.size < 1) return fmt::format("tensor-parallel size must be positive ({} given)", tp.size);
  if (tp.sequence_parallel && tp.size < 2) {
    return "sequence parallelism needs tensor parallelism (tp = 1): it splits the sequence over "
           "the tensor-parallel group";
  }
  return "";
}

}  // namespace pipetwin
