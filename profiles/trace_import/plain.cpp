#include "profiles/trace_import/plain.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/json_io.hpp"

namespace pipetwin::trace_import {

namespace {

constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kTorchOptimizerStep = "Optimizer.step#";
constexpr std::string_view kTorchOptimizer = "Optimizer.";  // step() and zero_grad() ranges

bool host(const TraceEvent& e) {
  return e.kind == EventKind::kHost;
}

[[noreturn]] void fail(const KinetoTrace& t, const std::string& what) {
  throw InputError(fmt::format("{}: {}", t.origin, what));
}

bool any_host(const KinetoTrace& t, std::string_view prefix) {
  return std::any_of(t.events.begin(), t.events.end(),
                     [&](const TraceEvent& e) { return host(e) && starts_with(e.name, prefix); });
}

// The host events named with `prefix` that no event so named encloses, in time order.
std::vector<size_t> outermost(const KinetoTrace& t, std::string_view prefix) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (!host(t.events[i]) || !starts_with(t.events[i].name, prefix)) continue;
    bool inner = false;
    for (int a = t.events[i].parent; a >= 0 && !inner; a = t.events[size_t(a)].parent)
      inner = starts_with(t.events[size_t(a)].name, prefix);
    if (!inner) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t a, size_t b) { return t.events[a].ts_us < t.events[b].ts_us; });
  return out;
}

// Every host event named with `prefix`, in time order (step ranges: a ProfilerStep#<n> opens in
// the Python frame of the prof.step() that closes the one before, so one may seem to nest in it).
std::vector<size_t> all_named(const KinetoTrace& t, std::string_view prefix) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (host(t.events[i]) && starts_with(t.events[i].name, prefix)) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t a, size_t b) { return t.events[a].ts_us < t.events[b].ts_us; });
  return out;
}

std::vector<double> backward_starts(const KinetoTrace& t) {
  std::vector<double> out;
  for (const auto& e : t.events) {
    if (host(e) && starts_with(e.name, kBackwardPrefix)) out.push_back(e.ts_us);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The first of the sorted `starts` in [a, b); b when none.
double first_in(const std::vector<double>& starts, double a, double b) {
  const auto it = std::lower_bound(starts.begin(), starts.end(), a);
  return it != starts.end() && *it < b ? *it : b;
}

TraceEvent range_event(const TraceEvent& first, double end_us, std::string name) {
  TraceEvent e;
  e.name = std::move(name);
  e.kind = EventKind::kHost;
  e.range = true;
  e.lane = first.lane;
  e.ts_us = first.ts_us;
  e.dur_us = end_us - first.ts_us;
  e.file_index = first.file_index;
  return e;
}

void steps_from_profiler(KinetoTrace& t, PlainReading& r) {
  for (size_t i : all_named(t, kProfilerStep)) {
    TraceEvent& e = t.events[i];
    e.name = fmt::format("{}{}", kStepPrefix, e.name.substr(kProfilerStep.size()));
    e.range = true;
  }
  r.notes.push_back(
      "steps: torch.profiler's ProfilerStep#<n> ranges (the trace has no pipetwin.step range)");
}

// Steps from the optimizer's ranges (plain.hpp): each ends where its last optimizer step ends.
void steps_from_optimizer(KinetoTrace& t, PlainReading& r) {
  const std::vector<size_t> opt = outermost(t, kTorchOptimizerStep);
  if (opt.empty()) {
    fail(t,
         "no training step: no \"pipetwin.step:<i>\", \"ProfilerStep#<n>\" or "
         "\"Optimizer.step#...\" range: call prof.step() after each step of a "
         "torch.profiler.profile with a schedule, step a torch.optim optimizer inside the "
         "profiler, or wrap each training step in record_function(\"pipetwin.step:<i>\") "
         "(python/pipetwin_trace.py does)");
  }
  const std::vector<double> backward = backward_starts(t);
  std::vector<std::pair<size_t, double>> ends;  // (first optimizer range, end) per step
  for (size_t i : opt) {
    const TraceEvent& e = t.events[i];
    if (!ends.empty() && first_in(backward, ends.back().second, e.ts_us) >= e.ts_us) {
      ends.back().second = std::max(ends.back().second, e.end_us());
      continue;
    }
    ends.emplace_back(i, e.end_us());
  }
  if (ends.size() < 2) {
    fail(t, fmt::format("only 1 training step (\"{}\" ranges with backward ops between them); at "
                        "least 2 are needed (the first is warm-up and dropped)",
                        t.events[opt.front()].name));
  }
  const int lane = t.events[ends.front().first].lane;
  double start = t.events[ends.front().first].ts_us;
  for (const auto& e : t.events) {
    if (e.lane == lane && host(e)) start = std::min(start, e.ts_us);
  }
  std::vector<TraceEvent> steps;
  for (size_t k = 0; k < ends.size(); ++k) {
    TraceEvent s =
        range_event(t.events[ends[k].first], ends[k].second, fmt::format("{}{}", kStepPrefix, k));
    s.ts_us = k == 0 ? start : ends[k - 1].second;
    s.dur_us = std::max(0.0, ends[k].second - s.ts_us);
    steps.push_back(std::move(s));
  }
  r.notes.push_back(fmt::format(
      "steps: from the end of one \"{}\" range to the end of the next (the trace has no "
      "pipetwin.step or ProfilerStep#<n> range: torch.profiler without a schedule)",
      t.events[opt.front()].name));
  add_events(t, std::move(steps));
}

// "Optimizer.step#Adam.step" -> "Adam".
std::string optimizer_class(const std::string& name) {
  const std::string rest = name.substr(kTorchOptimizerStep.size());
  return rest.substr(0, rest.find('.'));
}

void optimizer_from_torch(KinetoTrace& t, PlainReading& r) {
  if (any_host(t, kOptimizerRange)) return;
  const std::vector<size_t> opt = outermost(t, kTorchOptimizerStep);
  if (opt.empty()) return;
  const std::string name = t.events[opt.front()].name;
  const std::string cls = optimizer_class(name);
  r.optimizer = cls == "SGD" ? "sgd" : cls == "Adam" || cls == "AdamW" ? "adam" : "";
  for (size_t i : opt) {
    t.events[i].name = std::string(kOptimizerRange);
    t.events[i].range = true;
  }
  r.notes.push_back(fmt::format("optimizer step: the \"{}\" ranges{}", name,
                                cls == "SGD"          ? " (SGD: momentum is not in the trace)"
                                : r.optimizer.empty() ? " (a rule pipetwin does not model)"
                                                      : ""));
}

struct StepWindow {
  int lane = 0;
  double start = 0, end = 0;
  double forward_start = 0, backward_start = 0;
};

std::vector<StepWindow> step_windows(const KinetoTrace& t) {
  const std::vector<double> backward = backward_starts(t);
  std::vector<StepWindow> w;
  for (size_t i : all_named(t, kStepPrefix)) {
    const TraceEvent& e = t.events[i];
    const double b = first_in(backward, e.ts_us, e.end_us());
    w.push_back({e.lane, e.ts_us, e.end_us(), e.ts_us, b});
  }
  return w;
}

// The step whose window holds an event of `lane` starting at ts; -1: none.
int step_at(const std::vector<StepWindow>& w, int lane, double ts) {
  const auto it = std::upper_bound(w.begin(), w.end(), ts,
                                   [](double v, const StepWindow& s) { return v < s.start; });
  if (it == w.begin()) return -1;
  const auto k = static_cast<int>(it - w.begin()) - 1;
  return w[size_t(k)].lane == lane && ts < w[size_t(k)].end ? k : -1;
}

bool optimizer_range(const TraceEvent& e) {
  return e.range && (starts_with(e.name, kTorchOptimizer) || starts_with(e.name, kOptimizerRange));
}

// Whether event i is no forward operator of its step: it runs inside an operator or an
// optimizer/zero_grad range, or it is the tensor torch 1.13's record_function makes as a range
// opens (an aten::empty of no duration at the very start of the range: a ProfilerStep#<n>'s).
bool not_forward(const KinetoTrace& t, size_t i) {
  const TraceEvent& e = t.events[i];
  if (e.name == "aten::empty" && e.dur_us == 0 && e.parent >= 0 &&
      t.events[size_t(e.parent)].range && t.events[size_t(e.parent)].ts_us == e.ts_us)
    return true;
  for (int a = e.parent; a >= 0; a = t.events[size_t(a)].parent) {
    const TraceEvent& up = t.events[size_t(a)];
    if ((host(up) && !up.range) || optimizer_range(up)) return true;
  }
  return false;
}

// Per step, its forward operators (plain.hpp), in time order.
std::vector<std::vector<size_t>> forward_operators(const KinetoTrace& t,
                                                   std::vector<StepWindow>& w) {
  for (const auto& e : t.events) {
    if (!host(e) || !optimizer_range(e)) continue;
    const int k = step_at(w, e.lane, e.ts_us);
    if (k >= 0 && e.end_us() <= w[size_t(k)].backward_start)
      w[size_t(k)].forward_start = std::max(w[size_t(k)].forward_start, e.end_us());
  }
  std::vector<std::vector<size_t>> ops(w.size());
  for (size_t i = 0; i < t.events.size(); ++i) {
    const TraceEvent& e = t.events[i];
    if (!host(e) || e.range) continue;
    const int k = step_at(w, e.lane, e.ts_us);
    if (k < 0 || e.ts_us < w[size_t(k)].forward_start || e.ts_us >= w[size_t(k)].backward_start)
      continue;
    if (!not_forward(t, i)) ops[size_t(k)].push_back(i);
  }
  return ops;
}

std::string listed(const KinetoTrace& t, const std::vector<size_t>& ops, size_t from = 0) {
  std::vector<std::string> names;
  for (size_t i = from; i < ops.size() && names.size() < 6; ++i)
    names.push_back(t.events[ops[i]].name);
  if (ops.size() > from + names.size()) names.push_back("...");
  return fmt::format("{}", fmt::join(names, ", "));
}

// One range over ops[from..to] of a step, named as layer `name`.
TraceEvent layer_range(const KinetoTrace& t, const std::vector<size_t>& ops, size_t from, size_t to,
                       const std::string& name) {
  double end = 0;
  for (size_t i = from; i <= to; ++i) end = std::max(end, t.events[ops[i]].end_us());
  return range_event(t.events[ops[from]], end, fmt::format("{}{}", kLayerPrefix, name));
}

struct ForwardOp {
  std::string op, layer;
};

// The metadata's "forward_ops" (plain.hpp); empty: none.
std::vector<ForwardOp> metadata_forward_ops(const KinetoTrace& t) {
  std::vector<ForwardOp> out;
  if (t.metadata.is_null()) return out;
  const JsonView md(t.metadata, t.origin, "pipetwin");
  const auto fops = md.find("forward_ops");
  if (!fops) return out;
  std::vector<std::string> layers;
  if (const auto l = md.find("layers")) {
    for (const auto& entry : l->items()) layers.push_back(entry.string("name"));
  }
  for (const auto& item : fops->items()) {
    if (item.size() != 2) item.fail("expected [operator, layer]");
    ForwardOp f{item.at(size_t(0)).as_string(), item.at(size_t(1)).as_string()};
    if (!f.layer.empty() && std::find(layers.begin(), layers.end(), f.layer) == layers.end())
      item.at(size_t(1)).fail(fmt::format("\"{}\" is not one of the layers", f.layer));
    out.push_back(std::move(f));
  }
  if (out.empty()) fops->fail("no operators");
  return out;
}

// Where the metadata's forward runs among a step's operators, if it does.
std::optional<size_t> find_run(const KinetoTrace& t, const std::vector<size_t>& ops,
                               const std::vector<ForwardOp>& f) {
  for (size_t p = 0; p + f.size() <= ops.size(); ++p) {
    size_t i = 0;
    while (i < f.size() && t.events[ops[p + i]].name == f[i].op) ++i;
    if (i == f.size()) return p;
  }
  return std::nullopt;
}

void layers_from_metadata(KinetoTrace& t, const std::vector<ForwardOp>& f, PlainReading& r) {
  std::vector<StepWindow> w = step_windows(t);
  const auto ops = forward_operators(t, w);
  std::vector<TraceEvent> ranges;
  for (size_t k = 0; k < ops.size(); ++k) {
    const auto p = find_run(t, ops[k], f);
    if (!p) {
      if (k == 0) continue;  // warm-up: not measured
      std::vector<std::string> want;
      for (size_t i = 0; i < f.size() && i < 6; ++i) want.push_back(f[i].op);
      fail(t, fmt::format("pipetwin.forward_ops: the model's forward ({} operators: {}{}) is not "
                          "one run among the forward operators of step {} ({}): a trace of "
                          "another model, or of another forward",
                          f.size(), fmt::join(want, ", "), f.size() > 6 ? ", ..." : "", k + 1,
                          listed(t, ops[k])));
    }
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i].layer.empty()) continue;
      size_t j = i;
      while (j + 1 < f.size() && f[j + 1].layer == f[i].layer) ++j;
      ranges.push_back(layer_range(t, ops[k], *p + i, *p + j, f[i].layer));
      i = j;
    }
  }
  r.notes.push_back(
      "layers: the model's children in the trace's pipetwin metadata, found by the operators of "
      "its forward (\"forward_ops\")");
  add_events(t, std::move(ranges));
}

void layers_by_count(KinetoTrace& t, int count, PlainReading& r) {
  std::vector<StepWindow> w = step_windows(t);
  const auto ops = forward_operators(t, w);
  const auto n = static_cast<size_t>(count);
  const size_t ref = ops.size() > 1 ? 1 : 0;  // the first measured step names the layers
  std::vector<std::string> names;
  std::map<std::string, int> seen;
  for (size_t l = 0; l < n && l < ops[ref].size(); ++l) {
    const std::string stem = operator_stem(t.events[ops[ref][l]].name);
    names.push_back(fmt::format("{}_{}", stem, seen[stem]++));
  }
  const auto too_few = [&](size_t k) {
    fail(t, fmt::format("--layers {}: step {} runs {} forward operators before its backward "
                        "({}), fewer than {}",
                        count, k + 1, ops[k].size(), listed(t, ops[k]), count));
  };
  if (ops[ref].size() < n && ref > 0) too_few(ref);
  std::vector<TraceEvent> ranges;
  for (size_t k = 0; k < ops.size(); ++k) {
    bool same = ops[k].size() >= n && ops[ref].size() >= n;
    for (size_t l = 0; same && l < n; ++l)
      same = t.events[ops[k][l]].name == t.events[ops[ref][l]].name;
    if (!same && k == 0) continue;  // warm-up: not measured
    if (ops[k].size() < n) too_few(k);
    for (size_t l = 0; l < n; ++l) {
      if (t.events[ops[k][l]].name != t.events[ops[ref][l]].name) {
        fail(t, fmt::format("--layers {}: forward operator {} is {} in step {} but {} in step {}: "
                            "the steps run different operators; name record_function ranges "
                            "with --layers a,b,c instead",
                            count, l + 1, t.events[ops[k][l]].name, k + 1,
                            t.events[ops[ref][l]].name, ref + 1));
      }
      ranges.push_back(layer_range(t, ops[k], l, l, names[l]));
    }
  }
  r.notes.push_back(fmt::format(
      "layers: the first {} forward operators of each step, one layer each (--layers {}: the "
      "trace has no layer ranges and no pipetwin metadata)",
      count, count));
  add_events(t, std::move(ranges));
}

void read_layers(KinetoTrace& t, const LayerSelection& sel, PlainReading& r) {
  using Mode = LayerSelection::Mode;
  if (sel.mode == Mode::kDepth || sel.mode == Mode::kNames) return;
  if (any_host(t, kLayerPrefix)) return;
  if (const auto f = metadata_forward_ops(t); !f.empty()) return layers_from_metadata(t, f, r);
  if (any_host(t, kModulePrefix)) {
    r.notes.push_back(
        "layers: the model's child modules, from the nn.Module ranges (torch.profiler "
        "with_stack=True)");
    return;
  }
  if (sel.mode == Mode::kCount) return layers_by_count(t, sel.count, r);
  fail(t,
       "no \"pipetwin.layer:<name>\" or \"nn.Module: \" range and no pipetwin metadata that "
       "names the layers: give --layers N (the first N operators of each step's forward are the "
       "layers), record with with_stack=True (torch 2.x writes nn.Module ranges), add the "
       "metadata with python/pipetwin_trace.py's annotate(), or name record_function ranges with "
       "--layers a,b,c");
}

}  // namespace

std::string operator_stem(const std::string& name) {
  const size_t colon = name.rfind("::");
  std::string stem = colon == std::string::npos ? name : name.substr(colon + 2);
  while (!stem.empty() && stem.front() == '_') stem.erase(stem.begin());
  return stem.empty() ? "op" : stem;
}

PlainReading read_plain(const KinetoTrace& trace, const LayerSelection& selection) {
  PlainReading r{trace, {}, {}};
  KinetoTrace& t = r.trace;
  if (!any_host(t, kStepPrefix)) {
    if (any_host(t, kProfilerStep)) {
      steps_from_profiler(t, r);
    } else {
      steps_from_optimizer(t, r);
    }
  }
  optimizer_from_torch(t, r);
  read_layers(t, selection, r);
  return r;
}

}  // namespace pipetwin::trace_import
