#include "report/run_compare.hpp"

#include <string>
#include <vector>

#include <fmt/format.h>

namespace pipetwin::report {

std::optional<RunComparison> compare_run_group(const RunGroup& g) {
  const MetricsFile* p = g.metrics(kPredicted);
  const MetricsFile* m = g.metrics(kMeasured);
  if (!p || !m) return std::nullopt;
  std::vector<Metrics> runs, predictions{p->metrics};
  for (const auto& r : g.members[kMeasured]) {
    if (r.metrics) runs.push_back(r.metrics->metrics);
  }
  for (size_t i = 0; i < g.members[kPredicted].size(); ++i) {
    const auto& q = g.members[kPredicted][i];
    if (q.metrics && static_cast<int>(i) != g.chosen[kPredicted]) {
      predictions.push_back(q.metrics->metrics);
    }
  }
  // The chosen measured member is repeats_of's median run too (choose_member, scan.cpp).
  const Repeats rep = repeats_of(runs, predictions);
  RunComparison out;
  Comparison& c = out.comparison;
  c = compare_metrics(p->metrics, m->metrics);
  const TimelineFile* tp = g.timeline(kPredicted);
  const TimelineFile* tm = g.timeline(kMeasured);
  if (tp && tm && tp->timeline && tm->timeline) {
    const double samples = g.samples_per_step > 0 ? g.samples_per_step : 1;
    c.actions = compare_timelines(*tp->timeline, *tm->timeline, timeline_stages(*tp->timeline),
                                  timeline_async(*tp->timeline), samples)
                    .actions;
  }
  c.spread = rep.runs;
  c.predictions = rep.predictions;
  out.verdict = noise_verdict(c);
  return out;
}

std::string verdict_summary(const RunComparison& c) {
  const NoiseVerdict& v = c.verdict;
  if (v.kind == NoiseVerdict::kOneRun) return "one run";
  const std::string counts = v.kind == NoiseVerdict::kRanges
                                 ? fmt::format("{} runs, {} predictions", c.comparison.spread.runs,
                                               c.comparison.predictions.runs)
                                 : fmt::format("{} runs", c.comparison.spread.runs);
  return fmt::format("{} the noise ({})", v.within ? "within" : "outside", counts);
}

}  // namespace pipetwin::report
