// Attribution's passes (attribution.hpp): forward and optimizer, the loss, the backward by
// sequence numbers, and what no layer claims.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/trace_import/attribution.hpp"
#include "profiles/trace_import/backward_order.hpp"

namespace pipetwin::trace_import::detail {

int Attribution::optimizer_layer(size_t i) const {
  const std::string layer = ev_[i].name.substr(kOptimizerLayerPrefix.size());
  const auto it = std::find(m_.layers.begin(), m_.layers.end(), layer);
  return it == m_.layers.end() ? kNone : static_cast<int>(it - m_.layers.begin());
}

// Per-layer optimizer ranges count only when every one names a selected layer (with --layers
// depth=2, ranges of the outer modules do not split over the inner ones: the parameter-bytes split
// stands then).
void Attribution::attribute_forward_and_optimizer() {
  accounted_.assign(n_, 0);
  bool all_named = true;
  for (size_t i = 0; i < n_; ++i) {
    if (step_of_[i] >= 0 && host(i) && starts_with(ev_[i].name, kOptimizerLayerPrefix)) {
      m_.per_layer_optimizer = true;
      all_named = all_named && optimizer_layer(i) != kNone;
    }
  }
  m_.optimizer_ranges_ignored = m_.per_layer_optimizer && !all_named;
  m_.per_layer_optimizer = m_.per_layer_optimizer && all_named;
  for (size_t i = 0; i < n_; ++i) {
    const int s = step_of_[i];
    if (s < 0 || !host(i)) continue;
    StepMeasure& sm = m_.steps[size_t(s)];
    if (range_name_[i] != kNone) {
      sm.forward_s[size_t(layer_of_name_[size_t(range_name_[i])])] += cost_[i];
      accounted_[i] = 1;
    } else if (ev_[i].name == kOptimizerRange) {
      if (!inside_named(i, kOptimizerRange)) sm.optimizer_s += cost_[i];
      accounted_[i] = 1;
    } else if (m_.per_layer_optimizer && starts_with(ev_[i].name, kOptimizerLayerPrefix)) {
      sm.optimizer_layer_s[size_t(optimizer_layer(i))] += cost_[i];
      accounted_[i] = 1;
    }
  }
}

// The loss (attribute.hpp): per measured step, the outermost operators (the ranges around them
// apart: the step's, Python frames) after the last layer's ranges end and before the step's first
// backward op starts, outside every layer range and not already accounted (the optimizer's), with
// everything inside them.
void Attribution::attribute_loss() {
  const size_t steps = m_.steps.size();
  const int last = static_cast<int>(m_.layers.size()) - 1;
  std::vector<double> last_end(steps, -1e300), first_backward(steps, 1e300);
  for (size_t i = 0; i < n_; ++i) {
    const int s = step_of_[i];
    if (s < 0 || !host(i)) continue;
    if (range_name_[i] != kNone && layer_of_name_[size_t(range_name_[i])] == last)
      last_end[size_t(s)] = std::max(last_end[size_t(s)], ev_[i].end_us());
    if (starts_with(ev_[i].name, kBackwardPrefix))
      first_backward[size_t(s)] = std::min(first_backward[size_t(s)], ev_[i].ts_us);
  }
  in_loss_.assign(n_, 0);
  for (size_t i = 0; i < n_; ++i) {  // parents come before their children
    const int s = step_of_[i], p = parent(i);
    if (s < 0 || !host(i) || accounted_[i] || enclosing_[i] != kNone) continue;
    if (p >= 0 && in_loss_[size_t(p)]) {
      in_loss_[i] = 1;
      continue;
    }
    // The outermost operators: ranges around them (the step's, Python frames) do not count.
    if (ev_[i].range || inside_operator_or_accounted(i) || ev_[i].ts_us < last_end[size_t(s)] ||
        ev_[i].ts_us >= first_backward[size_t(s)])
      continue;
    in_loss_[i] = 1;
    StepMeasure& sm = m_.steps[size_t(s)];
    sm.loss_s += cost_[i];
    if (loss_to_last_) {
      sm.forward_s[size_t(last)] += cost_[i];
      accounted_[i] = 1;
    }
  }
}

// The forward operator of a sequence number is the latest one recorded with it: an operator
// records the number the next autograd node will get (at::sequence_number::peek()), so operators
// that make no node (zero_grad's, the optimizer's) share it with the next one that does.
// The node's own event inside "evaluate_function: <Node>" ("AddBackward0") carries the node's
// number too; it is not a forward operator even where a trace's whole-microsecond timestamps put
// it at its wrapper's end, outside it (python/pipetwin_trace.py's legacy export), so nodes are
// also known by name.
void Attribution::map_sequences() {
  std::unordered_set<std::string_view> nodes;
  for (size_t i = 0; i < n_; ++i) {
    if (host(i) && starts_with(ev_[i].name, kBackwardPrefix))
      nodes.insert(std::string_view(ev_[i].name).substr(kBackwardPrefix.size()));
  }
  std::unordered_map<int64_t, size_t> latest;
  for (size_t i = 0; i < n_; ++i) {
    if (!host(i) || ev_[i].sequence < 0 || starts_with(ev_[i].name, kBackwardPrefix)) continue;
    if (inside_backward(i) || nodes.count(ev_[i].name) != 0) continue;
    const auto [it, fresh] = latest.emplace(ev_[i].sequence, i);
    if (!fresh && ev_[i].ts_us >= ev_[it->second].ts_us) it->second = i;
  }
  for (const auto& [seq, i] : latest) seq_layer_[seq] = layer_of_operator(i);
}

// The layer a forward operator ran in: its layer range's, the last layer's for the loss's (when
// attributed there), or none.
int Attribution::layer_of_operator(size_t i) const {
  const int name = enclosing_[i];
  if (name != kNone) return layer_of_name_[size_t(name)];
  return loss_to_last_ && in_loss_[i] ? static_cast<int>(m_.layers.size()) - 1 : kNone;
}

// Backward ops go to the layer of the forward operator whose sequence number they carry or, in a
// trace without sequence numbers, that made them by order (backward_order.hpp).
void Attribution::attribute_backward() {
  bool sequenced = false;
  for (size_t i = 0; i < n_ && !sequenced; ++i) {
    sequenced = step_of_[i] >= 0 && host(i) && starts_with(ev_[i].name, kBackwardPrefix) &&
                ev_[i].sequence >= 0;
  }
  std::vector<int> made_by;
  if (sequenced) {
    map_sequences();
  } else {
    made_by = match_backward_by_order(t_, step_of_);
    m_.backward_by_order = true;
  }
  // The last node run (its lane, step and layer), for the AccumulateGrad that follows it.
  int last_lane = kNone, last_step = kNone, last_layer = kNone;
  for (size_t i = 0; i < n_; ++i) {
    if (!host(i) || !starts_with(ev_[i].name, kBackwardPrefix) || inside_backward(i)) continue;
    accounted_[i] = 1;
    const int s = step_of_[i];
    if (s < 0) continue;
    ++m_.backward_ops;
    const std::string node = ev_[i].name.substr(kBackwardPrefix.size());
    const bool accumulate = node.find("AccumulateGrad") != std::string::npos;
    int layer = kNone;
    if (ev_[i].sequence >= 0) {
      const auto it = seq_layer_.find(ev_[i].sequence);
      layer = it == seq_layer_.end() ? kNone : it->second;
    } else if (!sequenced && made_by[i] >= 0) {
      layer = layer_of_operator(size_t(made_by[i]));
    } else if (accumulate && ev_[i].lane == last_lane && s == last_step) {
      layer = last_layer;
    }
    if (!accumulate) last_lane = ev_[i].lane, last_step = s, last_layer = layer;
    StepMeasure& sm = m_.steps[size_t(s)];
    if (layer >= 0) {
      sm.backward_s[size_t(layer)] += cost_[i];
      if (accumulate) sm.accumulate_s[size_t(layer)] += cost_[i];
      ++m_.backward_attributed;
    } else {
      sm.unattributed_by_name[node] += cost_[i];
    }
  }
  if (m_.backward_ops == 0) {
    fail(
        "no autograd backward op (\"autograd::engine::evaluate_function: ...\") inside a "
        "measured step: the trace must record training steps, forward and backward");
  }
}

// Names the outermost events under i that hold nothing attributed, Python frames apart
// (iteratively: traces nest deep only when they are broken, but then they may).
void Attribution::visit(size_t i, int step, StepMeasure& sm) {
  std::vector<size_t> todo = {i};
  while (!todo.empty()) {
    const size_t e = todo.back();
    todo.pop_back();
    // Another step's events may nest under this one's when a step range opens inside a Python
    // frame (torch 2.x's ProfilerStep#<n> starts inside prof.step()): they are that step's.
    if (accounted_[e] || step_of_[e] != step) continue;
    // Python frames (with_stack) are looked through: what they hold is named by its operators.
    if (holds_accounted_[e] || (ev_[e].range && ev_[e].python_id >= 0)) {
      for (auto c = children_[e].rbegin(); c != children_[e].rend(); ++c)
        todo.push_back(size_t(*c));
    } else if (cost_[e] > 0) {
      sm.unattributed_by_name[ev_[e].name] += cost_[e];
    }
  }
}

// What the step spent outside the layers, the backward ops of their operators and the optimizer:
// its total, and by name the outermost operators that hold nothing attributed.
void Attribution::account_unattributed() {
  holds_accounted_.assign(n_, 0);
  children_.assign(n_, {});
  for (size_t i = 0; i < n_; ++i) {
    if (parent(i) >= 0 && step_of_[i] >= 0) children_[size_t(parent(i))].push_back(int(i));
    if (!accounted_[i]) continue;
    for (int a = parent(i); a != kNone && !holds_accounted_[size_t(a)]; a = parent(size_t(a)))
      holds_accounted_[size_t(a)] = 1;
  }
  for (size_t s = 0; s < m_.steps.size(); ++s) {
    StepMeasure& sm = m_.steps[s];
    double layer_opt = 0, attributed = 0;
    for (double v : sm.optimizer_layer_s) layer_opt += v;
    for (double v : sm.forward_s) attributed += v;
    for (double v : sm.backward_s) attributed += v;
    if (m_.per_layer_optimizer) {
      sm.optimizer_s = std::max(sm.optimizer_s, layer_opt);
      attributed += layer_opt;
      if (sm.optimizer_s > layer_opt)
        sm.unattributed_by_name["pipetwin.optimizer (outside per-layer ranges)"] +=
            sm.optimizer_s - layer_opt;
    } else {
      attributed += sm.optimizer_s;
    }
    sm.unattributed_s = sm.step_s - attributed;
    for (int c : children_[size_t(m_.measured_steps[s])]) visit(size_t(c), int(s), sm);
    double named = 0;
    for (const auto& [name, v] : sm.unattributed_by_name) named += v;
    if (sm.unattributed_s - named > 1e-9)
      sm.unattributed_by_name[kBetween] += sm.unattributed_s - named;
  }
}

}  // namespace pipetwin::trace_import::detail
