// `pipetwin schedule`: write (or print) the schedule a plan generates, for reading or editing.
//
// Printed, one line per device: its actions in list order, each as describe() writes it
// ("F s0 mb3 v0", "I s1 mb2 v0" and "W s1 mb2 v0" for the halves of a split backward,
// "S act s0->s1 mb3"). A device hosting several stages (virtual stages: interleaved-1f1b, the V of
// zbv and dualpipev) names them: "device 0 (stages 0, 7):". --compact prints only the compute
// actions, as the papers draw them: "F3" (forward of micro-batch 3), "B", "I", "W", "R"
// (recompute), "U" (optimizer step), with "@s7" on a device of several stages saying which.
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::cli {

namespace {

struct ScheduleArgs {
  std::string plan, output;
  int iterations = 0;
  bool compact = false;
};

// "F3", "W12@s7"; "" for the actions that are not compute.
std::string compact_token(const Action& a, bool name_stage) {
  if (stream_of(a.op) != StreamKind::kCompute) return "";
  const std::string stage = name_stage ? fmt::format("@s{}", a.stage) : "";
  if (a.op == Op::kOptimizerStep) return "U" + stage;
  return fmt::format("{}{}{}", op_letter(a.op), a.micro_batch, stage);
}

std::string device_line(const Schedule& s, int d, bool compact) {
  const auto stages = s.shape.stages_on(d % s.shape.devices_per_replica);
  std::string line = stages.size() > 1
                         ? fmt::format("device {} (stages {}):", d, fmt::join(stages, ", "))
                         : fmt::format("device {}:", d);
  for (const auto& act : s.devices[static_cast<size_t>(d)]) {
    if (!compact) {
      line += " [" + describe(act) + "]";
    } else if (std::string token = compact_token(act, stages.size() > 1); !token.empty()) {
      line += " " + token;
    }
  }
  return line;
}

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
  for (int d = 0; d < s.num_devices(); ++d) std::puts(device_line(s, d, a.compact).c_str());
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto args = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = app.add_subcommand("schedule", "Print or write the schedule a plan generates");
  cmd->add_option("--plan", args->plan, "plan JSON")->required();
  cmd->add_option("--iterations", args->iterations, "mini-batches (default: the plan's)");
  cmd->add_flag("--compact", args->compact,
                "print only compute actions: F3, B3, I3, W3, R3, U (@sN on a device of several "
                "stages)");
  cmd->add_option("-o,--output", args->output, "write the schedule JSON here instead of printing");
  cmd->callback([args] { run_schedule(*args); });
}

}  // namespace pipetwin::cli
