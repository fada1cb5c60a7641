// The verbs of the `pipetwin` command line, each in its own file, and what they share.
//
// Thread-safety: CLI code runs on the main thread.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/cluster.hpp"
#include "core/metrics.hpp"
#include "core/plan.hpp"
#include "profiles/model_source.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::cli {

void add_plan_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_schedule_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_reproduce_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_capacity_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_zoo_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_import_trace_command(CLI::App& app);
// Verbs that need LibTorch; they say so when the build has none.
void add_exec_commands(CLI::App& app);
// The process's command line, for verbs that re-launch themselves (run --nproc).
void set_command_line(int argc, char** argv);
// `pipetwin train` (cmd_train.cpp), registered by add_exec_commands when built with LibTorch.
void add_train_command(CLI::App& app);
// Starts this command line (less --nproc) on `nproc` local processes; the job's exit status.
int relaunch_local(int nproc, int master_port);
// The same with `extra` arguments appended; the job's status and the ranks it lost
// (exec/platform/launcher.hpp).
struct LocalJobResult {
  int status = 0;
  std::vector<int> lost;
};
LocalJobResult relaunch_local_job(int nproc, int master_port,
                                  const std::vector<std::string>& extra);

// What `run` and `train` take from the plan when their flag is not given: the profile's dtype
// (a plan made for bfloat16 runs under bfloat16 autocast; float32 is the default anyway) and the
// optimizer its memory and step times are for ("momentum": SGD with momentum 0.9 unless
// --momentum says otherwise); otherwise plain SGD.
void plan_training_defaults(const Profile& profile, std::string& dtype, bool float64,
                            std::string& optimizer, double& momentum);

// The hardware catalog: --catalog DIR or the default.
Catalog load_catalog(const std::string& dir);

// Multi-line summary of a plan: stages, layers, predicted times and memory.
std::string plan_summary(const PlanContext& ctx);
// Multi-line summary of metrics (and, if given, the memory walk) for a terminal.
std::string metrics_summary(const PlanContext& ctx, const Metrics& m);

}  // namespace pipetwin::cli
