#include "report/schedule_choice.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "report/html_tables.hpp"

namespace pipetwin::report {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Where the columns the analysis reads sit in one table (-1: absent).
struct Columns {
  int schedule = -1, plan_m = -1, chunks = -1, time = -1, peak = -1, capacity = -1, fits = -1,
      error = -1, virt = -1;
  std::vector<size_t> group;  // varying inputs that split the groups
  std::vector<size_t> fixed;  // constant inputs, shown as context
};

bool is_virtual_column(const std::string& name) {
  const std::string n = lower(name);
  return n == "v" || n == "vpp" || n.find("virtual") != std::string::npos;
}

// Inputs other than the schedule, its virtual stages and M: `pipetwin sweep`'s knob columns
// (between `points` and `plan_M`), or in any other table the columns that are not metrics and
// not outcomes.
std::vector<size_t> context_inputs(const CsvTable& t, const Columns& c) {
  const int points = t.column("points"), plan_m = t.column("plan_M");
  const bool sweep_file = points >= 0 && plan_m > points;
  static const std::set<std::string> outcome = {
      "fits", "feasible", "status", "note",   "notes", "reason", "message", "error",
      "id",   "index",    "point",  "points", "row",   "rank",   "m",       "chunks"};
  std::vector<size_t> out;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const int ci = static_cast<int>(i);
    if (ci == c.schedule || ci == c.virt) continue;
    const std::string n = lower(t.columns[i]);
    if (sweep_file) {
      if (ci > points && ci < plan_m && n != "chunks") out.push_back(i);
      continue;
    }
    if (is_metric_column(n) || outcome.count(n) > 0 || n.rfind("plan_", 0) == 0 ||
        n.rfind("oom", 0) == 0) {
      continue;
    }
    out.push_back(i);
  }
  return out;
}

std::optional<Columns> find_columns(const CsvTable& t) {
  Columns c;
  c.schedule = t.column("schedule");
  c.plan_m = t.column("plan_M");
  c.chunks = t.column("chunks");
  if (c.chunks < 0) c.chunks = t.column("M");
  c.time = t.column("iteration_time_s");
  c.peak = t.column("peak_memory_max_bytes");
  c.capacity = t.column("memory_capacity_bytes");
  c.fits = t.column("fits");
  c.error = t.column("error");
  for (size_t i = 0; i < t.columns.size() && c.virt < 0; ++i) {
    if (is_virtual_column(t.columns[i])) c.virt = static_cast<int>(i);
  }
  if (c.schedule < 0 || c.time < 0 || (c.plan_m < 0 && c.chunks < 0)) return std::nullopt;
  if (t.column("rank") >= 0) return std::nullopt;  // a .best.csv: the top points only
  for (size_t i : context_inputs(t, c)) (t.distinct(i) > 1 ? c.group : c.fixed).push_back(i);
  return c;
}

std::optional<double> cell_number(const std::vector<std::string>& row, int col) {
  if (col < 0) return std::nullopt;
  return parse_number(row[static_cast<size_t>(col)]);
}

bool yes(std::string_view cell) {
  const std::string v = lower(cell);
  return v == "yes" || v == "true" || v == "1" || v == "y";
}

// The point of one row, or nullopt when the row has no M.
std::optional<SchedulePoint> read_point(const std::vector<std::string>& row, const Columns& c) {
  auto m = cell_number(row, c.plan_m);
  if (!m) m = cell_number(row, c.chunks);
  if (!m) return std::nullopt;
  SchedulePoint p;
  p.schedule = row[static_cast<size_t>(c.schedule)];
  p.m = *m;
  p.peak_bytes = cell_number(row, c.peak).value_or(-1);
  p.capacity_bytes = cell_number(row, c.capacity).value_or(-1);
  if (c.error >= 0) p.error = row[static_cast<size_t>(c.error)];
  const auto time = cell_number(row, c.time);
  p.ran = time.has_value() && p.error.empty();
  if (!p.ran) {
    if (p.error.empty()) p.error = "no iteration time";
    return p;
  }
  p.iteration_s = *time;
  if (c.fits >= 0) {
    p.fits = yes(row[static_cast<size_t>(c.fits)]);
  } else {
    p.fits = p.peak_bytes < 0 || p.capacity_bytes < 0 || p.peak_bytes <= p.capacity_bytes;
  }
  return p;
}

std::string key_of(const std::vector<std::string>& row, const std::vector<size_t>& cols,
                   const CsvTable& t) {
  std::string key;
  for (size_t c : cols) key += (key.empty() ? "" : " ") + t.columns[c] + "=" + row[c];
  return key.empty() ? "all" : key;
}

// Is `a` the better choice than `b` (both fit)? Faster, then leaner; else keep the earlier.
bool better(const SchedulePoint& a, const SchedulePoint& b) {
  const double tol = 1e-9 * std::max(a.iteration_s, b.iteration_s);
  if (std::fabs(a.iteration_s - b.iteration_s) > tol) return a.iteration_s < b.iteration_s;
  return a.peak_bytes >= 0 && b.peak_bytes >= 0 && a.peak_bytes < b.peak_bytes;
}

// The rows of one group from its points (one per candidate and M, in candidate order).
std::vector<ScheduleChoiceRow> choose(const std::vector<SchedulePoint>& points) {
  std::map<double, ScheduleChoiceRow> by_m;
  for (const auto& p : points) {
    ScheduleChoiceRow& r = by_m[p.m];
    r.m = p.m;
    if (!p.ran) {
      r.cannot_run.push_back(p);
    } else if (!p.fits) {
      r.not_fitting.push_back(p);
    } else if (!r.winner || better(p, *r.winner)) {
      if (r.winner) r.runner_up = r.winner;
      r.winner = p;
    } else if (!r.runner_up || better(p, *r.runner_up)) {
      r.runner_up = p;
    }
  }
  std::vector<ScheduleChoiceRow> rows;
  for (auto& [m, r] : by_m) {
    std::stable_sort(r.not_fitting.begin(), r.not_fitting.end(),
                     [](const auto& a, const auto& b) { return a.iteration_s < b.iteration_s; });
    if (!rows.empty() && rows.back().winner && r.winner &&
        rows.back().winner->schedule != r.winner->schedule) {
      r.flip = true;
      r.previous = rows.back().winner->schedule;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

// Candidate names: the schedule, with " v=N" for a schedule that ran with several v values (a
// v it cannot run with, e.g. zbv with v = 1, is then a copy of the point that did run).
void name_candidates(const CsvTable& t, const Columns& c, const std::vector<size_t>& rows,
                     std::vector<SchedulePoint>& points) {
  if (c.virt < 0) return;
  std::map<std::string, std::set<std::string>> values;
  const size_t v = static_cast<size_t>(c.virt);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (points[i].ran) values[points[i].schedule].insert(t.rows[rows[i]][v]);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& value = t.rows[rows[i]][v];
    if (values[points[i].schedule].size() > 1 && !value.empty()) {
      points[i].schedule += " v=" + value;
    }
  }
}

// One point per candidate and M, in candidate order then by M; of a point seen twice (chunks=auto
// resolving to a listed M, a v the schedule cannot run) the better copy stays.
void merge_points(const std::vector<SchedulePoint>& read, ScheduleChoiceGroup& g) {
  std::map<std::pair<std::string, double>, size_t> seen;
  for (const auto& p : read) {
    if (std::find(g.candidates.begin(), g.candidates.end(), p.schedule) == g.candidates.end()) {
      g.candidates.push_back(p.schedule);
    }
    if (p.capacity_bytes > 0) g.capacity_bytes = std::max(g.capacity_bytes, p.capacity_bytes);
    auto [it, added] = seen.emplace(std::make_pair(p.schedule, p.m), g.points.size());
    if (added) {
      g.points.push_back(p);
      continue;
    }
    SchedulePoint& old = g.points[it->second];
    const bool replace = (p.fits && (!old.fits || better(p, old))) || (p.ran && !old.ran);
    if (replace) old = p;
  }
  const auto pos = [&](const std::string& s) {
    return std::find(g.candidates.begin(), g.candidates.end(), s) - g.candidates.begin();
  };
  std::stable_sort(g.points.begin(), g.points.end(), [&](const auto& a, const auto& b) {
    return pos(a.schedule) != pos(b.schedule) ? pos(a.schedule) < pos(b.schedule) : a.m < b.m;
  });
}

// Candidates that ran at no M leave the table and the plot for `never_ran`, with their first
// error; so do values of M at which no candidate ran (`skipped_m`).
void drop_idle(ScheduleChoiceGroup& g) {
  std::set<std::string> ran_names;
  std::set<double> ran_m;
  for (const auto& p : g.points) {
    if (!p.ran) continue;
    ran_names.insert(p.schedule);
    ran_m.insert(p.m);
  }
  std::vector<std::string> ran;
  for (const auto& name : g.candidates) {
    if (ran_names.count(name) > 0) {
      ran.push_back(name);
      continue;
    }
    const auto first = std::find_if(g.points.begin(), g.points.end(),
                                    [&](const auto& p) { return p.schedule == name; });
    if (first != g.points.end()) g.never_ran.push_back(*first);
  }
  g.candidates = ran;
  std::vector<SchedulePoint> kept;
  std::set<double> skipped;
  for (const auto& p : g.points) {
    if (ran_names.count(p.schedule) == 0) continue;
    if (ran_m.count(p.m) > 0) {
      kept.push_back(p);
    } else if (skipped.insert(p.m).second) {
      g.skipped_m.push_back(p);
    }
  }
  std::sort(g.skipped_m.begin(), g.skipped_m.end(),
            [](const auto& a, const auto& b) { return a.m < b.m; });
  g.points = std::move(kept);
}

bool same_point(const SchedulePoint& a, const SchedulePoint& b) {
  const auto near = [](double x, double y) {
    return std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
  };
  return a.m == b.m && a.ran == b.ran && a.fits == b.fits && near(a.iteration_s, b.iteration_s) &&
         near(a.peak_bytes, b.peak_bytes);
}

// A candidate whose every point equals an earlier candidate's (interleaved-1f1b with v = 1 is
// 1f1b) is folded into it and listed in `aliases`.
void fold_aliases(ScheduleChoiceGroup& g) {
  std::map<std::string, std::vector<SchedulePoint>> of;
  for (const auto& p : g.points) of[p.schedule].push_back(p);
  std::vector<std::string> kept;
  for (const auto& name : g.candidates) {
    const auto& mine = of[name];
    const auto twin = std::find_if(kept.begin(), kept.end(), [&](const std::string& k) {
      const auto& theirs = of[k];
      return theirs.size() == mine.size() &&
             std::equal(mine.begin(), mine.end(), theirs.begin(), same_point);
    });
    if (twin == kept.end()) {
      kept.push_back(name);
    } else {
      g.aliases.push_back(name + " = " + *twin);
    }
  }
  g.candidates = kept;
  std::erase_if(g.points, [&](const SchedulePoint& p) {
    return std::find(kept.begin(), kept.end(), p.schedule) == kept.end();
  });
}

// A group from the table rows in it.
ScheduleChoiceGroup make_group(const CsvTable& t, const Columns& c, const std::string& label,
                               const std::vector<size_t>& rows) {
  ScheduleChoiceGroup g;
  g.label = label;
  std::vector<SchedulePoint> read;
  std::vector<size_t> kept;
  for (size_t r : rows) {
    if (auto p = read_point(t.rows[r], c)) {
      read.push_back(*p);
      kept.push_back(r);
    }
  }
  name_candidates(t, c, kept, read);
  merge_points(read, g);
  drop_idle(g);
  fold_aliases(g);
  g.rows = choose(g.points);
  if (!rows.empty()) {
    for (size_t f : c.fixed) {
      const std::string& v = t.rows[rows.front()][f];
      if (!v.empty()) g.fixed.push_back(t.columns[f] + "=" + v);
    }
  }
  return g;
}

}  // namespace

size_t ScheduleChoiceGroup::flips() const {
  return static_cast<size_t>(
      std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.flip; }));
}

std::string ScheduleChoiceGroup::summary() const {
  std::string out;
  size_t i = 0;
  while (i < rows.size()) {
    const std::string who = rows[i].winner ? rows[i].winner->schedule : "nothing fits";
    size_t j = i;
    while (j + 1 < rows.size() &&
           (rows[j + 1].winner ? rows[j + 1].winner->schedule : "nothing fits") == who) {
      ++j;
    }
    out += out.empty() ? "" : ", ";
    out += i == j ? fmt::format("{} at M = {}", who, fmt_m(rows[i].m))
                  : fmt::format("{} for M = {}-{}", who, fmt_m(rows[i].m), fmt_m(rows[j].m));
    i = j + 1;
  }
  return out;
}

std::vector<std::string> ScheduleChoiceGroup::left_out() const {
  std::vector<std::string> out;
  for (const auto& p : never_ran) out.push_back(p.schedule + " ran at no M: " + p.error);
  for (const auto& a : aliases) out.push_back(a + ": the same time and memory at every M");
  for (const auto& p : skipped_m) {
    out.push_back(fmt::format("M = {}: no schedule ran: {}", fmt_m(p.m), p.error));
  }
  return out;
}

std::optional<ScheduleChoice> schedule_choice(const CsvTable& t) {
  const auto c = find_columns(t);
  if (!c) return std::nullopt;
  ScheduleChoice out;
  for (size_t g : c->group) out.group_columns.push_back(t.columns[g]);
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string key = key_of(t.rows[r], c->group, t);
    auto [it, added] = rows.emplace(key, std::vector<size_t>{});
    if (added) order.push_back(key);
    it->second.push_back(r);
  }
  for (const auto& key : order) {
    ScheduleChoiceGroup g = make_group(t, *c, key, rows[key]);
    if (g.candidates.size() >= 2 && g.rows.size() >= 2) out.groups.push_back(std::move(g));
  }
  if (out.groups.empty()) return std::nullopt;
  return out;
}

std::string fmt_m(double m) {
  if (m == std::floor(m) && std::fabs(m) < 1e15) return fmt::format("{}", static_cast<long>(m));
  return fmt::format("{:g}", m);
}

std::string fmt_loss(double fast_s, double slow_s) {
  const double rel = fast_s > 0 ? (slow_s - fast_s) / fast_s : 0;
  return fmt::format("+{:.1f} % ({})", rel * 100, fmt_seconds(slow_s - fast_s));
}

}  // namespace pipetwin::report
