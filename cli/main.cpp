// pipetwin: predicts and runs pipeline-parallel DNN training. One binary, verbs in the style of
// git (docs/design.md "Command line"). Bad input prints one line "pipetwin: error: ..." and exits 2.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pipetwin: predict and run pipeline-parallel DNN training", "pipetwin"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetwin 0.1.0");
  pipetwin::cli::add_plan_command(app);
  pipetwin::cli::add_simulate_command(app);
  pipetwin::cli::add_schedule_command(app);
  pipetwin::cli::add_compare_command(app);
  pipetwin::cli::add_exec_commands(app);
  pipetwin::cli::add_reproduce_command(app);
  pipetwin::cli::add_sweep_command(app);
  pipetwin::cli::add_capacity_command(app);
  pipetwin::cli::add_report_command(app);
  pipetwin::cli::add_zoo_command(app);
  pipetwin::cli::add_calibrate_command(app);
  pipetwin::cli::add_import_trace_command(app);
  pipetwin::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "pipetwin: error: %s (see pipetwin --help)\n", e.what());
    return pipetwin::kExitInput;
  } catch (const pipetwin::InputError& e) {
    std::fprintf(stderr, "pipetwin: error: %s\n", e.what());
    return pipetwin::kExitInput;
  } catch (const pipetwin::RunFailure& e) {
    std::fprintf(stderr, "pipetwin: error: %s\n", e.what());
    return pipetwin::kExitInternal;
  } catch (const std::exception& e) {
    // One line: LibTorch's errors (c10::Error) carry a C++ backtrace after their first line.
    const std::string what = e.what();
    const std::string first = what.substr(0, what.find('\n'));
    std::fprintf(stderr, "pipetwin: internal error: %s%s\n", first.c_str(),
                 first.size() < what.size() ? " (PIPETWIN_BACKTRACE=1 prints the rest)" : "");
    if (first.size() < what.size() && std::getenv("PIPETWIN_BACKTRACE") != nullptr)
      std::fprintf(stderr, "%s\n", what.c_str());
    return pipetwin::kExitInternal;
  }
  return pipetwin::kExitOk;
}
