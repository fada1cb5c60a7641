// `pipetwin import-trace`: PyTorch profiler traces become a pipetwin profile
// (profiles/trace_import/import.hpp; docs/import-trace.md).
//
//   pipetwin import-trace TRACE.json [TRACE2.json ...] [--layers children|depth=N|N|a,b,c]
//                         [--micro-batch 1,2,4] [--device NAME] [--model NAME]
//                         [--loss last|unattributed] -o PROFILE.json
//
// One trace per micro-batch size (python/pipetwin_trace.py records them; a trace recorded as
// torch.profiler's documentation shows it is read as profiles/trace_import/plain.hpp says, and
// --layers N names its layers where it has no layer ranges). It prints each layer's
// times at the largest size and, per trace, the share of the step time no layer could be given,
// with its largest parts; the profile's notes say the same. Nothing is written on an error: the
// profile goes through a temporary file renamed over the output (core/json_io.hpp).
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "profiles/trace_import/import.hpp"

namespace pipetwin::cli {

namespace {

struct ImportTraceArgs {
  trace_import::ImportFlags flags;
  std::string output;
  bool quiet = false;
};

void print_layers(const Profile& p) {
  const int b = p.layers.front().timings.back().micro_batch;
  Table t({"layer", "kind", fmt::format("fwd @b={}", b), "bwd", "optimizer", "params",
           "output/sample", "saved/sample"});
  for (const auto& l : p.layers) {
    const LayerTiming& x = l.timings.back();
    t.add({l.name, l.kind, fmt_seconds(x.forward_s), fmt_seconds(x.backward_s),
           fmt_seconds(l.optimizer_step_s), fmt_bytes(l.param_bytes),
           fmt_bytes(l.output_bytes_per_sample), fmt_bytes(l.saved_bytes_per_sample)});
  }
  const size_t sizes = p.layers.front().timings.size();
  std::printf("profile of %s on %s (%zu layer%s, %zu micro-batch size%s)\n%s", p.model.c_str(),
              p.device.c_str(), p.layers.size(), p.layers.size() == 1 ? "" : "s", sizes,
              sizes == 1 ? "" : "s", t.render().c_str());
  int skips = 0;
  for (const auto& e : p.edges) skips += e.to != e.from + 1;
  if (skips > 0) std::printf("edges: %zu, %d skipping layers\n", p.edges.size(), skips);
}

void print_unattributed(const trace_import::TraceReport& r) {
  std::string parts;
  int shown = 0;
  for (const auto& [name, s] : r.unattributed_parts) {
    if (shown++ == 4) break;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name,
                         fmt_percent(r.step_s > 0 ? s / r.step_s : 0));
  }
  const std::string unprofiled =
      r.unprofiled_step_s > 0 && !r.device_time
          ? fmt::format(", {} unprofiled", fmt_seconds(r.unprofiled_step_s))
          : "";
  std::printf(
      "%s: b=%d, %d of %d steps measured, step %s (%s%s), backward ops attributed %d of %d; not "
      "attributed to any layer: %s of the step%s%s\n",
      r.origin.c_str(), r.micro_batch, r.measured_steps, r.all_steps, fmt_seconds(r.step_s).c_str(),
      r.device_time ? "kernels' device time" : "CPU time", unprofiled.c_str(),
      r.backward_attributed, r.backward_ops, fmt_percent(r.unattributed_share).c_str(),
      parts.empty() ? "" : ": ", parts.c_str());
  const std::string warning = trace_import::page_fault_warning(r);
  if (!warning.empty()) std::fprintf(stderr, "pipetwin: warning: %s\n", warning.c_str());
}

void run_import_trace(const ImportTraceArgs& a) {
  const trace_import::ImportFlags& f = a.flags;
  const trace_import::ImportOptions o = f.options();  // checked before the catalog is read
  const trace_import::ImportResult r =
      trace_import::import_files(f.traces, o, load_catalog(f.catalog));
  save_profile(r.profile, a.output);
  if (a.quiet) return;
  print_layers(r.profile);
  for (const auto& t : r.traces) print_unattributed(t);
  std::printf("wrote %s\n", a.output.c_str());
}

}  // namespace

void add_import_trace_command(CLI::App& app) {
  auto args = std::make_shared<ImportTraceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import-trace", "Make a profile from PyTorch profiler traces (recorded by any means)");
  cmd->add_option("traces", args->flags.traces,
                  "Kineto Chrome-trace JSON files, one per micro-batch size")
      ->required();
  cmd->add_option("--layers", args->flags.layers,
                  "layer ranges: children, depth=N, N (children, N of them; in a trace without "
                  "layer ranges or metadata, the first N forward operators of each step), or "
                  "names a,b,c (pipetwin.layer:<name> or plain record_function ranges)")
      ->capture_default_str();
  cmd->add_option("--micro-batch", args->flags.micro_batches,
                  "micro-batch size of each trace (default: the trace's metadata or shapes)")
      ->delimiter(',');
  cmd->add_option("--device", args->flags.device,
                  "catalog device measured on (default: cpu-core, or the trace's GPU)");
  cmd->add_option("--model", args->flags.model,
                  "model name (default: the trace's, or the file name)");
  cmd->add_option("--loss", args->flags.loss,
                  "the loss's forward and backward: last (in the last layer's times, as pipetwin "
                  "profile counts them) or unattributed")
      ->capture_default_str();
  cmd->add_option("--catalog", args->flags.catalog, "hardware catalog folder");
  cmd->add_option("-o,--output", args->output, "write the profile JSON here")->required();
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing");
  cmd->callback([args] { run_import_trace(*args); });
}

}  // namespace pipetwin::cli
