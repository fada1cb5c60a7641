#include "core/schedule/data_parallel.hpp"

#include <map>

namespace pipetwin {

namespace {

std::vector<Action> with_allreduce(const std::vector<Action>& list, const PipelineShape& shape,
                                   std::vector<int32_t>& index_map) {
  std::vector<Action> out;
  out.reserve(list.size() * 2);
  // (stage, step) -> micro-batch whose weight gradients come last (Backward or BackwardWeight)
  std::map<std::pair<int, int>, int32_t> last_backward;
  for (const auto& a : list) {
    if (a.op == Op::kBackward || a.op == Op::kBackwardWeight) last_backward[{a.stage, a.step}] = a.micro_batch;
    if (a.op == Op::kOptimizerStep) {
      if (shape.gradient_copies(a.stage) < 2) {
        index_map.push_back(static_cast<int32_t>(out.size()));
        out.push_back(a);
        continue;
      }
      const size_t buckets =
          shape.buckets.empty() ? 1 : shape.buckets[static_cast<size_t>(a.stage)].size();
      auto it = last_backward.find({a.stage, a.step});
      for (size_t b = 0; b < buckets && it != last_backward.end(); ++b) {
        Action ar;
        ar.op = Op::kAllReduce;
        ar.stage = a.stage;
        ar.micro_batch = it->second;
        ar.bucket = static_cast<int32_t>(b);
        ar.step = a.step;
        out.push_back(ar);
      }
    }
    index_map.push_back(static_cast<int32_t>(out.size()));
    out.push_back(a);
  }
  return out;
}

}  // namespace

ReplicatedLists replicate_data_parallel(const std::vector<std::vector<Action>>& replica0,
                                        const PipelineShape& shape) {
  ReplicatedLists out;
  for (const auto& list : replica0) {
    out.index_map.emplace_back();
    out.devices.push_back(with_allreduce(list, shape, out.index_map.back()));
  }
  const size_t per = out.devices.size();
  for (int r = 1; r < shape.replicas; ++r) {
    for (size_t d = 0; d < per; ++d) out.devices.push_back(out.devices[d]);
  }
  return out;
}

}  // namespace pipetwin
