#include "core/partition/range_terms.hpp"

namespace pipetwin {

RangeScanner::RangeScanner(const PartitionRequest& r) : r_(r) {
  const CostModel& cm = *r.cost;
  const int L = cm.num_layers();
  model_input_bytes_ = cm.profile().input_bytes_per_sample * r.micro_batch;
  for (int l = 0; l < L; ++l) {
    const StageCost c = cm.stage_cost({l}, r.micro_batch);
    Layer layer{c.forward_s + c.backward_s, c.static_bytes(), c.saved_bytes, c.param_bytes, 0, {}};
    for (const auto& e : cm.graph().in_edges(l)) layer.in.emplace_back(e.from, e.bytes_per_sample);
    for (const auto& e : cm.graph().out_edges(l)) layer.out_bytes += e.bytes_per_sample;
    layers_.push_back(std::move(layer));
  }
  // cut[i] = bytes of edges u -> v with u < i <= v: the out-bytes of the range [0, i).
  cut_.assign(static_cast<size_t>(L) + 1, 0);
  RangeTerms prefix = start(0);
  for (int i = 1; i <= L; ++i) {
    extend(prefix);
    cut_[static_cast<size_t>(i)] = prefix.out_bytes;
  }
}

RangeTerms RangeScanner::start(int begin) const {
  RangeTerms t;
  t.begin = t.end = begin;
  return t;
}

void RangeScanner::extend(RangeTerms& t) const {
  const Layer& layer = layers_[static_cast<size_t>(t.end)];
  t.compute_s += layer.compute_s;
  t.static_bytes += layer.static_bytes;
  t.saved_bytes += layer.saved_bytes;
  t.param_bytes += layer.param_bytes;
  if (t.end == 0) t.model_input_bytes = model_input_bytes_;
  for (const auto& [from, bytes] : layer.in) {
    if (from < t.begin) {
      t.in_bytes += bytes;
    } else {
      t.out_bytes -= bytes;  // was leaving the range, now stays inside
    }
  }
  t.out_bytes += layer.out_bytes;
  ++t.end;
}

double RangeScanner::memory(const RangeTerms& t) const {
  return t.static_bytes +
         r_.in_flight * (t.in_bytes * r_.micro_batch + t.model_input_bytes + t.saved_bytes);
}

}  // namespace pipetwin
