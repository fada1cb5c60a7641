// Errors with context.
//
// InputError means the user gave pipetwin something it cannot use: a file that is missing or
// malformed, a field with a bad value, a flag out of range. Its message is one line that names
// the file (or flag) and the field and says what was expected; the CLI prints it and exits with
// code 2. Any other exception is a bug or an environment failure and exits with code 1.
//
// Thread-safety: plain value types, safe to throw from any thread.
#pragma once

#include <stdexcept>
#include <string>

namespace pipetwin {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run that failed while running: a peer died or stopped answering, a stage threw. The message
// says which rank, device and action; the CLI prints it and exits with code 1.
class RunFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit codes of the CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInput = 2;

[[noreturn]] void throw_input_error(const std::string& message);

// Throws InputError("<what> must be positive (<value> given)") unless value > 0.
void require_positive(const std::string& what, double value);

}  // namespace pipetwin
