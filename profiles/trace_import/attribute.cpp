#include "profiles/trace_import/attribute.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/trace_import/backward_order.hpp"

namespace pipetwin::trace_import {

namespace {

constexpr int kNone = -1;
constexpr int kWarmUp = -2;  // in the first (warm-up) step
constexpr const char* kBetween = "(between operators: Python, the profiler)";
constexpr const char* kUnlinked = "(device work with no launch record)";

class Attribution {
 public:
  Attribution(const KinetoTrace& t, const LayerSelection& s, bool loss_to_last)
      : t_(t), ev_(t.events), sel_(s), n_(t.events.size()), loss_to_last_(loss_to_last) {}

  TraceMeasure run() {
    find_steps();
    select_layers();
    order_layers();
    m_.device_time = t_.has_device_events();
    m_.loss_to_last_layer = loss_to_last_;
    m_.steps.assign(m_.measured_steps.size(), StepMeasure{});
    for (StepMeasure& sm : m_.steps) {
      sm.forward_s.assign(m_.layers.size(), 0);
      sm.backward_s.assign(m_.layers.size(), 0);
      sm.optimizer_layer_s.assign(m_.layers.size(), 0);
      sm.accumulate_s.assign(m_.layers.size(), 0);
    }
    compute_costs();
    attribute_forward_and_optimizer();
    attribute_loss();
    attribute_backward();
    account_unattributed();
    return std::move(m_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: {}", t_.origin, what));
  }
  bool host(size_t i) const { return ev_[i].kind == EventKind::kHost; }
  int parent(size_t i) const { return ev_[i].parent; }
  bool inside_backward(size_t i) const {
    for (int a = parent(i); a != kNone; a = parent(size_t(a))) {
      if (starts_with(ev_[size_t(a)].name, kBackwardPrefix)) return true;
    }
    return false;
  }
  // Whether an operator (not a range) or an accounted event encloses i.
  bool inside_operator_or_accounted(size_t i) const {
    for (int a = parent(i); a != kNone; a = parent(size_t(a))) {
      if ((host(size_t(a)) && !ev_[size_t(a)].range) || accounted_[size_t(a)]) return true;
    }
    return false;
  }
  // Whether an enclosing event of i (not i itself) is named `name`.
  bool inside_named(size_t i, std::string_view name) const {
    for (int a = parent(i); a != kNone; a = parent(size_t(a))) {
      if (ev_[size_t(a)].name == name) return true;
    }
    return false;
  }

  void find_steps();
  void select_layers();
  void order_layers();
  void compute_costs();
  void attribute_forward_and_optimizer();
  int optimizer_layer(size_t i) const;
  void attribute_loss();
  void map_sequences();
  void attribute_backward();
  void account_unattributed();
  void visit(size_t i, int step, StepMeasure& sm);
  int layer_of_operator(size_t i) const;

  const KinetoTrace& t_;
  const std::vector<TraceEvent>& ev_;
  const LayerSelection& sel_;
  const size_t n_;
  const bool loss_to_last_;
  TraceMeasure m_;
  std::vector<char> in_loss_;       // per event: the loss's (attribute_loss)
  std::vector<int> step_of_;        // per event: measured step index, kWarmUp or kNone
  std::vector<int> range_name_;     // per event: name id if a selected layer range, else kNone
  std::vector<int> enclosing_;      // per event: name id of the selected range around it
  std::vector<std::string> names_;  // name ids
  std::vector<int> layer_of_name_;  // name id -> layer index
  std::vector<double> cost_;
  std::unordered_map<int64_t, int> seq_layer_;  // sequence number -> layer (or kNone)
  std::vector<char> accounted_, holds_accounted_;
  std::vector<std::vector<int>> children_;
};

void Attribution::find_steps() {
  std::vector<int> steps;
  for (size_t i = 0; i < n_; ++i) {
    if (host(i) && starts_with(ev_[i].name, kStepPrefix)) steps.push_back(static_cast<int>(i));
  }
  if (steps.empty()) {
    fail(
        "no \"pipetwin.step:<i>\" range: wrap each training step in "
        "record_function(\"pipetwin.step:<i>\") (python/pipetwin_trace.py does)");
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [&](int a, int b) { return ev_[size_t(a)].ts_us < ev_[size_t(b)].ts_us; });
  m_.all_steps = static_cast<int>(steps.size());
  if (steps.size() < 2) {
    fail(
        "only 1 \"pipetwin.step:\" range; at least 2 are needed (the first is warm-up and "
        "dropped)");
  }
  m_.measured_steps.assign(steps.begin() + 1, steps.end());
  step_of_.assign(n_, kNone);
  for (size_t k = 0; k < steps.size(); ++k)
    step_of_[size_t(steps[k])] = k == 0 ? kWarmUp : static_cast<int>(k) - 1;
  const std::vector<int>& by_start = steps;
  // An event inherits its parent's step (parents come first in the sorted order); an outermost
  // event belongs to the step whose time window holds its start (other threads: backward).
  for (size_t i = 0; i < n_; ++i) {
    if (step_of_[i] != kNone && starts_with(ev_[i].name, kStepPrefix)) continue;
    if (parent(i) >= 0 && step_of_[size_t(parent(i))] != kNone) {
      step_of_[i] = step_of_[size_t(parent(i))];
      continue;
    }
    const double ts = ev_[i].ts_us;
    auto it = std::upper_bound(by_start.begin(), by_start.end(), ts,
                               [&](double v, int s) { return v < ev_[size_t(s)].ts_us; });
    if (it == by_start.begin()) continue;
    const size_t s = size_t(*(it - 1));
    if (ts < ev_[s].end_us()) step_of_[i] = step_of_[s];
  }
}

// The layer ranges: "pipetwin.layer:<name>" ranges, or, in a trace that has none, the
// "nn.Module: <Class>_<k>" ranges torch.profiler records with with_stack=True (attribute.hpp).
void Attribution::select_layers() {
  range_name_.assign(n_, kNone);
  enclosing_.assign(n_, kNone);
  bool helper_ranges = false;
  for (size_t i = 0; i < n_ && !helper_ranges; ++i)
    helper_ranges = host(i) && starts_with(ev_[i].name, kLayerPrefix);
  const std::string_view prefix = helper_ranges ? kLayerPrefix : kModulePrefix;
  // Module ranges: the outermost is the model itself, so its children are depth 2.
  const int base = helper_ranges ? 0 : 1;

  std::vector<int> depth(n_, 0);  // layer ranges among the event and its ancestors
  std::map<std::string, int> ids;
  const bool by_name = sel_.mode == LayerSelection::Mode::kNames;
  int deepest = 0;
  for (size_t i = 0; i < n_; ++i) {
    const int p = parent(i);
    const int outer = p >= 0 ? depth[size_t(p)] : 0;
    enclosing_[i] = p >= 0 ? enclosing_[size_t(p)] : kNone;
    depth[i] = outer;
    if (!host(i)) continue;
    const std::string& name = ev_[i].name;
    const bool prefixed = starts_with(name, prefix);
    std::string layer = prefixed ? name.substr(prefix.size()) : name;
    const bool named =
        by_name && std::find(sel_.names.begin(), sel_.names.end(), layer) != sel_.names.end();
    if (!prefixed && !named) continue;
    if (layer.empty()) {
      fail(fmt::format("{}[{}]: a \"{}\" range without a layer name", t_.events_path,
                       ev_[i].file_index, prefix));
    }
    // Module ranges by the Python call tree where the trace has it (kineto.hpp).
    depth[i] =
        !helper_ranges && prefixed && ev_[i].module_depth > 0 ? ev_[i].module_depth : outer + 1;
    deepest = std::max(deepest, depth[i] - base);
    const int want = (sel_.mode == LayerSelection::Mode::kDepth ? sel_.depth : 1) + base;
    if (!(by_name ? named : depth[i] == want)) continue;
    if (enclosing_[i] != kNone) {
      fail(
          fmt::format("--layers: layer \"{}\" runs inside layer \"{}\"; choose ranges that do "
                      "not nest",
                      layer, names_[size_t(enclosing_[i])]));
    }
    const auto [it, fresh] = ids.emplace(layer, static_cast<int>(names_.size()));
    if (fresh) names_.push_back(layer);
    range_name_[i] = enclosing_[i] = it->second;
  }
  if (sel_.mode == LayerSelection::Mode::kDepth && deepest < sel_.depth && deepest > 0) {
    fail(fmt::format("--layers depth={}: no \"{}\" range is nested that deep (the deepest is {})",
                     sel_.depth, prefix, deepest));
  }
}

void Attribution::order_layers() {
  std::vector<std::pair<double, int>> seen;  // (start, name id) in measured steps
  std::vector<std::vector<int>> steps_of(names_.size());
  for (size_t i = 0; i < n_; ++i) {
    if (range_name_[i] == kNone || step_of_[i] < 0) continue;
    seen.emplace_back(ev_[i].ts_us, range_name_[i]);
    steps_of[size_t(range_name_[i])].push_back(step_of_[i]);
  }
  std::stable_sort(seen.begin(), seen.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  layer_of_name_.assign(names_.size(), kNone);
  for (const auto& [ts, id] : seen) {
    if (layer_of_name_[size_t(id)] != kNone) continue;
    layer_of_name_[size_t(id)] = static_cast<int>(m_.layers.size());
    m_.layers.push_back(names_[size_t(id)]);
  }
  for (const auto& name : sel_.names) {  // --layers a,b,c: every name must be there
    if (std::find(m_.layers.begin(), m_.layers.end(), name) == m_.layers.end()) {
      fail(fmt::format("--layers: no range named \"{}\" or \"{}{}\" inside a measured step", name,
                       kLayerPrefix, name));
    }
  }
  if (m_.layers.empty()) {
    fail(names_.empty() ? "no \"pipetwin.layer:<name>\" range: wrap each layer's forward in "
                          "record_function(\"pipetwin.layer:<name>\") (python/pipetwin_trace.py "
                          "does), record with with_stack=True (nn.Module ranges), or name plain "
                          "ranges with --layers a,b,c"
                        : "no selected layer range inside a measured \"pipetwin.step:\" range "
                          "(the first step is warm-up)");
  }
  if (sel_.mode == LayerSelection::Mode::kCount && m_.layers.size() != size_t(sel_.count)) {
    fail(fmt::format("--layers {}: the trace's layer ranges give {} layers ({})", sel_.count,
                     m_.layers.size(), fmt::join(m_.layers, ", ")));
  }
  const size_t measured = m_.measured_steps.size();
  for (size_t id = 0; id < names_.size(); ++id) {
    auto& s = steps_of[id];
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    if (layer_of_name_[id] != kNone && s.size() != measured) {
      fail(
          fmt::format("layer \"{}\" runs in {} of the {} measured steps; every layer must run "
                      "in every step",
                      names_[id], s.size(), measured));
    }
  }
  m_.first_range.assign(m_.layers.size(), kNone);
  for (size_t i = 0; i < n_; ++i) {  // first range of each layer in the first measured step
    if (range_name_[i] == kNone || step_of_[i] != 0) continue;
    int& first = m_.first_range[size_t(layer_of_name_[size_t(range_name_[i])])];
    if (first == kNone || ev_[i].ts_us < ev_[size_t(first)].ts_us) first = static_cast<int>(i);
  }
}

// CPU traces: an event costs its duration. GPU traces: the device time of the kernels launched
// inside it, and a step the device time launched from it (on any thread).
void Attribution::compute_costs() {
  cost_.assign(n_, 0);
  if (!m_.device_time) {
    // An operator costs its duration, a range the operators it holds (children come after
    // their parents, so a reverse walk sums a range's children before the range's parent reads
    // it). The step is its wall time: what its ranges hold outside operators is unattributed.
    for (size_t i = n_; i-- > 0;) {
      if (!ev_[i].range) cost_[i] = ev_[i].dur_us * 1e-6;
      if (parent(i) >= 0 && ev_[size_t(parent(i))].range) cost_[size_t(parent(i))] += cost_[i];
    }
    for (size_t s = 0; s < m_.measured_steps.size(); ++s)
      m_.steps[s].step_s = ev_[size_t(m_.measured_steps[s])].dur_us * 1e-6;
    return;
  }
  std::unordered_map<int64_t, int> by_correlation, by_external;
  for (size_t i = 0; i < n_; ++i) {
    if (ev_[i].kind == EventKind::kRuntime && ev_[i].correlation >= 0)
      by_correlation.emplace(ev_[i].correlation, static_cast<int>(i));
    if (host(i) && ev_[i].external_id >= 0) by_external.emplace(ev_[i].external_id, int(i));
  }
  for (size_t k = 0; k < n_; ++k) {
    if (ev_[k].kind != EventKind::kDevice) continue;
    const double d = ev_[k].dur_us * 1e-6;
    int launcher = kNone;
    if (auto it = by_correlation.find(ev_[k].correlation);
        ev_[k].correlation >= 0 && it != by_correlation.end()) {
      launcher = it->second;
    } else if (auto ext = by_external.find(ev_[k].external_id);
               ev_[k].external_id >= 0 && ext != by_external.end()) {
      launcher = ext->second;
    }
    const int step = launcher != kNone ? step_of_[size_t(launcher)] : step_of_[k];
    if (step >= 0) m_.steps[size_t(step)].step_s += d;
    if (launcher == kNone && step >= 0) m_.steps[size_t(step)].unattributed_by_name[kUnlinked] += d;
    for (int a = launcher; a != kNone; a = parent(size_t(a))) cost_[size_t(a)] += d;
  }
}

// The layer a "pipetwin.optimizer:<layer>" range names; kNone when it is not a selected one.
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

}  // namespace

TraceMeasure measure_trace(const KinetoTrace& trace, const LayerSelection& selection,
                           bool loss_to_last_layer) {
  return Attribution(trace, selection, loss_to_last_layer).run();
}

}  // namespace pipetwin::trace_import
