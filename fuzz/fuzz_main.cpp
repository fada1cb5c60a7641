// libFuzzer entry point: one binary per format, chosen at compile time by
// PIPETWIN_FUZZ_FORMAT (fuzz/CMakeLists.txt). InputError is the readers' only allowed failure.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"
#include "fuzz/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pipetwin::fuzz::Reader reader = [] {
    auto r = pipetwin::fuzz::find_reader(PIPETWIN_FUZZ_FORMAT);
    if (r == nullptr) {
      std::fprintf(stderr, "fuzz: no reader for %s\n", PIPETWIN_FUZZ_FORMAT);
      std::abort();
    }
    return r;
  }();
  try {
    reader(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const pipetwin::InputError&) {
  }
  return 0;
}
