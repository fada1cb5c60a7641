// `pipetwin schedule`: write (or print) the schedule a plan generates, for reading or editing.
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::cli {

namespace {

struct ScheduleArgs {
  std::string plan, output;
  int iterations = 0;
};

void run_schedule(const ScheduleArgs& a) {
  const Plan plan = load_plan(a.plan);
  const PlanContext ctx(plan, a.iterations);
  const Schedule s = make_schedule(plan.schedule, ctx.shape);
  const CompiledSchedule checked(s, "schedule " + plan.schedule);  // validates
  if (!a.output.empty()) {
    write_file_atomic(a.output, dump_json(schedule_to_json(s)));
    std::printf("wrote %s (%zu actions on %d devices)\n", a.output.c_str(), s.num_actions(),
                s.num_devices());
    return;
  }
  for (int d = 0; d < s.num_devices(); ++d) {
    std::string line = fmt::format("device {}:", d);
    for (const auto& act : s.devices[static_cast<size_t>(d)]) line += " [" + describe(act) + "]";
    std::puts(line.c_str());
  }
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand("schedule", "Print or write the schedule a plan generates");
  cmd->add_option("--plan", args->plan, "plan JSON")->required();
  cmd->add_option("--iterations", args->iterations, "mini-batches (default: the plan's)");
  cmd->add_option("-o,--output", args->output, "write the schedule JSON here instead of printing");
  cmd->callback([args] { run_schedule(*args); });
}

}  // namespace pipetwin::cli
