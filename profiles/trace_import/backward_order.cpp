#include "profiles/trace_import/backward_order.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "profiles/trace_import/attribute.hpp"

namespace pipetwin::trace_import {

namespace {

std::string_view after_namespace(std::string_view name) {
  const size_t colon = name.rfind("::");
  return colon == std::string_view::npos ? name : name.substr(colon + 2);
}

// Lower case, underscores dropped.
std::string squashed(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class OrderMatch {
 public:
  OrderMatch(const KinetoTrace& t, const std::vector<int>& step_of)
      : ev_(t.events), step_of_(step_of) {}

  std::vector<int> run() {
    std::vector<int> made_by(ev_.size(), -1);
    int steps = 0;
    for (int s : step_of_) steps = std::max(steps, s + 1);
    std::vector<std::vector<size_t>> events(static_cast<size_t>(steps));  // per step, in order
    for (size_t i = 0; i < ev_.size(); ++i) {
      if (step_of_[i] >= 0) events[size_t(step_of_[i])].push_back(i);
    }
    for (const auto& in_step : events) match_step(in_step, made_by);
    return made_by;
  }

 private:
  bool host(size_t i) const { return ev_[i].kind == EventKind::kHost; }
  bool backward(size_t i) const { return host(i) && starts_with(ev_[i].name, kBackwardPrefix); }
  bool inside_backward(size_t i) const {
    for (int a = ev_[i].parent; a >= 0; a = ev_[size_t(a)].parent) {
      if (backward(size_t(a))) return true;
    }
    return false;
  }
  std::string key_of_node(size_t i) const {
    return node_key(std::string_view(ev_[i].name).substr(kBackwardPrefix.size()));
  }
  // Whether an operator that encloses i bears a node's name (then i runs below autograd).
  bool inside_candidate(size_t i, const std::set<std::string>& keys) const {
    for (int a = ev_[i].parent; a >= 0; a = ev_[size_t(a)].parent) {
      const TraceEvent& e = ev_[size_t(a)];
      if (host(size_t(a)) && !e.range && keys.count(operator_key(e.name)) != 0) return true;
    }
    return false;
  }

  void match_step(const std::vector<size_t>& in_step, std::vector<int>& made_by) const {
    std::vector<size_t> nodes;
    std::set<std::string> keys;
    double first = 1e300;
    for (size_t i : in_step) {
      if (!backward(i) || inside_backward(i)) continue;
      first = std::min(first, ev_[i].ts_us);
      const std::string key = key_of_node(i);
      if (key == "accumulategrad") continue;
      nodes.push_back(i);
      keys.insert(key);
    }
    const auto by_time = [&](size_t a, size_t b) { return ev_[a].ts_us < ev_[b].ts_us; };
    std::stable_sort(nodes.begin(), nodes.end(), by_time);
    std::vector<size_t> ops;
    for (size_t i : in_step) {
      if (!host(i) || ev_[i].range || ev_[i].ts_us >= first) continue;
      if (backward(i) || inside_backward(i)) continue;
      if (keys.count(operator_key(ev_[i].name)) == 0 || inside_candidate(i, keys)) continue;
      ops.push_back(i);
    }
    std::stable_sort(ops.begin(), ops.end(), by_time);
    size_t next = 0;
    for (auto n = nodes.rbegin(); n != nodes.rend(); ++n) {
      const std::string key = key_of_node(*n);
      size_t q = next;
      while (q < ops.size() && operator_key(ev_[ops[q]].name) != key) ++q;
      if (q == ops.size()) continue;
      made_by[*n] = static_cast<int>(ops[q]);
      next = q + 1;
    }
  }

  const std::vector<TraceEvent>& ev_;
  const std::vector<int>& step_of_;
};

}  // namespace

std::string node_key(std::string_view node) {
  std::string_view n = after_namespace(node);
  while (!n.empty() && std::isdigit(static_cast<unsigned char>(n.back()))) n.remove_suffix(1);
  if (ends_with(n, "Backward")) n.remove_suffix(8);
  return squashed(n);
}

std::string operator_key(std::string_view op) {
  std::string_view n = after_namespace(op);
  if (ends_with(n, "_forward")) n.remove_suffix(8);
  return squashed(n);
}

std::vector<int> match_backward_by_order(const KinetoTrace& trace,
                                         const std::vector<int>& step_of) {
  return OrderMatch(trace, step_of).run();
}

}  // namespace pipetwin::trace_import
