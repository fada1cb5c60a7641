// `pipetwin compare PREDICTED MEASURED`: prediction next to measurement (core/compare.hpp).
#include <cstdio>

#include "cli/commands.hpp"
#include "core/compare.hpp"
#include "core/error.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::cli {

namespace {

struct CompareArgs {
  std::string predicted, measured, plan;
  int skip = 1;
};

bool is_timeline(const Json& doc) { return doc.is_object() && doc.contains("traceEvents"); }

void run_compare(const CompareArgs& a) {
  const Json p = load_json_file(a.predicted), m = load_json_file(a.measured);
  if (is_timeline(p) != is_timeline(m)) {
    throw InputError("compare: give two timelines or two metrics files, not one of each");
  }
  Comparison c;
  if (is_timeline(p)) {
    const Timeline tp = timeline_from_chrome_trace(JsonView(p, a.predicted));
    const Timeline tm = timeline_from_chrome_trace(JsonView(m, a.measured));
    int stages = 0;
    for (const auto& e : tp.events) stages = std::max(stages, e.action.stage + 1);
    const bool async = !tp.schedule.empty() && schedule_info(tp.schedule).asynchronous;
    double samples = 1;
    if (!a.plan.empty()) samples = load_plan(a.plan).batch_size;
    c = compare_timelines(tp, tm, stages, async, samples, a.skip);
  } else {
    c = compare_metrics(metrics_from_json(JsonView(p, a.predicted)),
                        metrics_from_json(JsonView(m, a.measured)), a.skip);
  }
  std::fputs(render_comparison(c).c_str(), stdout);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Put a prediction next to a measurement");
  cmd->add_option("predicted", args->predicted, "predicted timeline or metrics JSON")->required();
  cmd->add_option("measured", args->measured, "measured timeline or metrics JSON")->required();
  cmd->add_option("--plan", args->plan, "the plan (for throughput in samples/s)");
  cmd->add_option("--skip", args->skip, "leading iterations left out of the headline (warm-up)")
      ->capture_default_str();
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace pipetwin::cli
