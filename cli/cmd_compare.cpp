// `pipetwin compare PREDICTED MEASURED [MEASURED...]`: prediction next to measurement
// (report/compare.hpp); several measured runs of the plan: compared with the median one, their
// spread printed beside the error.
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/commands.hpp"
#include "report/compare.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"

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

void check_kind(const Json& doc, bool timelines, const std::string& path) {
  if (is_timeline(doc) != timelines) {
    throw InputError("compare: give timelines only or metrics files only, not one of each (" +
                     path + ")");
  }
}

// The files at `paths` (of the kind every input takes), each read by `read`.
template <class Read>
auto read_documents(const std::vector<std::string>& paths, bool timelines, Read read) {
  std::vector<std::invoke_result_t<Read, const JsonView&>> out;
  for (const auto& path : paths) {
    const Json doc = load_json_file(path);
    check_kind(doc, timelines, path);
    out.push_back(read(JsonView(doc, path)));
  }
  return out;
}

void run_compare(const CompareArgs& a) {
  const Json p = load_json_file(a.predicted);
  const bool timelines = is_timeline(p);
  std::vector<Json> runs;
  for (const auto& path : a.measured) {
    runs.push_back(load_json_file(path));
    check_kind(runs.back(), timelines, path);
  }
  // The median run, the runs' spread and the predictions' (report/compare.hpp), as the report's
  // groups of runs and predictions get them (report/run_compare.hpp).
  Comparison c;
  if (timelines) {
    const Timeline tp = timeline_from_chrome_trace(JsonView(p, a.predicted));
    const double samples = a.plan.empty() ? 1 : load_plan(a.plan).batch_size;
    std::vector<Timeline> measured;
    for (size_t i = 0; i < runs.size(); ++i)
      measured.push_back(timeline_from_chrome_trace(JsonView(runs[i], a.measured[i])));
    c = compare_runs(tp, measured,
                     read_documents(a.also_predicted, true, timeline_from_chrome_trace), samples,
                     a.skip);
  } else {
    std::vector<Metrics> measured;
    for (size_t i = 0; i < runs.size(); ++i)
      measured.push_back(metrics_from_json(JsonView(runs[i], a.measured[i])));
    const Metrics predicted = metrics_from_json(JsonView(p, a.predicted));
    c = compare_runs(predicted, measured,
                     read_documents(a.also_predicted, false, metrics_from_json), a.skip);
  }
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
