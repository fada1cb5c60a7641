#include "report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/schedule/generators.hpp"

namespace pipetwin {

double CompareRow::error() const {
  if (measured == 0) return predicted == 0 ? 0 : INFINITY;
  return (predicted - measured) / measured;
}

namespace {

std::vector<double> step_durations(const Metrics& m) {
  std::vector<double> d;
  for (size_t i = 0; i < m.step_end_s.size(); ++i) {
    d.push_back(m.step_end_s[i] - (i == 0 ? 0 : m.step_end_s[i - 1]));
  }
  return d;
}

void headline(Comparison& c, int skip_first) {
  std::vector<double> errors;
  for (size_t i = static_cast<size_t>(std::max(0, skip_first)); i < c.iterations.size(); ++i) {
    const double e = std::fabs(c.iterations[i].error());
    errors.push_back(e);
    if (e >= c.worst_abs_iteration_error) {
      c.worst_abs_iteration_error = e;
      c.worst_iteration = static_cast<int>(i);
    }
  }
  c.median_abs_iteration_error = median(std::move(errors));
}

}  // namespace

RunSpread run_spread(const std::vector<double>& t, size_t* median_run) {
  RunSpread s;
  if (t.empty()) return s;
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t[a] < t[b]; });
  const size_t mid = order[(order.size() - 1) / 2];
  if (median_run) *median_run = mid;
  s.runs = static_cast<int>(t.size());
  s.low_s = t[order.front()];
  s.median_s = t[mid];
  s.high_s = t[order.back()];
  return s;
}

double median_step_s(const Metrics& m) {
  return m.iteration_time_median_s > 0 ? m.iteration_time_median_s : m.iteration_time_s;
}

Repeats repeats_of(const std::vector<Metrics>& runs, const std::vector<Metrics>& predictions) {
  auto times = [](const std::vector<Metrics>& ms) {
    std::vector<double> t;
    for (const auto& m : ms) t.push_back(median_step_s(m));
    return t;
  };
  Repeats r;
  const RunSpread spread = run_spread(times(runs), &r.median_run);
  if (spread.runs > 1) r.runs = spread;
  const RunSpread p = run_spread(times(predictions), nullptr);
  if (p.runs > 1) r.predictions = p;
  return r;
}

double ranges_apart_probability(int m, int n) {
  if (m < 1 || n < 1) return 1;
  double choose = 1;  // C(m + n, m), built up as C(n + i, i) for i = 1..m
  for (int i = 1; i <= m; ++i) choose = choose * (n + i) / i;
  return std::min(1.0, 2 / choose);
}

Comparison compare_metrics(const Metrics& p, const Metrics& m, int skip_first) {
  Comparison c;
  const auto dp = step_durations(p), dm = step_durations(m);
  for (size_t i = 0; i < std::min(dp.size(), dm.size()); ++i) {
    c.iterations.push_back({fmt::format("iteration {}", i), dp[i], dm[i], "s"});
  }
  headline(c, skip_first);
  c.summary.push_back({"iteration time (steady)", p.iteration_time_s, m.iteration_time_s, "s"});
  c.summary.push_back(
      {"iteration time (median step)", p.iteration_time_median_s, m.iteration_time_median_s, "s"});
  c.summary.push_back(
      {"throughput", p.throughput_samples_per_s, m.throughput_samples_per_s, "samples/s"});
  c.summary.push_back({"bubble fraction", p.bubble_fraction, m.bubble_fraction, "fraction"});
  for (size_t d = 0; d < std::min(p.devices.size(), m.devices.size()); ++d) {
    c.summary.push_back({fmt::format("device {} utilization", d), p.devices[d].utilization,
                         m.devices[d].utilization, "fraction"});
    c.summary.push_back({fmt::format("device {} peak memory", d), p.devices[d].peak_memory_bytes,
                         m.devices[d].peak_memory_bytes, "bytes"});
  }
  return c;
}

Comparison compare_timelines(const Timeline& predicted, const Timeline& measured, int num_stages,
                             bool async, double samples_per_step, int skip_first) {
  const Metrics p = compute_metrics(predicted, num_stages, async, samples_per_step);
  const Metrics m = compute_metrics(measured, num_stages, async, samples_per_step);
  Comparison c = compare_metrics(p, m, skip_first);
  // Median duration per (stage, action kind), over the same steps as the headline: a real run's
  // first steps past the skipped one can still carry warm-up (allocator growth, first-touch page
  // faults, tens of ms on a 3 ms action), and the median keeps such outliers out as the headline's
  // median step does.
  using Key = std::pair<int, std::string>;
  auto medians = [&](const Timeline& t) {
    std::map<Key, std::vector<double>> acc;
    for (const auto& e : t.events) {
      if (e.action.step < skip_first) continue;
      acc[{e.action.stage, op_name(e.action.op)}].push_back(e.duration());
    }
    std::map<Key, double> out;
    for (auto& [key, d] : acc) out[key] = median(std::move(d));
    return out;
  };
  const auto mp = medians(predicted), mm = medians(measured);
  for (const auto& [key, v] : mp) {
    auto it = mm.find(key);
    if (it == mm.end()) continue;
    c.actions.push_back({fmt::format("stage {} {}", key.first, key.second), v, it->second, "s"});
  }
  return c;
}

namespace {

std::string value(double v, const std::string& unit) {
  if (unit == "fraction") return fmt::format("{:.1f}%", v * 100);
  if (unit == "bytes") return fmt::format("{:.1f} MiB", v / (1024.0 * 1024));
  if (unit == "samples/s") return fmt::format("{:.2f}/s", v);
  if (std::fabs(v) < 1e-3) return fmt::format("{:.1f} us", v * 1e6);
  return fmt::format("{:.3f} ms", v * 1e3);
}

std::string table(const std::vector<CompareRow>& rows) {
  size_t w = 8;
  for (const auto& r : rows) w = std::max(w, r.quantity.size());
  std::string out = fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}\n", "quantity", w, "predicted",
                                "measured", "error");
  for (const auto& r : rows) {
    const double e = r.error();
    out += fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}\n", r.quantity, w, value(r.predicted, r.unit),
                       value(r.measured, r.unit),
                       std::isfinite(e) ? fmt::format("{:+.1f}%", e * 100) : std::string("n/a"));
  }
  return out;
}

// The row the run-to-run spread is measured in: each run's median step (compare's caller), or
// the steady mean where the metrics have no median.
const CompareRow& spread_row(const Comparison& c) {
  for (const auto& r : c.summary) {
    if (r.quantity == "iteration time (median step)" && r.measured > 0) return r;
  }
  return c.summary.front();
}

}  // namespace

NoiseVerdict noise_verdict(const Comparison& c) {
  NoiseVerdict v;
  if (c.spread.runs <= 1 || c.summary.empty()) {
    v.text =
        "run-to-run spread: one measured run (give several to see how far runs of the plan "
        "land apart)";
    return v;
  }
  const RunSpread &r = c.spread, &p = c.predictions;
  v.error = spread_row(c).error();
  v.text = fmt::format("run-to-run spread: {} runs, median-step iteration time {} .. {} (median {}",
                       r.runs, value(r.low_s, "s"), value(r.high_s, "s"), value(r.median_s, "s"));
  if (p.runs > 1) {
    v.kind = NoiseVerdict::kRanges;
    v.within = p.low_s <= r.high_s && r.low_s <= p.high_s;
    v.predictions_median_error = (p.median_s - r.median_s) / r.median_s;
    v.apart_probability = ranges_apart_probability(p.runs, r.runs);
    v.text += fmt::format(
        "); {} predictions from profiles measured at different times: {} .. {} (median {}); the "
        "error {:+.1f}% ({:+.1f}% for the predictions' median) is {}; ranges of {} and {} draws "
        "of one noise are apart {:.1f}% of the time",
        p.runs, value(p.low_s, "s"), value(p.high_s, "s"), value(p.median_s, "s"), v.error * 100,
        v.predictions_median_error * 100,
        v.within ? "within the noise: the two ranges overlap"
                 : "outside the noise: the two ranges do not overlap",
        p.runs, r.runs, v.apart_probability * 100);
  } else {
    v.kind = NoiseVerdict::kRunSpread;
    const double w = r.half_width();
    v.within = std::fabs(v.error) <= w;
    v.text += fmt::format(", +-{:.1f}%); the error {:+.1f}% is {}", w * 100, v.error * 100,
                          v.within ? "within it: not told from noise" : "outside it");
  }
  return v;
}

std::string render_comparison(const Comparison& c) {
  std::string out = table(c.summary);
  if (!c.actions.empty()) out += "\n" + table(c.actions);
  if (!c.iterations.empty()) out += "\n" + table(c.iterations);
  out += fmt::format("\niteration-time error: median {:.1f}%, worst {:.1f}% (iteration {})\n",
                     c.median_abs_iteration_error * 100, c.worst_abs_iteration_error * 100,
                     c.worst_iteration);
  return out + noise_verdict(c).text + "\n";
}

Comparison compare_runs(const Timeline& predicted, const std::vector<Timeline>& measured,
                        const std::vector<Timeline>& also, double samples, int skip_first) {
  int stages = 0;
  for (const auto& e : predicted.events) stages = std::max(stages, e.action.stage + 1);
  const bool async = !predicted.schedule.empty() && schedule_info(predicted.schedule).asynchronous;
  std::vector<Metrics> runs, predictions{compute_metrics(predicted, stages, async, samples)};
  for (const auto& t : measured) runs.push_back(compute_metrics(t, stages, async, samples));
  for (const auto& t : also) predictions.push_back(compute_metrics(t, stages, async, samples));
  const Repeats rep = repeats_of(runs, predictions);
  Comparison c =
      compare_timelines(predicted, measured[rep.median_run], stages, async, samples, skip_first);
  c.spread = rep.runs;
  c.predictions = rep.predictions;
  return c;
}

Comparison compare_runs(const Metrics& predicted, const std::vector<Metrics>& measured,
                        const std::vector<Metrics>& also, int skip_first) {
  std::vector<Metrics> predictions{predicted};
  predictions.insert(predictions.end(), also.begin(), also.end());
  const Repeats rep = repeats_of(measured, predictions);
  Comparison c = compare_metrics(predicted, measured[rep.median_run], skip_first);
  c.spread = rep.runs;
  c.predictions = rep.predictions;
  return c;
}

}  // namespace pipetwin
