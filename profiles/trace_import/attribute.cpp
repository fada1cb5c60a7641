#include "profiles/trace_import/attribute.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/trace_import/attribution.hpp"
#include "profiles/trace_import/backward_order.hpp"

namespace pipetwin::trace_import {

namespace detail {

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

}  // namespace detail

TraceMeasure measure_trace(const KinetoTrace& trace, const LayerSelection& selection,
                           bool loss_to_last_layer) {
  return detail::Attribution(trace, selection, loss_to_last_layer).run();
}

}  // namespace pipetwin::trace_import
