// JSON reading with context, the header every pipetwin file opens with, and atomic file writing.
//
// JsonView wraps a node of a parsed document together with the file it came from and the path
// to the node ("layers[3].fwd_s"), so that every validation error reads
//   profile.json: layers[3].timings[0].fwd_s: expected a non-negative number, got "abc"
// Every pipetwin file format is read through it, which keeps error messages uniform.
//
// write_file_atomic writes to a temporary file in the same folder, fsyncs it and renames it over
// the destination, so a reader never sees a half-written file and a crash leaves the old one.
//
// Thread-safety: JsonView is a read-only view; concurrent reads are safe. The viewed document
// must outlive the view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetwin {

using Json = nlohmann::ordered_json;

class JsonView {
 public:
  JsonView(const Json& node, std::string origin, std::string path = "")
      : node_(&node), origin_(std::move(origin)), path_(std::move(path)) {}

  const Json& raw() const { return *node_; }
  const std::string& origin() const { return origin_; }
  const std::string& path() const { return path_; }

  bool has(std::string_view key) const;
  JsonView at(std::string_view key) const;  // required member of an object
  std::optional<JsonView> find(std::string_view key) const;
  JsonView at(size_t index) const;        // element of an array
  size_t size() const;                    // requires an array
  std::vector<JsonView> items() const;    // elements of an array
  std::vector<std::string> keys() const;  // members of an object, in order

  // Typed access to this node.
  double as_number() const;
  double as_nonneg() const;
  double as_positive() const;
  int64_t as_int() const;
  int as_int32() const;  // an integer that fits an int
  std::string as_string() const;
  bool as_bool() const;

  // Typed access to members: required, and with a default when absent.
  double number(std::string_view key) const { return at(key).as_number(); }
  double nonneg(std::string_view key) const { return at(key).as_nonneg(); }
  double positive(std::string_view key) const { return at(key).as_positive(); }
  int64_t integer(std::string_view key) const { return at(key).as_int(); }
  int int32(std::string_view key) const { return at(key).as_int32(); }
  int int32_or(std::string_view key, int fallback) const;
  // An integer member of at least `min`, 0 or 1: "must not be negative (-1 given)", "must be
  // positive (0 given)".
  int64_t integer_at_least(std::string_view key, int64_t min) const;
  int int32_at_least(std::string_view key, int min) const;
  std::string string(std::string_view key) const { return at(key).as_string(); }
  double nonneg_or(std::string_view key, double fallback) const;
  double positive_or(std::string_view key, double fallback) const;
  int64_t integer_or(std::string_view key, int64_t fallback) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;

  // Checks the document header: {"format": <format>, "version": <= max_version}.
  int check_format(std::string_view format, int max_version) const;
  // Rejects members not in `allowed`, naming the first unknown one.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  void allow_only(const std::vector<std::string_view>& allowed) const;

  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string child_path(std::string_view key) const;
  std::string child_path(size_t index) const;
  std::string describe() const;  // short rendering of the node for error messages

  const Json* node_;
  std::string origin_;
  std::string path_;
};

// A new document opening with the header every pipetwin file carries, {"format": <format>,
// "version": <version>}; the members set after it follow in that order. The one writer of the
// header that JsonView::check_format reads back.
Json json_document(std::string_view format, int version);

// A JSON array of `items`, each written by `to_json`.
template <class Items, class ToJson>
Json json_array(const Items& items, ToJson&& to_json) {
  Json out = Json::array();
  for (const auto& item : items) out.push_back(to_json(item));
  return out;
}

// Reads and parses a JSON file; a missing file or a syntax error is an InputError naming the
// file (and the line and column of a syntax error).
Json load_json_file(const std::string& path);
// The bytes of a file; one that cannot be opened (or is a folder) is an InputError
// "<path>: cannot open: <reason>".
std::string read_file_bytes(const std::string& path);
// Parses JSON text; a syntax error is an InputError "<origin>:<line>:<column>: not valid JSON".
Json parse_json_text(std::string_view text, const std::string& origin);

// Writes `content` to `path` atomically (temp file in the same folder, fsync, rename).
void write_file_atomic(const std::string& path, std::string_view content);

// A file of one of pipetwin's formats, read as every loader reads it: parsed (load_json_file) and
// handed, viewed with its path as the origin, to `from_json` (plan_from_json, profile_from_json,
// ...), whose result is returned.
template <class FromJson>
auto load_json_as(const std::string& path, FromJson&& from_json) {
  const Json doc = load_json_file(path);
  return from_json(JsonView(doc, path));
}
// A document written as every pipetwin file is: dump_json, through write_file_atomic.
void save_json_file(const std::string& path, const Json& doc);

// Deterministic pretty rendering used for every JSON file pipetwin writes.
std::string dump_json(const Json& doc);

}  // namespace pipetwin
