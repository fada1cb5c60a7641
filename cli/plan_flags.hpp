// The option tables (sim/option_table.hpp) on the command line: add_option_spec binds an entry of
// a verb's table to a CLI11 flag, and the plan-request flags (studies/plan_options.hpp) are one
// such table, so that the verbs that take them read them alike: `plan` and `sweep` take all of
// them, `capacity` the model's, -B and --partitioner, `train` --dtype (add_dtype_flag). A verb with
// another default sets it in its PlanFlags before adding the flags (capacity: its --partitioner
// list).
//
// Thread-safety: CLI code runs on the main thread.
#pragma once

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/option_table.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::cli {

using PlanFlags = sim::PlanOptions;
using PlanFlag = sim::PlanOption;

// Adds `spec` to `cmd` with `help`, bound to its field of `values`, whose value --help shows as
// the default when the table says so.
template <class Values>
CLI::Option* add_option_spec(CLI::App* cmd, Values* values, const sim::OptionSpec<Values>& spec,
                             const std::string& help) {
  CLI::Option* option = std::visit(
      [&](auto member) -> CLI::Option* {
        auto& value = values->*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
          return cmd->add_flag(spec.names, value, help);
        } else {
          return cmd->add_option(spec.names, value, help);
        }
      },
      spec.value);
  return spec.show_default ? option->capture_default_str() : option;
}

// Every flag, in the order --help lists them.
std::vector<PlanFlag> all_plan_flags();

// Adds the flags `which` to `cmd`, bound to `flags`, whose values are the defaults --help shows.
void add_plan_flags(CLI::App* cmd, PlanFlags* flags, const std::vector<PlanFlag>& which);

// --dtype alone, bound to `dtype` (train and the analytic verbs say the same thing by it: the
// precision training runs in).
CLI::Option* add_dtype_flag(CLI::App* cmd, std::string* dtype);

}  // namespace pipetwin::cli
