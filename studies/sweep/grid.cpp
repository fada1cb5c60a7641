#include "studies/sweep/grid.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/precision.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::sim {

namespace {

constexpr int64_t kMaxAxisValues = 10'000'000;
constexpr int64_t kMaxPoints = 100'000'000;

std::vector<std::string> schedule_words() {
  std::vector<std::string> out;
  for (const auto& s : schedule_catalog()) out.push_back(s.name);
  return out;
}

std::vector<std::string> checkpoint_words() {
  return {"none", "except_last", "always"};
}

std::vector<std::string> dtype_words() {
  return dtype_names();
}

std::vector<std::string> optimizer_words() {
  return optimizer_names();
}

std::vector<std::string> yes_no_words() {
  return {"yes", "no"};
}

std::string show_int(int v) {
  return std::to_string(v);
}

// Canonical text of a real value: 12 significant digits, so 0.1 + 2 x 0.1 reads "0.3".
std::string real_text(double v) {
  return fmt::format("{:.12g}", v);
}

// The knob table. Adding a knob is adding an entry here (and a field to PointConfig).
std::vector<Knob> make_knobs() {
  using C = PointConfig;
  using S = const std::string&;
  std::vector<Knob> k;
  k.push_back({"model", KnobType::kWord, "model name (zoo name; no ',' in grid values)", 0, 0,
               false, nullptr, [](C& c, S t, double) { c.model = t; },
               [](const C& c) { return c.model; }});
  k.push_back({"cluster", KnobType::kWord, "cluster file or name in hardware/clusters", 0, 0, false,
               nullptr, [](C& c, S t, double) { c.cluster = t; },
               [](const C& c) { return c.cluster; }});
  k.push_back({"stages", KnobType::kInt, "pipeline length K", 1, 1e6, false, nullptr,
               [](C& c, S, double v) { c.stages = static_cast<int>(v); },
               [](const C& c) { return show_int(c.stages); }});
  k.push_back({"chunks", KnobType::kInt, "micro-batches per mini-batch M, or auto", 1, 1e6, true,
               nullptr, [](C& c, S, double v) { c.chunks = static_cast<int>(v); },
               [](const C& c) { return c.chunks > 0 ? show_int(c.chunks) : std::string("auto"); }});
  k.push_back({"schedule", KnobType::kWord, "schedule name", 0, 0, false, schedule_words,
               [](C& c, S t, double) { c.schedule = t; }, [](const C& c) { return c.schedule; }});
  k.push_back({"virtual_stages", KnobType::kInt,
               "model chunks per device v (alias v; v x K stages), or auto: the schedule's", 1,
               1024, true, nullptr,
               [](C& c, S, double v) { c.virtual_stages = static_cast<int>(v); },
               [](const C& c) {
                 return c.virtual_stages > 0 ? show_int(c.virtual_stages) : std::string("auto");
               }});
  k.push_back({"partitioner", KnobType::kWord, "partitioner name", 0, 0, false, partitioner_names,
               [](C& c, S t, double) { c.partitioner = t; },
               [](const C& c) { return c.partitioner; }});
  k.push_back({"batch", KnobType::kInt, "global batch size", 1, 1e9, false, nullptr,
               [](C& c, S, double v) { c.batch = static_cast<int>(v); },
               [](const C& c) { return c.micro_batch > 0 ? std::string() : show_int(c.batch); }});
  k.push_back(
      {"micro_batch", KnobType::kInt, "samples per micro-batch (batch = micro_batch x M x dp)", 1,
       1e9, false, nullptr, [](C& c, S, double v) { c.micro_batch = static_cast<int>(v); },
       [](const C& c) { return c.micro_batch > 0 ? show_int(c.micro_batch) : std::string(); }});
  k.push_back({"dp", KnobType::kInt, "data-parallel width", 1, 1e6, false, nullptr,
               [](C& c, S, double v) { c.dp = static_cast<int>(v); },
               [](const C& c) { return show_int(c.dp); }});
  k.push_back({"checkpoint", KnobType::kWord, "none, except_last or always", 0, 0, false,
               checkpoint_words, [](C& c, S t, double) { parse_checkpoint(t, c.checkpoint); },
               [](const C& c) { return std::string(checkpoint_name(c.checkpoint)); }});
  k.push_back({"frozen", KnobType::kInt, "leading frozen layers", 0, 1e6, false, nullptr,
               [](C& c, S, double v) { c.frozen = static_cast<int>(v); },
               [](const C& c) { return show_int(c.frozen); }});
  k.push_back({"dtype", KnobType::kWord, "training precision (float32, bfloat16, float16, ...)", 0,
               0, false, dtype_words, [](C& c, S t, double) { c.dtype = t; },
               [](const C& c) { return c.dtype; }});
  k.push_back({"optimizer", KnobType::kWord, "sgd, momentum or adam", 0, 0, false, optimizer_words,
               [](C& c, S t, double) { c.optimizer = t; }, [](const C& c) { return c.optimizer; }});
  k.push_back({"alpha", KnobType::kReal, "freeze rate: a whole elastic run per point (0: none)", 0,
               1, false, nullptr, [](C& c, S, double v) { c.alpha = v; },
               [](const C& c) { return c.alpha < 0 ? std::string() : real_text(c.alpha); }});
  k.push_back({"nics_per_node", KnobType::kInt,
               "NICs per node of the cluster's topology (a what-if; the cluster's by default)", 1,
               1024, false, nullptr,
               [](C& c, S, double v) { c.nics_per_node = static_cast<int>(v); },
               [](const C& c) { return c.nics_per_node > 0 ? show_int(c.nics_per_node) : ""; }});
  k.push_back({"p2p", KnobType::kWord,
               "yes or no: GPU-to-GPU copies direct or through host memory (a what-if)", 0, 0,
               false, yes_no_words, [](C& c, S t, double) { c.p2p = t; },
               [](const C& c) { return c.p2p; }});
  k.push_back({"tp", KnobType::kInt,
               "tensor-parallel size t: every stage on a group of t devices (vit, bert, gpt2)", 1,
               1024, false, nullptr, [](C& c, S, double v) { c.tp = static_cast<int>(v); },
               [](const C& c) { return show_int(c.tp); },
               [](const C& c) { return c.tp != 1; }});
  k.push_back({"sequence_parallel", KnobType::kWord, "yes or no: sequence parallelism (with tp > 1)",
               0, 0, false, yes_no_words,
               [](C& c, S t, double) { c.sequence_parallel = t == "yes"; },
               [](const C& c) { return std::string(c.sequence_parallel ? "yes" : "no"); },
               [](const C& c) { return c.sequence_parallel; }});
  k.push_back({"selective_recompute", KnobType::kWord,
               "yes or no: the attention core recomputed in the backward", 0, 0, false,
               yes_no_words, [](C& c, S t, double) { c.selective_recompute = t == "yes"; },
               [](const C& c) { return std::string(c.selective_recompute ? "yes" : "no"); },
               [](const C& c) { return c.selective_recompute; }});
  k.push_back({"distributed_optimizer", KnobType::kWord,
               "yes or no: optimizer state sharded over dp (ZeRO-1)", 0, 0, false, yes_no_words,
               [](C& c, S t, double) { c.distributed_optimizer = t == "yes"; },
               [](const C& c) { return std::string(c.distributed_optimizer ? "yes" : "no"); },
               [](const C& c) { return c.distributed_optimizer; }});
  return k;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  while (true) {
    const size_t end = s.find(sep, begin);
    out.push_back(trim(s.substr(begin, end == std::string_view::npos ? end : end - begin)));
    if (end == std::string_view::npos) return out;
    begin = end + 1;
  }
}

// A number of the knob's type; InputError naming the field otherwise.
double parse_number(const Knob& knob, std::string_view text) {
  double v = 0;
  bool ok = false;
  if (knob.type == KnobType::kInt) {
    long long i = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), i);
    ok = r.ec == std::errc() && r.ptr == text.data() + text.size();
    v = static_cast<double>(i);
  } else {
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    ok = r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(v);
  }
  if (!ok) {
    throw InputError(fmt::format("--grid: {}: expected {}, got \"{}\"", knob.name,
                                 knob.type == KnobType::kInt ? "an integer" : "a number", text));
  }
  return v;
}

void check_domain(const Knob& knob, double v) {
  if (v < knob.min || v > knob.max) {
    throw InputError(
        fmt::format("--grid: {}: {} is out of range {}..{}", knob.name, v, knob.min, knob.max));
  }
}

// start:stop[:step] of a numeric knob, inclusive, ascending.
void expand_range(const Knob& knob, std::string_view item, Axis& axis) {
  const auto parts = split(item, ':');
  if (parts.size() > 3 || (parts.size() == 2 && knob.type != KnobType::kInt)) {
    throw InputError(
        fmt::format("--grid: {}: bad range \"{}\" (expected start:stop:step)", knob.name, item));
  }
  const double start = parse_number(knob, parts[0]), stop = parse_number(knob, parts[1]);
  const double step = parts.size() == 3 ? parse_number(knob, parts[2]) : 1;
  if (!(step > 0)) {
    throw InputError(
        fmt::format("--grid: {}: bad range \"{}\" (step must be positive)", knob.name, item));
  }
  if (stop < start) {
    throw InputError(fmt::format("--grid: {}: bad range \"{}\" (stop {} is below start {})",
                                 knob.name, item, parts[1], parts[0]));
  }
  const double count = std::floor((stop - start) / step + 1e-9) + 1;
  if (count > kMaxAxisValues) {
    throw InputError(fmt::format("--grid: {}: range \"{}\" has {:.0f} values (at most {})",
                                 knob.name, item, count, kMaxAxisValues));
  }
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const double v = start + static_cast<double>(i) * step;
    const std::string text = knob.type == KnobType::kInt ? fmt::format("{:.0f}", v) : real_text(v);
    axis.values.push_back(text);
    axis.numbers.push_back(knob.type == KnobType::kInt ? v : std::strtod(text.c_str(), nullptr));
  }
}

void add_value(const Knob& knob, std::string_view item, Axis& axis) {
  if (item == "auto" && knob.allow_auto) {
    axis.values.emplace_back("auto");
    axis.numbers.push_back(0);
  } else if (knob.type != KnobType::kWord && item.find(':') != std::string_view::npos) {
    expand_range(knob, item, axis);
  } else if (knob.type == KnobType::kWord) {
    if (knob.words) {
      const auto known = knob.words();
      if (std::find(known.begin(), known.end(), item) == known.end()) {
        throw InputError(fmt::format("--grid: {}: unknown value \"{}\" (known: {})", knob.name,
                                     item, fmt::join(known, ", ")));
      }
    }
    axis.values.emplace_back(item);
    axis.numbers.push_back(0);
  } else {
    const double v = parse_number(knob, item);
    axis.values.push_back(knob.type == KnobType::kInt ? fmt::format("{:.0f}", v) : real_text(v));
    axis.numbers.push_back(v);
  }
}

}  // namespace

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = make_knobs();
  return table;
}

const Knob* find_knob(std::string_view name) {
  if (name == "v") name = "virtual_stages";
  for (const auto& k : knobs()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string knob_names() {
  std::vector<std::string> names;
  for (const auto& k : knobs()) names.emplace_back(k.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

Axis parse_axis(const Knob& knob, std::string_view values) {
  Axis axis;
  axis.knob = &knob;
  if (trim(values).empty()) throw InputError(fmt::format("--grid: {}: no values", knob.name));
  for (std::string_view item : split(values, ',')) {
    if (item.empty()) {
      throw InputError(fmt::format("--grid: {}: empty value in \"{}\"", knob.name, trim(values)));
    }
    add_value(knob, item, axis);
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < axis.values.size(); ++i) {
    if (!seen.insert(axis.values[i]).second) {
      throw InputError(fmt::format("--grid: {}: value {} given twice", knob.name, axis.values[i]));
    }
    if (knob.type != KnobType::kWord && axis.values[i] != "auto")
      check_domain(knob, axis.numbers[i]);
  }
  return axis;
}

Grid Grid::parse(std::string_view spec) {
  Grid g;
  g.size_ = 1;
  for (std::string_view item : split(spec, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw InputError(fmt::format("--grid: \"{}\" is not field=values", item));
    }
    const std::string_view field = trim(item.substr(0, eq));
    const Knob* knob = find_knob(field);
    if (knob == nullptr) {
      throw InputError(
          fmt::format("--grid: unknown field \"{}\" (known: {})", field, knob_names()));
    }
    if (g.axis(knob->name) != nullptr)
      throw InputError(fmt::format("--grid: field {} given twice", knob->name));
    g.axes_.push_back(parse_axis(*knob, item.substr(eq + 1)));
    const auto n = static_cast<int64_t>(g.axes_.back().values.size());
    if (g.size_ > kMaxPoints / n) {
      throw InputError(fmt::format("--grid: more than {} points; split the sweep", kMaxPoints));
    }
    g.size_ *= n;
  }
  if (g.axes_.empty()) {
    throw InputError(fmt::format("--grid: empty grid \"{}\" (give field=values;..., fields: {})",
                                 trim(spec), knob_names()));
  }
  return g;
}

const Axis* Grid::axis(std::string_view field) const {
  for (const auto& a : axes_) {
    if (field == a.knob->name) return &a;
  }
  return nullptr;
}

std::vector<int> Grid::coordinates(int64_t index) const {
  std::vector<int> c(axes_.size(), 0);
  for (size_t i = axes_.size(); i-- > 0;) {
    const auto n = static_cast<int64_t>(axes_[i].values.size());
    c[i] = static_cast<int>(index % n);
    index /= n;
  }
  return c;
}

void Grid::apply(int64_t index, PointConfig& config) const {
  const std::vector<int> c = coordinates(index);
  for (size_t i = 0; i < axes_.size(); ++i) {
    const Axis& a = axes_[i];
    const auto v = static_cast<size_t>(c[i]);
    a.knob->apply(config, a.values[v], a.numbers[v]);
  }
}

std::string Grid::to_string() const {
  std::string out;
  for (const auto& a : axes_) {
    out += fmt::format("{}{}={}", out.empty() ? "" : ";", a.knob->name, fmt::join(a.values, ","));
  }
  return out;
}

}  // namespace pipetwin::sim
