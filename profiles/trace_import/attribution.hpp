// Attribution: the pass that turns a PyTorch profiler trace into per-layer times
// (trace_import/attribute.hpp's measure_trace), shared by its two files: attribute.cpp (steps,
// layers, their order and the events' costs) and attribute_passes.cpp (forward, optimizer, loss
// and backward attribution, and what no layer claims). Internal to profiles/trace_import/.
//
// Thread-safety: one Attribution per trace, used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/trace_import/attribute.hpp"
#include "profiles/trace_import/backward_order.hpp"

namespace pipetwin::trace_import::detail {

inline constexpr int kNone = -1;
inline constexpr int kWarmUp = -2;  // in the first (warm-up) step
inline constexpr const char* kBetween = "(between operators: Python, the profiler)";
inline constexpr const char* kUnlinked = "(device work with no launch record)";

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


}  // namespace pipetwin::trace_import::detail
