// `pipetwin calibrate`: fits the analytic roofline's per-op-kind efficiencies and per-task
// overhead to measured profiles (core/zoo/calibration.hpp), prints the fit and its error on the
// held-aside layers, and writes them as a "pipetwin.efficiency" file.
//
//   pipetwin calibrate [--profiles A.json,B.json] [--holdout N | --holdout-model M] [-o EFF.json]
//
// Without --profiles it uses every shipped measured profile of a zoo model under traces/ (they
// must share one device). The device's peak FLOP/s and bandwidth come from the catalog.
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/model_source.hpp"
#include "core/zoo/calibration.hpp"

namespace pipetwin::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> profiles;
  std::string holdout_model, catalog, output;
  int holdout = 0;
};

std::vector<std::string> shipped_zoo_profiles() {
  std::vector<std::string> out;
  for (const auto& s : list_shipped_profiles(default_traces_dir())) {
    if (s.source != "measured") continue;
    if (zoo::is_zoo_family(ModelSpec::parse(s.model, s.path))) out.push_back(s.path);
  }
  if (out.empty()) {
    throw InputError(
        fmt::format("calibrate: no measured profile of a zoo model under {}; give "
                    "--profiles",
                    default_traces_dir()));
  }
  return out;
}

std::string error_line(const char* what, const zoo::ErrorSummary& s) {
  if (s.count == 0) return fmt::format("{}: no tasks\n", what);
  return fmt::format("{}: {} tasks, median error {}, worst {} ({})\n", what, s.count,
                     fmt_percent(s.median), fmt_percent(s.worst), s.worst_task);
}

void print_fit(const zoo::CalibrationResult& r) {
  std::map<std::string, int> fitted, held;
  for (const auto& s : r.samples) ++(s.held_out ? held : fitted)[s.kind];
  Table t({"op kind", "efficiency", "fitted tasks", "held-aside tasks", "from"});
  for (const auto& [kind, e] : r.efficiency.compute) {
    if (!fitted.count(kind) && !held.count(kind)) continue;
    t.add({kind, fmt::format("{:.3f}", e), std::to_string(fitted[kind]), std::to_string(held[kind]),
           r.fitted_kinds.count(kind) ? "fit" : "default"});
  }
  std::fputs(t.render().c_str(), stdout);
  std::printf("memory efficiency %.3f, overhead %s per task, other kinds %.3f (%d rounds)\n",
              r.efficiency.memory, fmt_seconds(r.efficiency.overhead_s).c_str(),
              r.efficiency.default_compute, r.iterations);
  std::fputs(error_line("fit", r.fit).c_str(), stdout);
  std::fputs(error_line("held aside", r.held).c_str(), stdout);
}

void run_calibrate(const CalibrateArgs& a) {
  if (a.holdout < 0)
    throw InputError(fmt::format("--holdout must not be negative ({} given)", a.holdout));
  const std::vector<std::string> paths = a.profiles.empty() ? shipped_zoo_profiles() : a.profiles;
  std::vector<Profile> measured;
  for (const auto& p : paths) measured.push_back(load_profile(p));
  const Catalog catalog = load_catalog(a.catalog);
  const DeviceSpec& device = catalog.device(measured.front().device, paths.front() + ": device");
  zoo::CalibrationOptions o;
  o.holdout_every = a.holdout;
  o.holdout_model = a.holdout_model;
  const zoo::CalibrationResult r = zoo::calibrate(measured, device, o, paths);
  std::printf("calibrated on %s (%s) from %zu profiles\n", device.name.c_str(),
              measured.front().dtype.c_str(), measured.size());
  print_fit(r);
  if (!a.output.empty()) {
    zoo::save_efficiency(r.efficiency, a.output);
    std::printf("wrote %s\n", a.output.c_str());
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Fit the analytic cost model's efficiencies to measured profiles");
  cmd->add_option("--profiles", args->profiles,
                  "measured profiles, comma-separated (default: the shipped ones)")
      ->delimiter(',');
  auto* every = cmd->add_option("--holdout", args->holdout,
                                "hold aside every N-th layer of every profile (0: none)");
  auto* model = cmd->add_option("--holdout-model", args->holdout_model,
                                "hold aside all layers of this model");
  every->excludes(model);
  cmd->add_option("--catalog", args->catalog, "hardware catalog folder (default: hardware/)");
  cmd->add_option("-o,--output", args->output, "write the efficiencies here (pipetwin.efficiency)");
  cmd->callback([args] { run_calibrate(*args); });
}

}  // namespace pipetwin::cli
