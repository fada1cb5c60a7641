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
//
// The op-level model (profiles/zoo/op_cost.hpp):
//   pipetwin calibrate --microbench -o OPS.json [--torch-device cpu|cuda] [--device-name NAME]
//                      [--dtype float32] [--units N] [--quick] [--profiles A.json,B.json]
// times the micro-benchmark on this machine (exec/profile/microbench.hpp; LibTorch builds only)
// and writes the fitted op parameters (profiles/zoo/op_fit.hpp). With --profiles it also reports
// the new file's per-layer error against them, as --op-model does.
//   pipetwin calibrate --op-model [--ops OPS.json] [--profiles A.json,B.json] [-o REFINED.json]
// prints the per-layer error of the op-level model against measured profiles (default: the
// shipped ones of the ops file's device), unrefined and with a layer refinement fitted leave one
// model out (profiles/zoo/op_validation.hpp); -o writes the op file with the refinement fitted
// on every model. --ops defaults to <catalog>/ops/<device>.json.
//
// A framework's overheads (studies/framework_fit.hpp, docs/framework-fit.md):
//   pipetwin calibrate --runs runs.csv -o FRAMEWORK.json [--terms iteration,micro_batch,...]
//                      [--name NAME] [--catalog DIR]
// fits the per-iteration, per-micro-batch and per-layer-launch overheads and the compute and
// communication scales to measured runs (studies/framework_runs.hpp: their columns), prints the
// terms and every run's error without a framework, with the fit and left out of the fit, and
// writes the framework file that plan, simulate, sweep take as --framework.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "profiles/zoo/calibration.hpp"
#include "profiles/zoo/op_fit.hpp"
#include "profiles/zoo/op_validation.hpp"
#include "studies/framework_fit.hpp"

#ifdef PIPETWIN_HAS_EXEC
#include "exec/profile/microbench.hpp"
#endif

namespace pipetwin::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> profiles;
  std::string holdout_model, catalog, output;
  int holdout = 0;
  bool leave_one_model_out = false, single_overhead = false;
  // The op-level model.
  bool microbench = false, op_model = false, quick = false;
  std::string ops, torch_device = "cpu", device_name = "cpu-core", dtype = "float32";
  double units = 0;  // 0: the catalog's op file's, or 1
  int threads = 1;
  // Framework overheads from measured runs.
  std::string runs, name;
  std::vector<std::string> terms;
};

// Shipped measured profiles of zoo models (of `device` when given).
std::vector<std::string> shipped_zoo_profiles(const std::string& device = "") {
  std::vector<std::string> out;
  for (const auto& s : list_shipped_profiles(default_traces_dir())) {
    if (s.source != "measured" || (!device.empty() && s.device != device)) continue;
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

std::vector<Profile> load_profiles(const std::vector<std::string>& paths) {
  std::vector<Profile> out;
  for (const auto& p : paths) out.push_back(load_profile(p));
  return out;
}

void print_op_validation(const zoo::OpValidation& v) {
  Table t({"model", "tasks", "microbench only: median", "worst", "leave one model out: median",
           "worst", "refinement: scale, first / last layer fwd+bwd"});
  for (const auto& m : v.models) {
    t.add(
        {m.model, std::to_string(m.raw.count), fmt_percent(m.raw.median), fmt_percent(m.raw.worst),
         fmt_percent(m.held.median), fmt_percent(m.held.worst),
         fmt::format(
             "{:.2f}, {} / {}", m.refinement.scale.value,
             fmt_seconds(m.refinement.first_forward_s.value + m.refinement.first_backward_s.value),
             fmt_seconds(m.refinement.last_forward_s.value + m.refinement.last_backward_s.value))});
  }
  std::fputs(t.render().c_str(), stdout);
  std::fputs(error_line("op-level model, microbench parameters only", v.raw).c_str(), stdout);
  std::fputs(error_line("op-level model, refinement fitted leave one model out", v.held).c_str(),
             stdout);
}

// The op file of `device` in the catalog, or `explicit_path`.
std::string ops_path_for(const CalibrateArgs& a, const std::string& device) {
  if (!a.ops.empty()) return a.ops;
  const std::string dir = a.catalog.empty() ? Catalog::default_dir() : a.catalog;
  return zoo::op_params_path(dir, device);
}

void run_op_model(const CalibrateArgs& a) {
  std::vector<std::string> paths = a.profiles;
  zoo::OpParams p;
  if (paths.empty()) {
    p = zoo::load_op_params(ops_path_for(a, a.device_name));
    paths = shipped_zoo_profiles(p.device);
  } else {
    p = zoo::load_op_params(ops_path_for(a, load_profile(paths.front()).device));
  }
  const zoo::OpValidation v = zoo::validate_op_model(load_profiles(paths), p, paths);
  std::printf("op-level model with %s against %zu profiles\n", p.origin.c_str(), paths.size());
  print_op_validation(v);
  if (a.output.empty()) return;
  zoo::OpParams refined = p;
  std::string names;
  for (const auto& m : v.models) names += (names.empty() ? "" : ", ") + m.model;
  refined.refinement = zoo::fit_refinement(v.tasks, "",
                                           fmt::format("the profiles of {} (pipetwin calibrate "
                                                       "--op-model)",
                                                       names));
  refined.notes =
      p.notes + fmt::format("; layer refinement fitted to {} measured profiles", paths.size());
  Json layers = zoo::op_validation_json(v);
  layers.erase("tasks");  // every layer pass of every profile: the summaries suffice here
  refined.fit = Json{{"microbench", p.fit}, {"layers", layers}};
  zoo::save_op_params(refined, a.output);
  std::printf("wrote %s\n", a.output.c_str());
}

void print_microbench_fit(const zoo::OpParams& p) {
  const auto& g = p.gemm.begin()->second;
  std::printf("host %s per operator, %s per autograd node, %s per parameter tensor; launch %s\n",
              fmt_seconds(p.host_s.value).c_str(), fmt_seconds(p.host_node_s.value).c_str(),
              fmt_seconds(p.host_tensor_s.value).c_str(), fmt_seconds(p.launch_s.value).c_str());
  std::printf(
      "bandwidth %.1f GB/s (%.1f GB/s up to %.0f KiB); GEMM tile %gx%g, %.1f GFLOP/s per "
      "unit, tile overhead %g\n",
      p.bandwidth.value / 1e9, p.cache_bandwidth.value / 1e9, p.cache_bytes.value / 1024,
      g.tile_m.value, g.tile_n.value, g.unit_flops.value / 1e9, g.tile_k_overhead.value);
  Table t({"timings", "cases", "median error", "worst"});
  for (const auto& [group, r] : p.fit.at("groups").items()) {
    t.add({group, std::to_string(r.at("samples").get<int>()),
           fmt_percent(r.at("median_error").get<double>()),
           fmt_percent(r.at("worst_error").get<double>())});
  }
  std::fputs(t.render().c_str(), stdout);
}

void run_microbench(const CalibrateArgs& a) {
#ifdef PIPETWIN_HAS_EXEC
  if (a.output.empty()) throw InputError("calibrate --microbench: give -o FILE for the op file");
  exec::MicrobenchOptions o;
  o.torch_device = a.torch_device;
  o.device = a.device_name;
  o.dtype = a.dtype;
  o.threads = a.threads;
  o.quick = a.quick;
  o.units = a.units > 0 ? a.units : 1;
  if (a.units > 0) {
    o.units_source = "given on the command line (--units)";
  } else if (a.torch_device != "cpu") {
    const zoo::OpParams shipped = zoo::load_op_params(ops_path_for(a, a.device_name));
    o.units = shipped.units.value;
    o.units_source = shipped.units.source;
  }
  const zoo::MicrobenchData data = exec::run_microbench(
      o, [](const std::string& what) { std::printf("timing %s\n", what.c_str()); });
  const zoo::OpParams p = zoo::fit_op_params(data);
  print_microbench_fit(p);
  zoo::save_op_params(p, a.output);
  std::printf("wrote %s\n", a.output.c_str());
  if (a.profiles.empty()) return;
  const zoo::OpValidation v = zoo::validate_op_model(load_profiles(a.profiles), p, a.profiles);
  print_op_validation(v);
#else
  (void)a;
  throw InputError(
      "calibrate --microbench times LibTorch operators: this build has none (configure with "
      "-DPIPETWIN_WITH_TORCH=ON)");
#endif
}

std::string term_value(const Framework& f, FrameworkTerm t) {
  const double v = framework_term(f, t);
  return framework_term_neutral(t) == 1.0 ? fmt::format("{:.4f}", v) : fmt_seconds(v);
}

void print_framework_fit(const sim::FrameworkFit& fit) {
  Table terms({"term", "value", "fitted"});
  for (int i = 0; i < kFrameworkTerms; ++i) {
    const auto t = FrameworkTerm(i);
    const bool fitted = std::find(fit.fitted.begin(), fit.fitted.end(), t) != fit.fitted.end();
    terms.add(
        {framework_term_name(t), term_value(fit.framework, t), fitted ? "yes" : "no (neutral)"});
  }
  std::fputs(terms.render().c_str(), stdout);
  Table t({"run", "model", "K", "dp", "B", "micro-batch", "schedule", "measured", "no framework",
           "fit", "leave-one-out", "weight"});
  auto cell = [](double s, double err) {
    return fmt::format("{} ({:+.1f}%)", fmt_seconds(s), err * 100);
  };
  for (const auto& r : fit.runs) {
    t.add({r.run.origin, r.run.model, std::to_string(r.run.stages), std::to_string(r.run.dp),
           std::to_string(r.run.batch), std::to_string(r.run.micro_batch), r.run.schedule,
           fmt_seconds(r.run.measured_s), cell(r.base_s, r.base_error()),
           cell(r.fitted_s, r.fitted_error()), r.loo_s > 0 ? cell(r.loo_s, r.loo_error()) : "-",
           fmt::format("{:.2f}", r.weight)});
  }
  std::fputs(t.render().c_str(), stdout);
  std::printf("|error| median / worst: no framework %s / %s, fit %s / %s, leave-one-out %s / %s\n",
              fmt_percent(fit.base_median).c_str(), fmt_percent(fit.base_worst).c_str(),
              fmt_percent(fit.fit_median).c_str(), fmt_percent(fit.fit_worst).c_str(),
              fmt_percent(fit.loo_median).c_str(), fmt_percent(fit.loo_worst).c_str());
}

void run_framework_fit(const CalibrateArgs& a) {
  const std::vector<sim::FrameworkRun> runs = sim::read_framework_runs(a.runs);
  const Catalog catalog = load_catalog(a.catalog);
  const sim::FrameworkRunModel model(runs, catalog);
  sim::FrameworkFitOptions o;
  for (const auto& t : a.terms) o.terms.push_back(parse_framework_term(t, "--terms"));
  if (!a.name.empty()) o.name = a.name;
  sim::FrameworkFit fit = sim::fit_framework(runs, model, o);
  std::printf("fitted %s to %zu runs of %s (%d Gauss-Newton steps)\n", o.name.c_str(), runs.size(),
              a.runs.c_str(), fit.iterations);
  print_framework_fit(fit);
  if (a.output.empty()) return;
  fit.framework.source = fmt::format("pipetwin calibrate --runs {}", a.runs);
  fit.framework.fit = sim::framework_fit_json(fit);
  save_framework(fit.framework, a.output);
  std::printf("wrote %s\n", a.output.c_str());
}

void run_calibrate(const CalibrateArgs& a) {
  if (!a.runs.empty()) return run_framework_fit(a);
  if (a.microbench) return run_microbench(a);
  if (a.op_model) return run_op_model(a);
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
      "calibrate",
      "Fit the analytic cost model's efficiencies to measured profiles, or (--runs) a "
      "framework's overheads to measured runs");
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
  cmd->add_option("-o,--output", args->output,
                  "write the efficiencies (or, with --microbench / --op-model, the op file) here");
  auto* bench = cmd->add_flag("--microbench", args->microbench,
                              "time the op-level model's micro-benchmark here and fit an op file "
                              "(LibTorch builds)");
  auto* op_model = cmd->add_flag("--op-model", args->op_model,
                                 "per-layer error of the op-level model against measured profiles");
  bench->excludes(op_model);
  cmd->add_option("--ops", args->ops, "op file (default: <catalog>/ops/<device>.json)");
  cmd->add_option("--torch-device", args->torch_device, "where --microbench times: cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--device-name", args->device_name,
                  "catalog name of the device measured (--microbench, --op-model)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "dtype the micro-benchmark computes in")
      ->capture_default_str();
  cmd->add_option("--units", args->units, "SMs (GPU) the wave model spreads tiles over");
  cmd->add_option("--threads", args->threads, "intra-op threads (--microbench)")
      ->capture_default_str();
  cmd->add_flag("--quick", args->quick, "fewer micro-benchmark shapes (a smoke test)");
  auto* runs = cmd->add_option("--runs", args->runs,
                               "fit a framework's overheads to these measured runs (CSV: model, "
                               "cluster, stages, dp, batch, micro_batch, schedule, dtype, "
                               "optimizer, measured_ms[, virtual_stages, partitioner, profile])");
  runs->excludes(bench);
  runs->excludes(op_model);
  cmd->add_option("--terms", args->terms,
                  "--runs: the terms fitted, comma-separated (iteration, micro_batch, "
                  "layer_launch, compute, communication, transfer_host, contention; default: all); "
                  "the others stay neutral")
      ->delimiter(',');
  cmd->add_option("--name", args->name, "--runs: the framework's name (default: fitted)");
  cmd->callback([args] { run_calibrate(*args); });
}

}  // namespace pipetwin::cli
