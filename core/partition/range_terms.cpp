// RangeScanner (range_terms.hpp): a range's terms as it grows, its memory at a pipeline position
// (StageMemory, stage_memory.cpp), and the leanest split.
#include "core/partition/range_terms.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>
#include <string>

#include "core/memory_walk.hpp"
#include "core/plan.hpp"
#include "core/schedule/builder.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

RangeScanner::RangeScanner(const PartitionRequest& r) : r_(r) {
  const CostModel& cm = *r.cost;
  const int L = cm.num_layers();
  const double b = r.micro_batch;
  model_input_bytes_ = cm.profile().input_bytes_per_sample * b;
  for (int l = 0; l < L; ++l) {
    const StageCost c = cm.stage_cost({l}, b);
    Layer layer{c.forward_s + c.backward_s, c.static_bytes(), c.saved_bytes, c.param_bytes, 0, {}};
    double input_grad = 0;
    bool reads_skip = false;
    for (const auto& e : cm.graph().in_edges(l)) {
      layer.in.emplace_back(e.from, e.bytes_per_sample);
      if (!cm.frozen(e.from)) input_grad += e.bytes_per_sample * b;
      reads_skip = reads_skip || e.from != l - 1;
    }
    chain_ = chain_ && !reads_skip;
    for (const auto& e : cm.graph().out_edges(l)) layer.out_bytes += e.bytes_per_sample;
    layer.workspace =
        cm.profile().layers[static_cast<size_t>(l)].forward_workspace_bytes_per_sample * b;
    layer.active = !cm.frozen(l);
    layer.backward_last = cm.layer_backward_peak(l, b, true, input_grad, reads_skip);
    layer.backward_inner = cm.layer_backward_peak(l, b, false, input_grad, reads_skip);
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
  extend_working(t, layer);
  ++t.end;
}

// CostModel::forward_working_bytes and backward_working_bytes of the range, one layer more.
// Forward: layers run in order, layer l peaking at what the layers up to it saved plus its
// workspace. Backward on a chain: layer l peaks at its layer_backward_peak less the saved
// activations of the active layers after it, already released; the last layer counts as the
// stage output. So appending n lowers every earlier layer's figure by n's saved bytes and turns
// the previous last layer into an inner one.
void RangeScanner::extend_working(RangeTerms& t, const Layer& layer) const {
  t.forward_peak = std::max(t.forward_peak, t.saved_bytes + layer.workspace);
  t.forward_ws = std::max(0.0, t.forward_peak - t.saved_bytes);
  t.forward_nograd_ws = std::max(t.forward_nograd_ws, layer.workspace);
  if (!chain_) {
    if (r_.memory == nullptr) return;
    std::vector<int> layers;
    for (int l = t.begin; l <= t.end; ++l) layers.push_back(l);
    t.backward_ws = r_.cost->backward_working_bytes(layers, r_.micro_batch);
    return;
  }
  if (t.end > t.begin) {
    const Layer& last = layers_[static_cast<size_t>(t.end - 1)];
    if (last.active) t.backward_inner = std::max(t.backward_inner, last.backward_inner);
  }
  if (layer.active) t.backward_inner -= layer.saved_bytes;
  t.backward_ws = std::max(0.0, t.backward_inner);
  if (layer.active) t.backward_ws = std::max(t.backward_ws, layer.backward_last);
}

double RangeScanner::memory(const RangeTerms& t) const {
  return t.static_bytes +
         r_.in_flight * (t.in_bytes * r_.micro_batch + t.model_input_bytes + t.saved_bytes);
}

double RangeScanner::memory(const RangeTerms& t, int stage, int num_stages) const {
  if (r_.memory == nullptr) return memory(t);
  return r_.memory->bytes(bytes(t), stage, num_stages);
}

bool RangeScanner::fits(const RangeTerms& t, int stage, int num_stages, double limit) const {
  if (r_.memory == nullptr) return !(memory(t) > limit);
  return r_.memory->held(stage, num_stages).within(bytes(t), limit);
}

bool RangeFits::operator()(const RangeTerms& t, int stage) {
  const StageMemory* model = scan_.model();
  if (model == nullptr) return scan_.fits(t, stage, stages_, limit_);
  if (held_.empty()) {
    for (int k = 0; k < stages_; ++k) held_.push_back(&model->held(k, stages_));
    any_ = &model->any_position(stages_);
    floor_ = model->floor(stages_);
  }
  if (t.begin != begin_ || t.end != end_) {
    begin_ = t.begin;
    end_ = t.end;
    priced_ = PricedBytes(scan_.bytes(t));
    // As lower_everywhere(): the floor point, idle. NaN (no bound) compares false: the
    // positions decide one by one.
    const bool none =
        floor_ != nullptr && priced_.nonnegative &&
        priced_.bytes.static_bytes + std::max(0.0, floor_->bytes(priced_.bytes, 0.0)) > limit_;
    verdict_ = any_->upper(priced_) <= limit_ ? Verdict::kEvery
               : none                         ? Verdict::kNone
                                              : Verdict::kEach;
  }
  if (verdict_ != Verdict::kEach) return verdict_ == Verdict::kEvery;
  return held_[static_cast<size_t>(stage)]->within(priced_, limit_);
}

StageBytes RangeScanner::bytes(const RangeTerms& t) const {
  const double b = r_.micro_batch;
  StageBytes s;
  s.static_bytes = t.static_bytes;
  s.input = std::max(0.0, t.in_bytes) * b + t.model_input_bytes;
  s.saved = t.saved_bytes;
  s.param = t.param_bytes;
  s.forward_ws = t.forward_ws;
  s.forward_nograd_ws = t.forward_nograd_ws;
  s.backward_ws = t.backward_ws;
  s.received_in = std::max(0.0, t.in_bytes) * b;
  s.received_out = std::max(0.0, t.out_bytes) * b;
  return s;
}

LeanestSplit leanest_split(const RangeScanner& scan, int K) {
  LeanestSplit out;
  out.sizes = min_max_split(
      scan, K, [&](const RangeTerms& t, int stage) { return scan.memory(t, stage, K); });
  int begin = 0;
  for (int s = 0; s < static_cast<int>(out.sizes.size()); ++s) {
    RangeTerms t = scan.start(begin);
    for (int i = 0; i < out.sizes[static_cast<size_t>(s)]; ++i) scan.extend(t);
    const double need = scan.memory(t, s, K);
    if (need > out.need_bytes) {
      out.need_bytes = need;
      out.stage = s;
    }
    begin = t.end;
  }
  return out;
}

StageBytes stage_bytes(const StageCost& c, double received_in, double received_out) {
  StageBytes s;
  s.static_bytes = c.static_bytes();
  s.input = c.input_bytes;
  s.saved = c.saved_bytes;
  s.param = c.param_bytes;
  s.forward_ws = c.forward_bytes;
  s.forward_nograd_ws = c.forward_nograd_bytes;
  s.backward_ws = c.backward_bytes;
  s.received_in = received_in;
  s.received_out = received_out;
  return s;
}

}  // namespace pipetwin
