#include "studies/reproduce/entry_data.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/partitioner.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/zoo/zoo.hpp"
#include "studies/reproduce/formula.hpp"

namespace pipetwin::sim {

namespace fs = std::filesystem;

EntryDoc load_entry_doc(const ReproContext& context, const std::string& file,
                        const std::string& format) {
  EntryDoc d;
  d.path = (fs::path(context.reference_dir) / file).string();
  d.doc = load_json_file(d.path);
  d.root().check_format(format, 1);
  return d;
}

std::vector<int> positive_ints(const JsonView& node) {
  std::vector<int> out;
  for (const auto& v : node.items()) {
    const int x = v.as_int32();
    if (x < 1) v.fail(fmt::format("expected a positive integer, got {}", x));
    out.push_back(x);
  }
  if (out.empty()) node.fail("expected a non-empty array");
  return out;
}

std::vector<double> positive_numbers(const JsonView& node) {
  std::vector<double> out;
  for (const auto& v : node.items()) out.push_back(v.as_positive());
  if (out.empty()) node.fail("expected a non-empty array");
  return out;
}

std::vector<std::string> string_list(const JsonView& node) {
  std::vector<std::string> out;
  for (const auto& v : node.items()) out.push_back(v.as_string());
  return out;
}

std::vector<Text> texts(const JsonView& node) {
  std::vector<Text> out;
  for (const auto& v : node.items()) out.push_back(text_at(v));
  return out;
}

Checkpoint checkpoint_at(const JsonView& node) {
  Checkpoint c{};
  const std::string s = node.as_string();
  if (!parse_checkpoint(s, c)) {
    node.fail(fmt::format("unknown checkpoint \"{}\" (known: none, except_last, always)", s));
  }
  return c;
}

namespace {

// Runs `check` and turns its InputError into one naming the node.
template <class F>
void checked(const JsonView& node, F&& check) {
  try {
    check();
  } catch (const InputError& e) {
    node.fail(e.what());
  }
}

}  // namespace

std::string zoo_model_at(const JsonView& node) {
  const std::string name = node.as_string();
  checked(node, [&] { zoo::describe_model(name, fmt::format("\"{}\"", name)); });
  return name;
}

std::string partitioner_at(const JsonView& node) {
  const std::string name = node.as_string();
  std::string known;
  for (const auto& p : partitioner_names()) {
    if (p == name) return name;
    known += (known.empty() ? "" : ", ") + p;
  }
  node.fail(fmt::format("unknown partitioner \"{}\" (known: {})", name, known));
}

std::string schedule_at(const JsonView& node) {
  const std::string name = node.as_string();
  checked(node, [&] { schedule_info(name); });
  return name;
}

std::string cluster_at(const JsonView& node, const Catalog& catalog) {
  const std::string name = node.as_string();
  try {
    catalog.cluster_path(name);
  } catch (const InputError&) {
    node.fail(fmt::format("no cluster \"{}\" in {}/clusters (nor a cluster file of that path)",
                          name, catalog.dir()));
  }
  return name;
}

double formula_at(const JsonView& node, const std::map<std::string, double>& vars) {
  const std::string text = node.as_string();
  const std::string origin = fmt::format("{}: {}", node.origin(), node.path());
  return eval_formula(text, vars, origin);
}

TableText table_text_at(const JsonView& node) {
  node.allow_only({"name", "title"});
  return {node.string("name"), text_at(node.at("title"))};
}

int positive_int_at(const JsonView& node) {
  const int v = node.as_int32();
  if (v < 1) node.fail(fmt::format("expected a positive integer, got {}", v));
  return v;
}

Field::Field(const char* key, Text* out)
    : key(key), read([out](const JsonView& v) { *out = text_at(v); }) {}
Field::Field(const char* key, TableText* out) : key(key), read(into(out, table_text_at)) {}
Field::Field(const char* key, std::string* out) : key(key), read(into(out, &JsonView::as_string)) {}
Field::Field(const char* key, int* out) : key(key), read(into(out, positive_int_at)) {}
Field::Field(const char* key, double* out) : key(key), read(into(out, &JsonView::as_positive)) {}
Field::Field(const char* key, bool* out) : key(key), read(into(out, &JsonView::as_bool)) {}
Field::Field(const char* key, Checkpoint* out) : key(key), read(into(out, checkpoint_at)) {}
Field::Field(const char* key, std::vector<int>* out) : key(key), read(into(out, positive_ints)) {}
Field::Field(const char* key, std::vector<double>* out)
    : key(key), read(into(out, positive_numbers)) {}
Field::Field(const char* key, std::vector<std::string>* out)
    : key(key), read(into(out, string_list)) {}
Field::Field(const char* key, std::vector<Text>* out) : key(key), read(into(out, texts)) {}

Field::Reader cluster_into(std::string* out, const Catalog& catalog) {
  return [out, &catalog](const JsonView& v) { *out = cluster_at(v, catalog); };
}

namespace {

void read_members(const JsonView& node, std::vector<std::string_view> keys,
                  std::initializer_list<Field> fields) {
  for (const auto& f : fields) keys.emplace_back(f.key);
  node.allow_only(keys);
  for (const auto& f : fields) f.read(node.at(f.key));
}

}  // namespace

void read_fields(const JsonView& node, std::initializer_list<Field> fields) {
  read_members(node, {}, fields);
}

void EntryDoc::read_fields(std::initializer_list<Field> fields) const {
  read_members(root(), {"format", "version", "about"}, fields);
}

}  // namespace pipetwin::sim
