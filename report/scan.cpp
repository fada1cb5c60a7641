#include "report/scan.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include <fmt/format.h>

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

RunName parse_run_name(const std::string& relative_path) {
  RunName n;
  std::string s = relative_path;
  strip_suffix(s, {"json"});
  strip_suffix(s, {"timeline", "trace", "metrics", "plan"});
  if (strip_suffix(s, {"predicted", "prediction", "simulated", "sim"})) {
    n.role = kPredicted;
  } else if (strip_suffix(s, {"measured", "measurement", "run", "real"})) {
    n.role = kMeasured;
  }
  n.key = s;
  return n;
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

struct Scanner {
  const ReportOptions& options;
  ReportInputs& out;
  std::map<std::string, RunGroup> runs;
  std::map<std::string, double> plan_batch;  // run key -> batch size

  RunGroup& group(const std::string& key) {
    auto& g = runs[key];
    g.key = key;
    return g;
  }

  void warn(const std::string& rel, const std::string& why) {
    out.warnings.push_back(fmt::format("{}: {}; skipped", rel, why));
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
    auto& slot = group(n.key).timeline[role];
    if (slot) {
      warn(rel, fmt::format("run \"{}\" already has a {} timeline ({})", n.key, role_name(role),
                            slot->path));
      return;
    }
    slot = std::move(f);
  }

  void add_metrics(const std::string& rel, const Json& doc) {
    const RunName n = parse_run_name(rel);
    MetricsFile f{rel, false, metrics_from_json(JsonView(doc, rel))};
    const Role role = role_of(n, f.metrics.source);
    auto& slot = group(n.key).metrics[role];
    if (slot) {
      warn(rel, fmt::format("run \"{}\" already has {} metrics ({})", n.key, role_name(role),
                            slot->path));
      return;
    }
    slot = std::move(f);
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

// Derives metrics for timelines that came without a metrics file, and orders the runs.
void Scanner::finish() {
  for (auto& [key, g] : runs) {
    if (auto it = plan_batch.find(key); it != plan_batch.end()) g.samples_per_step = it->second;
    for (Role r : {kPredicted, kMeasured}) {
      const auto& tl = g.timeline[r];
      if (g.metrics[r] || !tl || !tl->timeline) continue;
      const double samples = g.samples_per_step > 0 ? g.samples_per_step : 1;
      g.metrics[r] = MetricsFile{tl->path, true,
                                 compute_metrics(*tl->timeline, timeline_stages(*tl->timeline),
                                                 timeline_async(*tl->timeline), samples)};
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
