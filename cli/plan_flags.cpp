#include "cli/plan_flags.hpp"

#include <algorithm>

namespace pipetwin::cli {

std::vector<PlanFlag> all_plan_flags() {
  return sim::all_plan_options();
}

void add_plan_flags(CLI::App* cmd, PlanFlags* flags, const std::vector<PlanFlag>& which) {
  const auto& specs = sim::plan_option_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const PlanFlag flag = PlanFlag(i);
    if (std::find(which.begin(), which.end(), flag) == which.end()) continue;
    std::string help = specs[i].help;
    if (flag == PlanFlag::kSchedule && flags->schedule_auto)
      help += ", or auto: the fastest synchronous schedule that fits";
    add_option_spec(cmd, flags, specs[i], help);
  }
}

CLI::Option* add_dtype_flag(CLI::App* cmd, std::string* dtype) {
  return cmd->add_option("--dtype", *dtype, sim::plan_option_spec(PlanFlag::kDtype).help);
}

}  // namespace pipetwin::cli
