// Gzipped traces (profiles/trace_import/gzip.hpp): torch.profiler's use_gzip=True output reads as the
// plain trace does; corrupt and cut-short files are one-line errors naming the file.
#include <zlib.h>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "profiles/trace_import/gzip.hpp"
#include "profiles/trace_import/import.hpp"
#include "test_util.hpp"

namespace pipetwin::trace_import {
namespace {

// One gzip member holding `text` (zlib's deflate with a gzip wrapper, as Python's gzip writes).
std::string gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string fixture_text() {
  return test::read_text(test::source_dir() + "/tests/data/traces/cpu-skip.trace.json");
}

std::string error_of(const std::string& bytes) {
  try {
    gunzip(bytes, "t.json.gz");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceImportGzip, RoundTripsOneAndSeveralMembers) {
  const std::string text = fixture_text();
  EXPECT_TRUE(is_gzip(gzip(text)));
  EXPECT_FALSE(is_gzip(text));
  EXPECT_EQ(gunzip(gzip(text), "t"), text);
  const std::string half = text.substr(0, text.size() / 2), rest = text.substr(text.size() / 2);
  EXPECT_EQ(gunzip(gzip(half) + gzip(rest), "t"), text);  // RFC 1952: members concatenate
  EXPECT_EQ(gunzip(gzip(""), "t"), "");
}

TEST(TraceImportGzip, BadStreamsAreOneLineErrors) {
  const std::string z = gzip(fixture_text());
  EXPECT_EQ(error_of(z.substr(0, z.size() / 2)),
            "t.json.gz: not a valid gzip file (cut short: the stream ends before its trailer)");
  std::string corrupt = z;
  corrupt[z.size() - 3] ^= 0x5a;  // the trailer's length field
  EXPECT_EQ(error_of(corrupt).rfind("t.json.gz: not a valid gzip file (", 0), 0u)
      << error_of(corrupt);
  std::string bad_header = z;
  bad_header[2] = 0;  // compression method 0 is not deflate
  EXPECT_NE(error_of(bad_header).find("not a valid gzip file"), std::string::npos);
  EXPECT_NE(error_of(z + "garbage").find("not a valid gzip file"), std::string::npos);
}

// What a user meets: `import-trace x.pt.trace.json.gz` gives the profile of the plain file, and a
// cut-short file names itself.
TEST(TraceImportGzip, ImportReadsGzippedTracesLikePlainOnes) {
  test::TempDir dir;
  const std::string text = fixture_text();
  test::write_text(dir.file("plain.json"), text);
  test::write_text(dir.file("z.pt.trace.json.gz"), gzip(text));
  const Profile a = import_traces({load_kineto_trace(dir.file("plain.json"))}, {}).profile;
  const Profile b = import_traces({load_kineto_trace(dir.file("z.pt.trace.json.gz"))}, {}).profile;
  ASSERT_EQ(a.num_layers(), b.num_layers());
  for (int l = 0; l < a.num_layers(); ++l) {
    EXPECT_EQ(a.layers[size_t(l)].timings[0].forward_s, b.layers[size_t(l)].timings[0].forward_s);
    EXPECT_EQ(a.layers[size_t(l)].timings[0].backward_s, b.layers[size_t(l)].timings[0].backward_s);
  }
  const std::string z = gzip(text);
  test::write_text(dir.file("cut.json.gz"), z.substr(0, 40));
  try {
    load_kineto_trace(dir.file("cut.json.gz"));
    ADD_FAILURE() << "a cut-short gzip file was read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find(dir.file("cut.json.gz") + ": not a valid gzip file"), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace pipetwin::trace_import
