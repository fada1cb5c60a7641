// The README's notes of `pipetwin reproduce pipedream` (see pipedream.hpp): the assumptions, and
// per modelled row of PipeDream's Table 1 (SOSP'19) what the objective of Section 3.1 and the
// simulator make of the paper's configuration, our picks and data parallelism. The text is the
// data file's (experiments/reference/pipedream-entry.json, "assumptions" and "notes").
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim::pipedream {

namespace {

const Term& term(const Priced& p, const std::string& what) {
  for (const auto& t : p.terms) {
    if (t.what == what) return t;
  }
  throw InputError(fmt::format("reproduce pipedream: no term \"{}\" in {}", what, p.config));
}

// Why our pick and the paper's differ, with the numbers of the terms that decide it.
std::string why_different(const Data& d, const Outcome& o) {
  const double ours = o.ours.seconds.front(), papers = o.papers.seconds.front();
  const Term& c = term(o.dp, "stage 0 compute");
  const Term& w = term(o.dp, "stage 0 all-reduce");
  const TextArgs args = TextArgs(d.args)
                            .set("row", o.row.label())
                            .set("paper", o.row.config)
                            .set("ours", o.ours.config)
                            .set("ours_ms", ours * 1e3)
                            .set("ours_stages", o.ours.stages)
                            .set("ours_binding", o.ours.binding.what)
                            .set("ours_detail", o.ours.binding.detail)
                            .set("papers_stages", o.papers.stages)
                            .set("papers_ms", papers * 1e3)
                            .set("papers_over_pct", (papers / ours - 1) * 100)
                            .set("papers_binding", o.papers.binding.what)
                            .set("papers_detail", o.papers.binding.detail)
                            .set("dp_ms", o.dp.seconds.front() * 1e3)
                            .set("compute_ms", c.whole_s() * 1e3)
                            .set("compute_workers", c.workers)
                            .set("allreduce_ms", w.whole_s() * 1e3)
                            .set("allreduce_workers", w.workers)
                            .set("efficiency", o.efficiency);
  std::string out = d.notes.different(args);
  if (o.ours.partition.num_stages() == 1) {
    const double needed = papers * w.workers;
    out += d.notes.hidden_allreduce(TextArgs(args)
                                        .set("workers", w.workers)
                                        .set("needed_ms", needed * 1e3)
                                        .set("needed_ratio", needed / w.whole_s()));
  }
  return out;
}

// One configuration under both pricings, for the ranking.
struct Ranked {
  std::string config;
  double objective_s = 0, simulated_s = 0;
};

// The distinct configurations of a row: the paper's, our pick and data parallelism.
std::vector<Ranked> ranked(const Outcome& o) {
  std::vector<Ranked> out;
  for (const Priced* p : {&o.papers, &o.ours, &o.dp}) {
    if (std::none_of(out.begin(), out.end(),
                     [&](const Ranked& r) { return r.config == p->config; }))
      out.push_back({p->config, p->seconds[kObjective], p->seconds[kSimulated]});
  }
  return out;
}

// "the objective ranks 14-1-1 ahead of 15-1 (10.80 vs 11.16 ms), the simulator 15-1 (13.31 vs
// 61.99 ms)", for every pair the two pricings order differently; a configuration the simulator
// refuses (memory) is named as such.
std::vector<std::string> disagreements(const Data& d, const Outcome& o) {
  const std::vector<Ranked> r = ranked(o);
  std::vector<std::string> out;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i].simulated_s)) {
      out.push_back(d.notes.disagree_memory(
          TextArgs(d.args).set("config", r[i].config).set("ms", r[i].objective_s * 1e3)));
      continue;
    }
    for (size_t j = i + 1; j < r.size(); ++j) {
      const Ranked &a = r[i], &b = r[j];
      if (std::isnan(b.simulated_s) ||
          (a.objective_s < b.objective_s) == (a.simulated_s < b.simulated_s))
        continue;
      const Ranked &first = a.objective_s < b.objective_s ? a : b, &second = &first == &a ? b : a;
      out.push_back(
          d.notes.disagree_pair(TextArgs(d.args)
                                    .set("first", first.config)
                                    .set("second", second.config)
                                    .set("first_objective_ms", first.objective_s * 1e3)
                                    .set("second_objective_ms", second.objective_s * 1e3)
                                    .set("first_simulated_ms", first.simulated_s * 1e3)
                                    .set("second_simulated_ms", second.simulated_s * 1e3)));
    }
  }
  return out;
}

std::string ms_and_speedup(const Data& d, const Outcome& o, const Priced& p, size_t k) {
  if (std::isnan(p.seconds[k])) return p.refused[k];
  return d.notes.priced(
      TextArgs(d.args).set("ms", p.seconds[k] * 1e3).set("speedup", o.speedup(p, k)));
}

std::string planner_line(const Data& d, const Outcome& o) {
  std::string out;
  for (const auto& p : o.planner) {
    out += out.empty() ? d.notes.planner_head(d.args) : "; ";
    const TextArgs args = TextArgs(d.args).set("setting", p.setting());
    if (!p.refused.empty()) {
      out += d.notes.planner_nothing(TextArgs(args).set("refused", p.refused));
      continue;
    }
    out += d.notes.planner_pick(TextArgs(args)
                                    .set("config", p.config)
                                    .set("ms", p.seconds * 1e3)
                                    .set("speedup", o.dp.seconds[kSimulated] / p.seconds)
                                    .set("dp_ms", p.dp_seconds * 1e3));
  }
  return out;
}

// Per row: the paper's pick and speedup, ours, the simulated times and speedups over DP, and
// where the simulator and the objective rank the configurations differently.
std::string simulated_summary(const Data& d, const Outcome& o) {
  std::string out =
      d.notes.summary(TextArgs(d.args)
                          .set("row", o.row.label())
                          .set("paper", o.row.config)
                          .set("paper_speedup", o.row.speedup)
                          .set("papers", o.papers.config)
                          .set("papers_objective", ms_and_speedup(d, o, o.papers, kObjective))
                          .set("ours", o.ours.config)
                          .set("ours_objective", ms_and_speedup(d, o, o.ours, kObjective))
                          .set("dp_objective_ms", o.dp.seconds[kObjective] * 1e3)
                          .set("papers_simulated", ms_and_speedup(d, o, o.papers, kSimulated))
                          .set("ours_simulated", ms_and_speedup(d, o, o.ours, kSimulated))
                          .set("dp_simulated_ms", o.dp.seconds[kSimulated] * 1e3)
                          .set("planner", planner_line(d, o)));
  const std::vector<std::string> dis = disagreements(d, o);
  if (dis.empty()) {
    out += d.notes.agree(d.args);
  } else {
    std::string list;
    for (size_t i = 0; i < dis.size(); ++i) list += (i == 0 ? "" : "; ") + dis[i];
    out += d.notes.disagree(TextArgs(d.args).set("disagreements", list));
  }
  const PlannerPick& best = o.planner_best();
  if (o.papers.seconds[kSimulated] < best.seconds) {
    out += d.notes.paper_faster(TextArgs(d.args)
                                    .set("papers", o.papers.config)
                                    .set("papers_ms", o.papers.seconds[kSimulated] * 1e3)
                                    .set("planner_ms", best.seconds * 1e3));
  }
  return out;
}

// Borders of a hybrid whose network lower bound exceeds the objective's time for the whole
// configuration: the objective prices them over a link inside a server.
std::vector<std::string> network_notes(const Data& d, const Outcome& o) {
  std::vector<std::string> out;
  for (const Priced* p : {&o.ours, &o.papers}) {
    if (p == &o.papers && o.papers.config == o.ours.config) continue;
    for (const auto& b : p->network) {
      if (b.nic_s <= p->seconds[kObjective]) continue;
      out.push_back(d.notes.network(TextArgs(d.args)
                                        .set("row", o.row.label())
                                        .set("config", p->config)
                                        .set("border", b.priced.what)
                                        .set("border_ms", b.priced.seconds * 1e3)
                                        .set("detail", b.priced.detail)
                                        .set("remote", b.remote)
                                        .set("cycle", b.cycle)
                                        .set("nic_ms", b.nic_s * 1e3)
                                        .set("objective_ms", p->seconds[kObjective] * 1e3)
                                        .set("simulated_ms", p->seconds[kSimulated] * 1e3)));
    }
  }
  return out;
}

// The notes on the rows the entry does not model or whose cells are uncertain, and on the
// efficiencies: one line per uncertain row, per cluster GPU's source and per reason.
std::vector<std::string> setting_notes(const Data& d, const std::vector<Outcome>& outcomes) {
  std::vector<std::string> a;
  for (const auto& o : outcomes) {
    if (!o.row.uncertain.empty()) {
      a.push_back(d.notes.uncertain(
          TextArgs(d.args).set("row", o.row.label()).set("uncertain", o.row.uncertain)));
    }
  }
  std::vector<std::string> efficiencies;  // one line per cluster GPU's source
  for (const auto& o : outcomes) {
    if (o.not_modelled.empty() &&
        std::find(efficiencies.begin(), efficiencies.end(), o.efficiency) == efficiencies.end()) {
      efficiencies.push_back(o.efficiency);
      a.push_back(d.notes.efficiency(
          TextArgs(d.args).set("cluster", o.row.cluster).set("efficiency", o.efficiency)));
    }
  }
  // One line per reason, naming the rows it leaves out.
  std::vector<std::pair<std::string, std::string>> left_out;  // reason, rows
  for (const auto& o : outcomes) {
    if (o.not_modelled.empty()) continue;
    auto it = std::find_if(left_out.begin(), left_out.end(),
                           [&](const auto& r) { return r.first == o.not_modelled; });
    if (it == left_out.end()) it = left_out.insert(left_out.end(), {o.not_modelled, ""});
    it->second += (it->second.empty() ? "" : "; ") + o.row.label();
  }
  for (const auto& [reason, rows] : left_out) {
    a.push_back(d.notes.not_modelled(TextArgs(d.args).set("rows", rows).set("reason", reason)));
  }
  return a;
}

}  // namespace

std::vector<std::string> notes(const Data& data, const std::vector<Outcome>& outcomes) {
  std::vector<std::string> a;
  for (const Text& t : data.assumptions) a.push_back(t(data.args));
  for (auto& line : setting_notes(data, outcomes)) a.push_back(std::move(line));
  // Per modelled row: the simulated summary, the borders the objective misprices, and why a
  // pick of ours that differs from the paper's does.
  for (const auto& o : outcomes) {
    if (!o.not_modelled.empty()) continue;
    a.push_back(simulated_summary(data, o));
    for (auto& line : network_notes(data, o)) a.push_back(std::move(line));
    if (!o.agrees()) a.push_back(why_different(data, o));
  }
  return a;
}

}  // namespace pipetwin::sim::pipedream
