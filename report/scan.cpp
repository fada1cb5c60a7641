#include "report/scan.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "report/compare.hpp"
#include "core/error.hpp"
#include "core/json_io.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::report {

namespace fs = std::filesystem;

const char* role_name(Role r) {
  return r == kPredicted ? "predicted" : "measured";
}

namespace {

bool strip_suffix(std::string& s, std::initializer_list<std::string_view> words) {
  for (auto w : words) {
    const std::string dot = "." + std::string(w);
    if (s.size() > dot.size() && s.compare(s.size() - dot.size(), dot.size(), dot) == 0) {
      s.resize(s.size() - dot.size());
      return true;
    }
  }
  return false;
}

}  // namespace

namespace {

// "run3", "sim-1", "measured_2" -> the role word and 3, 1, 2; "run" -> "run" and -1. False when
// the digits are not preceded by a word or "-"/"_" is not followed by digits.
bool split_number(std::string_view last, std::string_view& word, int& number) {
  size_t d = last.size();
  while (d > 0 && last[d - 1] >= '0' && last[d - 1] <= '9') --d;
  word = last.substr(0, d);
  number = -1;
  if (d == last.size()) return true;
  if (last.size() - d > 6) return false;  // not a repeat number
  number = std::stoi(std::string(last.substr(d)));
  if (!word.empty() && (word.back() == '-' || word.back() == '_')) word.remove_suffix(1);
  return !word.empty();
}

bool is_one_of(std::string_view w, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

}  // namespace

RunName parse_run_name(const std::string& relative_path) {
  RunName n;
  std::string s = relative_path;
  strip_suffix(s, {"json"});
  strip_suffix(s, {"timeline", "trace", "metrics", "plan"});
  n.key = s;
  const size_t dot = s.rfind('.');
  const size_t slash = s.rfind('/');
  if (dot == std::string::npos || dot == 0 || (slash != std::string::npos && dot < slash + 2)) {
    return n;  // no word before the last one: a bare role word is a name
  }
  std::string_view word;
  int number = -1;
  if (!split_number(std::string_view(s).substr(dot + 1), word, number)) return n;
  if (is_one_of(word, {"predicted", "prediction", "simulated", "sim"})) {
    n.role = kPredicted;
  } else if (is_one_of(word, {"measured", "measurement", "run", "real"})) {
    n.role = kMeasured;
  } else {
    return n;
  }
  n.number = number;
  n.key = s.substr(0, dot);
  return n;
}

const RunMember* RunGroup::pick(Role r) const {
  const int i = chosen[r];
  return i >= 0 && static_cast<size_t>(i) < members[r].size() ? &members[r][static_cast<size_t>(i)]
                                                              : nullptr;
}

const TimelineFile* RunGroup::timeline(Role r) const {
  const RunMember* m = pick(r);
  return m && m->timeline ? &*m->timeline : nullptr;
}

const MetricsFile* RunGroup::metrics(Role r) const {
  const RunMember* m = pick(r);
  return m && m->metrics ? &*m->metrics : nullptr;
}

int choose_member(const std::vector<RunMember>& members, bool prefer_unnumbered) {
  if (members.empty()) return -1;
  if (prefer_unnumbered) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].number < 0) return static_cast<int>(i);
    }
  }
  // The same pick as `pipetwin compare`'s (report/compare.hpp repeats_of).
  std::vector<Metrics> with;
  std::vector<size_t> index;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!members[i].metrics) continue;
    with.push_back(members[i].metrics->metrics);
    index.push_back(i);
  }
  if (with.empty()) return 0;
  return static_cast<int>(index[repeats_of(with, {}).median_run]);
}

int timeline_stages(const Timeline& t) {
  int stages = 0;
  for (const auto& e : t.events) stages = std::max(stages, e.action.stage + 1);
  return stages;
}

bool timeline_async(const Timeline& t) {
  if (t.schedule.empty()) return false;
  try {
    return schedule_info(t.schedule).asynchronous;
  } catch (const InputError&) {
    return false;  // a schedule this build does not know: measure it as synchronous
  }
}

namespace {

// A plan file's layout in one line (RunGroup::layout), read from its fields alone.
std::string layout_text(const JsonView& plan) {
  const auto stages = plan.find("stages");
  std::string text = fmt::format("{}, K={} x dp {}", plan.string_or("schedule", "?"),
                                 stages ? std::to_string(stages->size()) : std::string("?"),
                                 plan.int32_or("dp", 1));
  if (auto tp = plan.find("tensor_parallel")) {
    const int t = tp->int32_or("size", 1);
    if (t > 1) text += fmt::format(" x t={}", t);
    if (tp->bool_or("sequence_parallel", false)) text += " (sequence parallel)";
    if (tp->bool_or("selective_recompute", false)) text += ", selective recompute";
  }
  text += fmt::format(", M={}", plan.int32_or("chunks", 1));
  if (plan.bool_or("distributed_optimizer", false)) text += ", distributed optimizer";
  return text;
}

struct Scanner {
  const ReportOptions& options;
  ReportInputs& out;
  std::map<std::string, RunGroup> runs;
  std::map<std::string, double> plan_batch;  // run key -> batch size
  std::map<std::string, std::string> plan_layout;  // run key -> RunGroup::layout

  // The member of run n.key with `role` and n.number, added when new.
  RunMember& member(const RunName& n, Role role) {
    auto& g = runs[n.key];
    g.key = n.key;
    auto& list = g.members[role];
    for (auto& m : list) {
      if (m.number == n.number) return m;
    }
    list.push_back(RunMember{n.number, std::nullopt, std::nullopt});
    return list.back();
  }

  static std::string who(const RunName& n, Role role) {
    return n.number < 0 ? fmt::format("run \"{}\"", n.key)
                        : fmt::format("run \"{}\" {} {}", n.key, role_name(role), n.number);
  }

  void warn(const std::string& rel, const std::string& why) {
    out.warnings.push_back(fmt::format("{}: {}; skipped", rel, why));
  }

  // A run member's file (`what`: "a measured timeline", "predicted metrics"); a second one for
  // the same member is warned about and skipped.
  template <class File>
  void place(std::optional<File>& slot, File f, const RunName& n, Role role,
             const std::string& what) {
    if (slot) {
      warn(f.path, fmt::format("{} already has {} ({})", who(n, role), what, slot->path));
      return;
    }
    slot = std::move(f);
  }

  Role role_of(const RunName& n, const std::string& source) const {
    if (n.role) return *n.role;
    return source == "simulated" ? kPredicted : kMeasured;
  }

  void add_timeline(const std::string& rel, const Json& doc) {
    const RunName n = parse_run_name(rel);
    TimelineFile f;
    f.path = rel;
    const JsonView view(doc, rel);
    const auto other = doc.is_object() ? view.find("otherData") : std::nullopt;
    if (other && other->raw().is_object() &&
        other->string_or("format", "") == "pipetwin.timeline") {
      f.timeline = timeline_from_chrome_trace(view);
      f.gantt = gantt_from_timeline(*f.timeline, options.max_events);
    } else {
      f.gantt = gantt_from_chrome_trace(view, options.max_events);
    }
    const Role role = role_of(n, f.gantt.source);
    place(member(n, role).timeline, std::move(f), n, role,
          fmt::format("a {} timeline", role_name(role)));
  }

  void add_metrics(const std::string& rel, const Json& doc) {
    const RunName n = parse_run_name(rel);
    MetricsFile f{rel, false, metrics_from_json(JsonView(doc, rel))};
    const Role role = role_of(n, f.metrics.source);
    place(member(n, role).metrics, std::move(f), n, role,
          fmt::format("{} metrics", role_name(role)));
  }

  void add_json(const std::string& path, const std::string& rel) {
    const Json doc = load_json_file(path);
    if (doc.is_array() || (doc.is_object() && doc.contains("traceEvents"))) {
      add_timeline(rel, doc);
      return;
    }
    const JsonView view(doc, rel);
    const std::string format =
        doc.is_object() && doc.contains("format") ? view.string("format") : std::string();
    if (format == "pipetwin.metrics") {
      add_metrics(rel, doc);
    } else if (format == "pipetwin.plan") {
      plan_batch[parse_run_name(rel).key] = view.positive("batch_size");
      plan_layout[parse_run_name(rel).key] = layout_text(view);
      out.not_shown.push_back(rel);
    } else if (format.rfind("pipetwin.", 0) == 0) {
      out.not_shown.push_back(rel);
    } else {
      warn(rel, "neither a Chrome trace nor a pipetwin metrics file");
    }
  }

  void add_csv(const std::string& path, const std::string& rel) {
    CsvFile f{rel, read_csv(path), CsvKind::kTable};
    f.table.path = rel;
    if (f.table.rows.empty()) {
      warn(rel, "a header but no rows");
      return;
    }
    f.kind = classify_csv(f.table, options.sweep_x);
    out.csvs.push_back(std::move(f));
  }

  void add_file(const fs::path& p, const std::string& rel) {
    try {
      if (p.extension() == ".json") add_json(p.string(), rel);
      if (p.extension() == ".csv") add_csv(p.string(), rel);
    } catch (const InputError& e) {
      // The message names the file, by the path it was opened with: name it relative to DIR.
      std::string why = e.what();
      const std::string full = p.string();
      if (why.rfind(full, 0) == 0) why = rel + why.substr(full.size());
      if (why.rfind(rel, 0) != 0) why = rel + ": " + why;
      out.warnings.push_back(why + "; skipped");
    }
  }

  void finish();
};

// Derives metrics for timelines that came without a metrics file, orders each role's members
// (the unnumbered first, then by number), picks the pair to draw, and orders the runs.
void Scanner::finish() {
  for (auto& [key, g] : runs) {
    if (auto it = plan_batch.find(key); it != plan_batch.end()) g.samples_per_step = it->second;
    if (auto it = plan_layout.find(key); it != plan_layout.end()) g.layout = it->second;
    const double samples = g.samples_per_step > 0 ? g.samples_per_step : 1;
    for (Role r : {kPredicted, kMeasured}) {
      auto& list = g.members[r];
      std::stable_sort(list.begin(), list.end(),
                       [](const RunMember& a, const RunMember& b) { return a.number < b.number; });
      for (auto& m : list) {
        const auto& tl = m.timeline;
        if (m.metrics || !tl || !tl->timeline) continue;
        m.metrics = MetricsFile{tl->path, true,
                                compute_metrics(*tl->timeline, timeline_stages(*tl->timeline),
                                                timeline_async(*tl->timeline), samples)};
      }
      g.chosen[r] = choose_member(list, r == kPredicted);
    }
    out.runs.push_back(std::move(g));
  }
}

}  // namespace

ReportInputs scan_results(const std::string& dir, const ReportOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("{}: not a folder (give the results folder to report on)", dir));
  }
  ReportInputs out;
  out.root = dir;
  std::vector<fs::path> files;
  auto it =
      fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) throw InputError(fmt::format("{}: cannot read the folder ({})", dir, ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  Scanner s{options, out, {}, {}};
  for (const auto& p : files) s.add_file(p, fs::relative(p, dir, ec).generic_string());
  s.finish();
  return out;
}

}  // namespace pipetwin::report
