// `pipetwin calibrate`: fits the analytic roofline's per-op-kind efficiencies and per-(kind,
// pass) overheads to measured profiles (profiles/zoo/calibration.hpp), prints the fit and its error
// on the held-aside layers, and writes them as a "pipetwin.efficiency" file.
//
//   pipetwin calibrate [--profiles A.json,B.json]
//                      [--holdout N | --holdout-model M | --leave-one-model-out]
//                      [--single-overhead] [-o EFF.json]
//
// --leave-one-model-out fits once per model on the others and prints each model's error when it
// is predicted, then fits on all of them (the file written carries that report in "fit").
// --single-overhead fits the earlier model, one overhead for every task, for comparison.
//
// Without --profiles it uses every shipped measured profile of a zoo model under traces/ (they
// must share one device). The device's peak FLOP/s and bandwidth come from the catalog.
#include <cstdio>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "profiles/zoo/calibration.hpp"

namespace pipetwin::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> profiles;
  std::string holdout_model, catalog, output;
  int holdout = 0;
  bool leave_one_model_out = false, single_overhead = false;
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

std::string overheads_of(const zoo::Efficiency& e, const std::string& kind) {
  using zoo::TaskPass;
  return fmt::format("{} / {} / {}", fmt_seconds(e.overhead_for(kind, TaskPass::forward)),
                     fmt_seconds(e.overhead_for(kind, TaskPass::backward)),
                     fmt_seconds(e.overhead_for(kind, TaskPass::step)));
}

void print_fit(const zoo::CalibrationResult& r) {
  std::map<std::string, int> fitted, held;
  for (const auto& s : r.samples) ++(s.held_out ? held : fitted)[s.kind];
  const zoo::Efficiency& e = r.efficiency;
  Table t({"op kind", "efficiency", "overhead fwd / bwd / step", "fitted tasks", "held-aside tasks",
           "efficiency from"});
  for (const auto& [kind, eff] : e.compute) {
    if (!fitted.count(kind) && !held.count(kind)) continue;
    t.add({kind, fmt::format("{:.3f}", eff), overheads_of(e, kind), std::to_string(fitted[kind]),
           std::to_string(held[kind]), r.fitted_kinds.count(kind) ? "fit" : "default"});
  }
  std::fputs(t.render().c_str(), stdout);
  std::printf("memory efficiency %.3f, other kinds: efficiency %.3f, overhead %s (%d rounds)\n",
              e.memory, e.default_compute, overheads_of(e, "").c_str(), r.iterations);
  std::fputs(error_line("fit", r.fit).c_str(), stdout);
  std::fputs(error_line("held aside", r.held).c_str(), stdout);
}

void print_holdout(const zoo::HoldoutReport& report) {
  Table t({"left-out model", "tasks", "median error", "worst", "worst task"});
  for (const auto& m : report.models) {
    t.add({m.model, std::to_string(m.held.count), fmt_percent(m.held.median),
           fmt_percent(m.held.worst), m.held.worst_task});
  }
  std::fputs(t.render().c_str(), stdout);
  std::fputs(error_line("leave one model out, all models", report.overall).c_str(), stdout);
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
  o.per_kind_overheads = !a.single_overhead;
  std::optional<zoo::HoldoutReport> lomo;
  if (a.leave_one_model_out) {
    lomo = zoo::leave_one_model_out(measured, device, o, paths);
    print_holdout(*lomo);
  }
  zoo::CalibrationResult r = zoo::calibrate(measured, device, o, paths);
  if (lomo) r.efficiency.fit["leave_one_model_out"] = zoo::holdout_report_json(*lomo);
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
  auto* lomo = cmd->add_flag("--leave-one-model-out", args->leave_one_model_out,
                             "fit on all models but one and predict that one, for every model");
  every->excludes(model);
  lomo->excludes(every);
  lomo->excludes(model);
  cmd->add_flag("--single-overhead", args->single_overhead,
                "fit one overhead for every task (the model without per-kind overheads)");
  cmd->add_option("--catalog", args->catalog, "hardware catalog folder (default: hardware/)");
  cmd->add_option("-o,--output", args->output, "write the efficiencies here (pipetwin.efficiency)");
  cmd->callback([args] { run_calibrate(*args); });
}

}  // namespace pipetwin::cli
