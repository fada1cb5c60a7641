// core/json_io.hpp: typed access with "<file>: <path>: <what>" errors, format headers, syntax
// errors with line:column, and atomic file writing.
#include "core/json_io.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Json doc_of(const std::string& text) {
  return Json::parse(text);
}

std::vector<std::string> folder_entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Drops root (effective uid "nobody") while alive, so that permission bits apply to this
// process; dropped() is false when that is not possible.
class Unprivileged {
 public:
  Unprivileged() {
    if (::geteuid() == 0) {
      dropped_ = ::seteuid(65534) == 0;
      root_ = !dropped_;
    }
  }
  ~Unprivileged() {
    if (dropped_) {
      EXPECT_EQ(::seteuid(0), 0);
    }
  }
  bool still_root() const { return root_; }

 private:
  bool dropped_ = false;
  bool root_ = false;
};

TEST(JsonView, TypedMembers) {
  const Json doc = doc_of(
      R"({"n": -2.5, "z": 0, "p": 3, "i": 7, "f": 4.0, "s": "hi", "b": true, "null": null})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(v.number("n"), -2.5);
  EXPECT_EQ(v.nonneg("z"), 0);
  EXPECT_EQ(v.positive("p"), 3);
  EXPECT_EQ(v.integer("i"), 7);
  EXPECT_EQ(v.integer("f"), 4);  // an integral float is an integer
  EXPECT_EQ(v.string("s"), "hi");
  EXPECT_TRUE(v.at("b").as_bool());
  EXPECT_TRUE(v.has("null"));
  EXPECT_FALSE(v.has("absent"));
}

TEST(JsonView, DefaultsApplyToAbsentAndNullMembers) {
  const Json doc = doc_of(R"({"x": null, "y": 2})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(v.nonneg_or("absent", 1.5), 1.5);
  EXPECT_EQ(v.nonneg_or("x", 1.5), 1.5);
  EXPECT_EQ(v.nonneg_or("y", 1.5), 2);
  EXPECT_EQ(v.positive_or("x", 9), 9);
  EXPECT_EQ(v.integer_or("x", -3), -3);
  EXPECT_EQ(v.string_or("x", "dflt"), "dflt");
  EXPECT_TRUE(v.bool_or("x", true));
  EXPECT_EQ(v.int32_or("x", 7), 7);
  // A present member is read, and checked, by its type's reader.
  EXPECT_EQ(v.int32_or("y", 7), 2);
  EXPECT_EQ(v.integer_or("y", -3), 2);
  EXPECT_EQ(input_error([&] { v.string_or("y", "dflt"); }), "f.json: y: expected a string, got 2");
  EXPECT_EQ(input_error([&] { v.bool_or("y", true); }), "f.json: y: expected true or false, got 2");
  EXPECT_FALSE(v.find("x").has_value());
  ASSERT_TRUE(v.find("y").has_value());
  EXPECT_EQ(v.find("y")->path(), "y");
}

TEST(JsonView, PathsOfNestedNodes) {
  const Json doc = doc_of(R"({"layers": [{"t": [1, 2]}, {"t": [3]}]})");
  const JsonView v(doc, "m.json");
  EXPECT_EQ(v.at("layers").at(1).at("t").at(0).path(), "layers[1].t[0]");
  const auto items = v.at("layers").items();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].path(), "layers[0]");
  EXPECT_EQ(items[1].at("t").size(), 1u);
  EXPECT_EQ(items[1].origin(), "m.json");
}

TEST(JsonView, KeysKeepDocumentOrder) {
  const Json doc = doc_of(R"({"zeta": 1, "alpha": 2, "mid": 3})");
  EXPECT_THAT(JsonView(doc, "f").keys(), ElementsAre("zeta", "alpha", "mid"));
}

TEST(JsonView, ErrorIsOneLineFileFieldWhat) {
  const Json doc = doc_of(R"({"layers": [{}, {}, {}, {"timings": [{"fwd_s": "abc"}]}]})");
  const JsonView v(doc, "profile.json");
  EXPECT_EQ(
      input_error([&] { v.at("layers").at(3).at("timings").at(0).nonneg("fwd_s"); }),
      "profile.json: layers[3].timings[0].fwd_s: expected a non-negative number, got \"abc\"");
}

TEST(JsonView, TypeErrors) {
  const Json doc =
      doc_of(R"({"neg": -1, "zero": 0, "frac": 3.5, "num": 12, "str": "x", "arr": [1], "b": 1})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(input_error([&] { v.nonneg("neg"); }),
            "f.json: neg: expected a non-negative number, got -1");
  EXPECT_EQ(input_error([&] { v.positive("zero"); }),
            "f.json: zero: expected a positive number, got 0");
  EXPECT_EQ(input_error([&] { v.integer("frac"); }), "f.json: frac: expected an integer, got 3.5");
  EXPECT_EQ(input_error([&] { v.string("num"); }), "f.json: num: expected a string, got 12");
  EXPECT_EQ(input_error([&] { v.number("str"); }), "f.json: str: expected a number, got \"x\"");
  EXPECT_EQ(input_error([&] { v.at("b").as_bool(); }), "f.json: b: expected true or false, got 1");
  EXPECT_EQ(input_error([&] { v.at("arr").at("k"); }),
            "f.json: arr: expected an object, got an array");
  EXPECT_EQ(input_error([&] { v.at("str").size(); }),
            "f.json: str: expected an array, got a string");
}

TEST(JsonView, IntegersBeyondInt64AreRejectedNotWrapped) {
  const Json doc = doc_of(R"({"big": 18446744073709551615, "max": 9223372036854775807})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(input_error([&] { v.integer("big"); }),
            "f.json: big: integer 18446744073709551615 is out of range");
  EXPECT_EQ(v.integer("max"), std::numeric_limits<int64_t>::max());
}

TEST(JsonView, MissingFieldAndIndexOutOfRange) {
  const Json doc = doc_of(R"({"layers": [{"name": "a"}, {}]})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(input_error([&] { v.at("layers").at(1).string("name"); }),
            "f.json: layers[1].name: missing required field");
  EXPECT_EQ(input_error([&] { v.at("layers").at(5); }),
            "f.json: layers: index 5 out of range (array of 2)");
}

TEST(JsonView, TopLevelErrorsSayTopLevel) {
  const Json doc = doc_of("[1, 2]");
  EXPECT_EQ(input_error([&] { JsonView(doc, "f.json").at("format"); }),
            "f.json: (top level): expected an object, got an array");
}

TEST(JsonView, LongValuesAreShortenedInMessages) {
  const std::string long_text(60, 'x');
  const Json doc = Json{{"k", long_text}};
  const std::string msg = input_error([&] { JsonView(doc, "f.json").number("k"); });
  // The rendering "\"xxx...\"" is cut to 37 characters plus "...": the message stays one line.
  EXPECT_EQ(msg, "f.json: k: expected a number, got \"" + std::string(36, 'x') + "...");
}

TEST(JsonView, CheckFormat) {
  const Json ok = doc_of(R"({"format": "pipetwin.thing", "version": 2})");
  EXPECT_EQ(JsonView(ok, "f.json").check_format("pipetwin.thing", 3), 2);
  EXPECT_EQ(input_error([&] { JsonView(ok, "f.json").check_format("pipetwin.other", 3); }),
            "f.json: format: expected \"pipetwin.other\", got \"pipetwin.thing\"");
  EXPECT_EQ(input_error([&] { JsonView(ok, "f.json").check_format("pipetwin.thing", 1); }),
            "f.json: version: unsupported version 2 (this pipetwin reads 1..1)");
  const Json zero = doc_of(R"({"format": "pipetwin.thing", "version": 0})");
  EXPECT_EQ(input_error([&] { JsonView(zero, "f.json").check_format("pipetwin.thing", 1); }),
            "f.json: version: unsupported version 0 (this pipetwin reads 1..1)");
  const Json none = doc_of(R"({"version": 1})");
  EXPECT_EQ(input_error([&] { JsonView(none, "f.json").check_format("pipetwin.thing", 1); }),
            "f.json: format: missing required field");
}

TEST(JsonDocument, OpensWithTheHeaderCheckFormatReads) {
  Json doc = json_document("pipetwin.thing", 2);
  doc["name"] = "x";
  // format, version, then the members in the order they were set: what a reader sees first.
  EXPECT_EQ(dump_json(doc),
            dump_json(doc_of(R"({"format": "pipetwin.thing", "version": 2, "name": "x"})")));
  EXPECT_EQ(JsonView(doc, "f.json").check_format("pipetwin.thing", 2), 2);
  EXPECT_EQ(input_error([&] { JsonView(doc, "f.json").check_format("pipetwin.thing", 1); }),
            "f.json: version: unsupported version 2 (this pipetwin reads 1..1)");
}

TEST(JsonView, AllowOnlyNamesTheFirstUnknownField) {
  const Json doc = doc_of(R"({"inner": {"a": 1, "colour": 2, "b": 3, "size": 4}})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(input_error([&] {
              v.at("inner").allow_only({"a", "b"});
            }),
            "f.json: inner.colour: unknown field (known: a, b)");
  EXPECT_NO_THROW(v.at("inner").allow_only({"a", "b", "colour", "size"}));
}

TEST(JsonView, IntegersOfAtLeastZeroOrOne) {
  const Json doc = doc_of(R"({"k": 4, "zero": 0, "neg": -3})");
  const JsonView v(doc, "f.json");
  EXPECT_EQ(v.int32_at_least("k", 1), 4);
  EXPECT_EQ(v.integer_at_least("zero", 0), 0);
  EXPECT_EQ(input_error([&] { v.int32_at_least("zero", 1); }),
            "f.json: zero: must be positive (0 given)");
  EXPECT_EQ(input_error([&] { v.integer_at_least("neg", 0); }),
            "f.json: neg: must not be negative (-3 given)");
}

TEST(LoadJsonAs, ReadsTheFileThroughTheReaderWithItsPathAsOrigin) {
  test::TempDir dir;
  const std::string path = dir.file("n.json");
  save_json_file(path, Json{{"n", 3}, {"list", Json::array({1, 2})}});
  EXPECT_EQ(load_json_as(path, [](const JsonView& v) { return v.int32("n"); }), 3);
  EXPECT_EQ(
      input_error([&] { load_json_as(path, [](const JsonView& v) { return v.string("n"); }); }),
      path + ": n: expected a string, got 3");
  EXPECT_EQ(json_array(std::vector<int>{1, 2},
                       [](int i) {
                         return Json{{"i", i}};
                       }),
            Json::parse(R"([{"i": 1}, {"i": 2}])"));
  EXPECT_EQ(json_array(std::vector<int>{}, [](int i) { return Json(i); }), Json::array());
}

TEST(LoadJsonFile, ParsesAFile) {
  test::TempDir dir;
  const std::string path = dir.file("ok.json");
  test::write_text(path, R"({"a": [1, 2, {"b": "c"}]})");
  const Json doc = load_json_file(path);
  EXPECT_EQ(doc["a"][2]["b"], "c");
}

TEST(LoadJsonFile, MissingFileNamesTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("absent.json");
  EXPECT_EQ(input_error([&] { load_json_file(path); }),
            path + ": cannot open: No such file or directory");
}

TEST(LoadJsonFile, FolderIsNotAFile) {
  test::TempDir dir;
  EXPECT_EQ(input_error([&] { load_json_file(dir.path().string()); }),
            dir.path().string() + ": cannot open: Is a directory");
}

TEST(LoadJsonFile, SyntaxErrorsGiveLineAndColumnOfTheOffendingCharacter) {
  test::TempDir dir;
  const std::string path = dir.file("bad.json");
  struct Case {
    std::string text;
    std::string where;
  };
  const std::vector<Case> cases = {
      // the ']' is the 8th character of line 3
      {"{\n  \"a\": 1,\n  \"b\": ]\n}\n", ":3:8:"},
      // a stray 'x' opening line 2
      {"{\"a\": 1,\nx}", ":2:1:"},
      // trailing comma: the '}' on line 3, column 1
      {"[1,\n 2,\n]", ":3:1:"},
      // the very first character
      {"@", ":1:1:"},
  };
  for (const auto& c : cases) {
    test::write_text(path, c.text);
    EXPECT_EQ(input_error([&] { load_json_file(path); }), path + c.where + " not valid JSON")
        << "input: " << c.text;
  }
}

TEST(LoadJsonFile, TruncatedAndEmptyFilesAreSyntaxErrors) {
  test::TempDir dir;
  const std::string path = dir.file("cut.json");
  test::write_text(path, "{\"a\": [1, 2");
  EXPECT_THAT(input_error([&] { load_json_file(path); }),
              ::testing::AllOf(StartsWith(path + ":1:"), HasSubstr("not valid JSON")));
  test::write_text(path, "");
  EXPECT_EQ(input_error([&] { load_json_file(path); }), path + ":1:1: not valid JSON");
}

TEST(WriteFileAtomic, WritesExactContentAndNoTempFiles) {
  test::TempDir dir;
  const std::string path = dir.file("out.json");
  const std::string content = std::string("line one\n\0binary\xff tail", 21) + "\n";
  write_file_atomic(path, content);
  EXPECT_EQ(test::read_text(path), content);
  EXPECT_THAT(folder_entries(dir.path()), ElementsAre("out.json"));

  write_file_atomic(dir.file("empty"), "");
  EXPECT_EQ(std::filesystem::file_size(dir.file("empty")), 0u);
  EXPECT_THAT(folder_entries(dir.path()), ElementsAre("empty", "out.json"));
}

TEST(WriteFileAtomic, ReplacesAnExistingFileByRename) {
  test::TempDir dir;
  const std::string path = dir.file("plan.json");
  test::write_text(path, "old content");
  // A reader that opened the old file keeps reading the old bytes: the new content arrives as a
  // new file renamed over the name, never by rewriting the old one in place.
  std::ifstream reader(path, std::ios::binary);
  ASSERT_TRUE(reader.good());
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);

  write_file_atomic(path, "new content, longer than before");

  std::string seen((std::istreambuf_iterator<char>(reader)), std::istreambuf_iterator<char>());
  EXPECT_EQ(seen, "old content");
  EXPECT_EQ(test::read_text(path), "new content, longer than before");
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino);
  EXPECT_THAT(folder_entries(dir.path()), ElementsAre("plan.json"));
}

TEST(WriteFileAtomic, WriteInAMissingFolderIsAnInputError) {
  test::TempDir dir;
  const std::string path = dir.file("no/such/folder/out.json");
  EXPECT_THAT(input_error([&] { write_file_atomic(path, "x"); }),
              ::testing::AllOf(StartsWith(path + ": "), HasSubstr("No such file or directory")));
}

TEST(WriteFileAtomic, UnwritableFolderIsAnInputErrorAndKeepsTheOldFile) {
  test::TempDir dir;
  const auto sub = dir.path() / "locked";
  std::filesystem::create_directory(sub);
  const std::string path = (sub / "metrics.json").string();
  test::write_text(path, "previous");
  std::filesystem::permissions(sub, std::filesystem::perms(0555));
  std::string msg;
  {
    Unprivileged guard;
    if (guard.still_root()) {
      std::filesystem::permissions(sub, std::filesystem::perms(0755));
      GTEST_SKIP() << "running as root and cannot drop privileges: permissions do not apply";
    }
    msg = input_error([&] { write_file_atomic(path, "replacement"); });
  }
  std::filesystem::permissions(sub, std::filesystem::perms(0755));
  EXPECT_THAT(msg, ::testing::AllOf(StartsWith(path + ": "), HasSubstr("Permission denied")));
  EXPECT_EQ(test::read_text(path), "previous");
  EXPECT_THAT(folder_entries(sub), ElementsAre("metrics.json"));
}

TEST(WriteFileAtomic, FailedWriteKeepsTheOldFileAndLeavesNoTempFile) {
  test::TempDir dir;
  const std::string path = dir.file("timeline.json");
  test::write_text(path, "previous");
  const std::string big(1 << 20, 'x');
  // Cap the size of files this process may write, so write() fails part-way (EFBIG).
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string msg;
  try {
    write_file_atomic(path, big);
  } catch (const InputError& e) {
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(msg, path + ": write failed: File too large");
  EXPECT_EQ(test::read_text(path), "previous");
  EXPECT_THAT(folder_entries(dir.path()), ElementsAre("timeline.json"));
}

TEST(WriteFileAtomic, DestinationThatIsAFolderFailsCleanly) {
  test::TempDir dir;
  const auto target = dir.path() / "taken";
  std::filesystem::create_directories(target / "inside");
  EXPECT_THAT(input_error([&] { write_file_atomic(target.string(), "x"); }),
              StartsWith(target.string() + ": rename failed: "));
  EXPECT_TRUE(std::filesystem::is_directory(target / "inside"));
  EXPECT_THAT(folder_entries(dir.path()), ElementsAre("taken"));
}

TEST(DumpJson, PrettyWithTrailingNewlineAndStableOrder) {
  Json doc;
  doc["b"] = 1;
  doc["a"] = {1, 2};
  EXPECT_EQ(dump_json(doc), "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
  EXPECT_EQ(Json::parse(dump_json(doc)), doc);
}

}  // namespace
}  // namespace pipetwin
