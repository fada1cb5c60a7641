// `pipetwin compare PREDICTED MEASURED [MEASURED...]`: prediction next to measurement
// (core/compare.hpp); several measured runs of the plan: compared with the median one, their
// spread printed beside the error.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/compare.hpp"
#include "core/error.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::cli {

namespace {

struct CompareArgs {
  std::string predicted, plan;
  std::vector<std::string> measured, also_predicted;
  int skip = 1;
};

bool is_timeline(const Json& doc) {
  return doc.is_object() && doc.contains("traceEvents");
}

// The metrics of --also-predicted's predictions.
std::vector<Metrics> also_predicted(const CompareArgs& a, bool timelines, int stages, bool async,
                                    double samples) {
  std::vector<Metrics> out;
  for (const auto& path : a.also_predicted) {
    const Json doc = load_json_file(path);
    if (is_timeline(doc) != timelines) {
      throw InputError("compare: give timelines only or metrics files only, not one of each (" +
                       path + ")");
    }
    out.push_back(timelines ? compute_metrics(timeline_from_chrome_trace(JsonView(doc, path)),
                                              stages, async, samples)
                            : metrics_from_json(JsonView(doc, path)));
  }
  return out;
}

void run_compare(const CompareArgs& a) {
  const Json p = load_json_file(a.predicted);
  const bool timelines = is_timeline(p);
  std::vector<Json> runs;
  for (const auto& path : a.measured) {
    runs.push_back(load_json_file(path));
    if (is_timeline(runs.back()) != timelines) {
      throw InputError("compare: give timelines only or metrics files only, not one of each (" +
                       path + ")");
    }
  }
  std::vector<Metrics> metrics;  // of each measured run
  std::vector<Timeline> measured;
  Timeline tp;
  int stages = 0;
  bool async = false;
  double samples = 1;
  if (timelines) {
    tp = timeline_from_chrome_trace(JsonView(p, a.predicted));
    for (const auto& e : tp.events) stages = std::max(stages, e.action.stage + 1);
    async = !tp.schedule.empty() && schedule_info(tp.schedule).asynchronous;
    if (!a.plan.empty()) samples = load_plan(a.plan).batch_size;
    for (size_t i = 0; i < runs.size(); ++i) {
      measured.push_back(timeline_from_chrome_trace(JsonView(runs[i], a.measured[i])));
      metrics.push_back(compute_metrics(measured.back(), stages, async, samples));
    }
  } else {
    for (size_t i = 0; i < runs.size(); ++i)
      metrics.push_back(metrics_from_json(JsonView(runs[i], a.measured[i])));
  }
  const Metrics predicted = timelines ? compute_metrics(tp, stages, async, samples)
                                      : metrics_from_json(JsonView(p, a.predicted));
  std::vector<Metrics> predictions{predicted};
  for (auto& m : also_predicted(a, timelines, stages, async, samples)) predictions.push_back(m);
  // The median run, the runs' spread and the predictions' (core/compare.hpp), as the report's
  // groups of runs and predictions get them (report/run_compare.hpp).
  const Repeats rep = repeats_of(metrics, predictions);
  const size_t mid = rep.median_run;
  Comparison c = timelines ? compare_timelines(tp, measured[mid], stages, async, samples, a.skip)
                           : compare_metrics(predicted, metrics[mid], a.skip);
  c.spread = rep.runs;
  c.predictions = rep.predictions;
  std::fputs(render_comparison(c).c_str(), stdout);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Put a prediction next to a measurement");
  cmd->add_option("predicted", args->predicted, "predicted timeline or metrics JSON")->required();
  cmd->add_option("measured", args->measured,
                  "measured timelines or metrics JSON: one run, or several runs of the plan "
                  "(compared with the median one, their spread shown)")
      ->required();
  cmd->add_option("--plan", args->plan, "the plan (for throughput in samples/s)");
  cmd->add_option("--also-predicted", args->also_predicted,
                  "other predictions of the same plan, from profiles measured at other times "
                  "(e.g. in turns with the runs): the error is noise where their range and the "
                  "runs' overlap");
  cmd->add_option("--skip", args->skip, "leading iterations left out of the headline (warm-up)")
      ->capture_default_str();
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace pipetwin::cli
