// Every input the fuzzers ever crashed on (fuzz/regressions/<format>/*) replayed through the same
// reader: it must now be accepted or refused with a one-line InputError naming the file.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "fuzz/readers.hpp"

namespace pipetwin::fuzz {
namespace {

namespace fs = std::filesystem;

TEST(FuzzRegressions, EveryReproducerIsHandled) {
  const fs::path root = fs::path(PIPETWIN_SOURCE_DIR) / "fuzz" / "regressions";
  int replayed = 0;
  for (const auto& format : reader_names()) {
    const fs::path dir = root / format;
    if (!fs::is_directory(dir)) continue;
    const Reader reader = find_reader(format);
    ASSERT_NE(reader, nullptr) << format;
    for (const auto& entry : fs::directory_iterator(dir)) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      try {
        reader(bytes.str());
      } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << entry.path() << ": " << what;
        // A file's error names it; the formats given as flags (--model, --grid) name the field.
        if (format != "model_spec" && format != "sweep_grid") {
          EXPECT_NE(what.find("fuzz."), std::string::npos) << what;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << entry.path() << ": " << e.what();
      }
      ++replayed;
    }
  }
  EXPECT_GE(replayed, 7);  // one per format found so far
}

TEST(FuzzRegressions, NumbersBeyondDoubleAreInputErrors) {
  EXPECT_THROW(find_reader("profile")("{\"format\": 1e999}"), InputError);
  EXPECT_THROW(find_reader("model_spec")("uniform:layers=1e30"), InputError);
}

}  // namespace
}  // namespace pipetwin::fuzz
