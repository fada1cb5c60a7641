// Built without LibTorch: the executor's verbs exist but explain how to get them.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace pipetwin::cli {

void add_exec_commands(CLI::App& app) {
  for (const char* verb : {"profile", "run", "train"}) {
    CLI::App* cmd = app.add_subcommand(verb, "(needs a build with LibTorch)");
    cmd->allow_extras();
    cmd->callback([verb] {
      throw InputError(std::string(verb) +
                       ": this pipetwin was built without LibTorch "
                       "(configure with -DPIPETWIN_WITH_TORCH=ON)");
    });
  }
}

void set_command_line(int, char**) {}

int relaunch_local(int, int) {
  return 1;
}

LocalJobResult relaunch_local_job(int, int, const std::vector<std::string>&) {
  return {1, {}};
}

}  // namespace pipetwin::cli
