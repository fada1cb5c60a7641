#include "core/json_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

std::string type_name(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

}  // namespace

std::string JsonView::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

std::string JsonView::child_path(size_t index) const {
  return fmt::format("{}[{}]", path_, index);
}

std::string JsonView::describe() const {
  std::string text = node_->dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

void JsonView::fail(std::string_view what) const {
  const std::string where = path_.empty() ? std::string("(top level)") : path_;
  throw InputError(fmt::format("{}: {}: {}", origin_, where, what));
}

bool JsonView::has(std::string_view key) const {
  return node_->is_object() && node_->contains(key);
}

JsonView JsonView::at(std::string_view key) const {
  if (!node_->is_object()) fail(fmt::format("expected an object, got {}", type_name(*node_)));
  auto it = node_->find(key);
  if (it == node_->end()) {
    JsonView(*node_, origin_, child_path(key)).fail("missing required field");
  }
  return JsonView(*it, origin_, child_path(key));
}

std::optional<JsonView> JsonView::find(std::string_view key) const {
  if (!node_->is_object()) fail(fmt::format("expected an object, got {}", type_name(*node_)));
  auto it = node_->find(key);
  if (it == node_->end() || it->is_null()) return std::nullopt;
  return JsonView(*it, origin_, child_path(key));
}

JsonView JsonView::at(size_t index) const {
  if (!node_->is_array()) fail(fmt::format("expected an array, got {}", type_name(*node_)));
  if (index >= node_->size()) {
    fail(fmt::format("index {} out of range (array of {})", index, node_->size()));
  }
  return JsonView((*node_)[index], origin_, child_path(index));
}

size_t JsonView::size() const {
  if (!node_->is_array()) fail(fmt::format("expected an array, got {}", type_name(*node_)));
  return node_->size();
}

std::vector<JsonView> JsonView::items() const {
  std::vector<JsonView> out;
  const size_t n = size();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.emplace_back((*node_)[i], origin_, child_path(i));
  return out;
}

std::vector<std::string> JsonView::keys() const {
  if (!node_->is_object()) fail(fmt::format("expected an object, got {}", type_name(*node_)));
  std::vector<std::string> out;
  for (auto it = node_->begin(); it != node_->end(); ++it) out.push_back(it.key());
  return out;
}

double JsonView::as_number() const {
  if (!node_->is_number()) fail(fmt::format("expected a number, got {}", describe()));
  const double v = node_->get<double>();
  if (!std::isfinite(v)) fail("expected a finite number");
  return v;
}

double JsonView::as_nonneg() const {
  if (!node_->is_number() || node_->get<double>() < 0 || !std::isfinite(node_->get<double>())) {
    fail(fmt::format("expected a non-negative number, got {}", describe()));
  }
  return node_->get<double>();
}

double JsonView::as_positive() const {
  if (!node_->is_number() || !(node_->get<double>() > 0) || !std::isfinite(node_->get<double>())) {
    fail(fmt::format("expected a positive number, got {}", describe()));
  }
  return node_->get<double>();
}

int64_t JsonView::as_int() const {
  if (node_->is_number_unsigned() &&
      node_->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(fmt::format("integer {} is out of range", describe()));  // would wrap to negative
  }
  if (!node_->is_number_integer()) {
    if (node_->is_number_float()) {
      const double v = node_->get<double>();
      if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9e15) {
        return static_cast<int64_t>(v);
      }
    }
    fail(fmt::format("expected an integer, got {}", describe()));
  }
  return node_->get<int64_t>();
}

int JsonView::as_int32() const {
  const int64_t v = as_int();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(fmt::format("integer {} out of range", v));
  }
  return static_cast<int>(v);
}

namespace {

// `key`'s value read by `as` (JsonView::as_nonneg, ...), or `fallback` when the member is absent.
template <typename T>
T member_or(const JsonView& view, std::string_view key, T fallback, T (JsonView::*as)() const) {
  const std::optional<JsonView> member = view.find(key);
  return member ? ((*member).*as)() : std::move(fallback);
}

}  // namespace

int JsonView::int32_or(std::string_view key, int fallback) const {
  return member_or(*this, key, fallback, &JsonView::as_int32);
}

namespace {

// A value below `min` (0 or 1) at `node`: "must not be negative (-1 given)", "must be positive (0
// given)".
template <class Int>
Int at_least(const JsonView& node, Int v, Int min) {
  if (v < min && min > 0) node.fail(fmt::format("must be positive ({} given)", v));
  if (v < min) node.fail(fmt::format("must not be negative ({} given)", v));
  return v;
}

}  // namespace

int64_t JsonView::integer_at_least(std::string_view key, int64_t min) const {
  return at_least(at(key), integer(key), min);
}

int JsonView::int32_at_least(std::string_view key, int min) const {
  return at_least(at(key), int32(key), min);
}

std::string JsonView::as_string() const {
  if (!node_->is_string()) fail(fmt::format("expected a string, got {}", describe()));
  return node_->get<std::string>();
}

bool JsonView::as_bool() const {
  if (!node_->is_boolean()) fail(fmt::format("expected true or false, got {}", describe()));
  return node_->get<bool>();
}

double JsonView::nonneg_or(std::string_view key, double fallback) const {
  return member_or(*this, key, fallback, &JsonView::as_nonneg);
}

double JsonView::positive_or(std::string_view key, double fallback) const {
  return member_or(*this, key, fallback, &JsonView::as_positive);
}

int64_t JsonView::integer_or(std::string_view key, int64_t fallback) const {
  return member_or(*this, key, fallback, &JsonView::as_int);
}

std::string JsonView::string_or(std::string_view key, std::string fallback) const {
  return member_or(*this, key, std::move(fallback), &JsonView::as_string);
}

bool JsonView::bool_or(std::string_view key, bool fallback) const {
  return member_or(*this, key, fallback, &JsonView::as_bool);
}

int JsonView::check_format(std::string_view format, int max_version) const {
  const std::string got = at("format").as_string();
  if (got != format) {
    at("format").fail(fmt::format("expected \"{}\", got \"{}\"", format, got));
  }
  const int64_t version = at("version").as_int();
  if (version < 1 || version > max_version) {
    at("version").fail(
        fmt::format("unsupported version {} (this pipetwin reads 1..{})", version, max_version));
  }
  return static_cast<int>(version);
}

Json json_document(std::string_view format, int version) {
  Json doc;
  doc["format"] = std::string(format);
  doc["version"] = version;
  return doc;
}

void JsonView::allow_only(std::initializer_list<std::string_view> allowed) const {
  allow_only(std::vector<std::string_view>(allowed));
}

void JsonView::allow_only(const std::vector<std::string_view>& allowed) const {
  for (const auto& key : keys()) {
    bool ok = false;
    for (auto a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      JsonView(*node_, origin_, child_path(key))
          .fail(fmt::format("unknown field (known: {})", list));
    }
  }
}

Json load_json_file(const std::string& path) {
  return parse_json_text(read_file_bytes(path), path);
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  // A folder opens fine but reads nothing: say so rather than "not valid JSON".
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(EISDIR)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

Json parse_json_text(std::string_view text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Translate the byte offset into line:column for the user.
    size_t line = 1, col = 1;
    const size_t stop = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (size_t i = 0; i < stop; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(fmt::format("{}:{}:{}: not valid JSON", origin, line, col));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number literal beyond double's range ("1e999"): found by fuzzing.
    throw InputError(fmt::format("{}: not valid JSON: a number is out of range", origin));
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / fmt::format(".{}.tmp.XXXXXX", target.filename().string())).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    throw InputError(
        fmt::format("{}: cannot create a temporary file: {}", path, std::strerror(errno)));
  }
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw InputError(fmt::format("{}: {} failed: {}", path, what, std::strerror(err)));
  };
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    written += static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    throw InputError(fmt::format("{}: close failed: {}", path, std::strerror(errno)));
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw InputError(fmt::format("{}: rename failed: {}", path, std::strerror(err)));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string dump_json(const Json& doc) {
  return doc.dump(2) + "\n";
}

void save_json_file(const std::string& path, const Json& doc) {
  write_file_atomic(path, dump_json(doc));
}

}  // namespace pipetwin
