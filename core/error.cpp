#include "core/error.hpp"

#include <fmt/format.h>

namespace pipetwin {

void throw_input_error(const std::string& message) { throw InputError(message); }

void require_positive(const std::string& what, double value) {
  if (!(value > 0)) throw InputError(fmt::format("{} must be positive ({} given)", what, value));
}

}  // namespace pipetwin
