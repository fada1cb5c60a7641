// A results folder shaped like scripts/main-job.sh's ViT part, for the report tests: a plan,
// its prediction `vit.sim.trace.json`, measured runs `vit.run<N>.trace.json` and predictions
// from later profiles `vit.sim-<N>.trace.json`, each a simulated timeline with every time scaled
// by a factor (so each one's median step is the factor times the prediction's).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/timeline.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::testing {

// 1F1B over K = 2 stages, M = 4 micro-batches of 2 samples, 6 iterations (main-job.sh's ViT plan).
inline Timeline main_job_prediction() {
  PlanSpec s;
  s.model = uniform(4, 1, 2, "act_kb=8");
  s.schedule = "1f1b";
  s.stages = 2;
  s.chunks = 4;
  s.micro_batch = 2;
  return simulate(s, 6).timeline;
}

inline Timeline scaled_timeline(Timeline t, double factor, const std::string& source) {
  t.source = source;
  for (auto& e : t.events) {
    e.start_s *= factor;
    e.end_s *= factor;
  }
  return t;
}

// Writes vit.plan.json (batch 8), vit.sim.trace.json (factor 1), vit.run<i+1> for
// `runs[i]` and vit.sim-<i+1> for `predictions[i]`, under `prefix` in `dir`.
inline void write_main_job_folder(const test::TempDir& dir, const std::vector<double>& runs,
                                  const std::vector<double>& predictions,
                                  const std::string& prefix = "vit") {
  const Timeline p = main_job_prediction();
  test::write_text(dir.file(prefix + ".plan.json"),
                   R"({"format": "pipetwin.plan", "version": 1, "batch_size": 8})");
  save_timeline(p, dir.file(prefix + ".sim.trace.json"));
  for (size_t i = 0; i < runs.size(); ++i) {
    save_timeline(scaled_timeline(p, runs[i], "measured"),
                  dir.file(fmt::format("{}.run{}.trace.json", prefix, i + 1)));
  }
  for (size_t i = 0; i < predictions.size(); ++i) {
    save_timeline(scaled_timeline(p, predictions[i], "simulated"),
                  dir.file(fmt::format("{}.sim-{}.trace.json", prefix, i + 1)));
  }
}

}  // namespace pipetwin::testing
