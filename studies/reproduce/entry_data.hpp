// The data file of a reproduction entry: which rows it computes, in what setting, and its text.
//
// Every entry of `pipetwin reproduce` keeps its grid (models, batch sizes, M, K, schedules,
// partitioners, clusters), its configurations and its titles, notes and assumptions in
// <reference folder>/<id>.json beside the paper's tables (experiments/reference/); the C++ keeps
// the mechanisms, how a row is computed. Each file is {"format": "pipetwin.reproduce.<id>",
// "version": 1, ...}, read through core/json_io.hpp's JsonView, so a bad field is a one-line
// InputError naming the file and the JSON path ("torchgpipe.json: ablation.model: ...").
// The readers below check a field's type and meaning (a zoo model that exists, a partitioner,
// schedule or cluster that pipetwin knows) when the file is loaded, before anything runs;
// read_fields() reads an object's members into an entry's Data by a list of Fields, and DataEntry
// makes an entry of its load_data, its title and its run.
//
// Thread-safety: EntryDoc is a value; the readers are pure functions.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/json_io.hpp"
#include "core/schedule/schedule.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/reproduce/text.hpp"

namespace pipetwin::sim {

struct Field;

// A loaded data file. root() views the document, which lives as long as the EntryDoc.
struct EntryDoc {
  std::string path;
  Json doc;
  JsonView root() const { return JsonView(doc, path); }
  // read_fields() of the document, whose "format", "version" (load_entry_doc checks them) and
  // "about" (prose for a reader of the file) are allowed too.
  void read_fields(std::initializer_list<Field> fields) const;
};

// Reads <context.reference_dir>/<file> and checks its format ("pipetwin.reproduce.<id>") and
// version (1); a missing file is an InputError "<path>: cannot open: ...".
EntryDoc load_entry_doc(const ReproContext& context, const std::string& file,
                        const std::string& format);

// Typed readers of one node, failing with the node's file and path.
std::vector<int> positive_ints(const JsonView& node);  // [2, 4, 8]
std::vector<double> positive_numbers(const JsonView& node);
std::vector<std::string> string_list(const JsonView& node);  // ["rte", "boolq"]
std::vector<Text> texts(const JsonView& node);               // templates
Checkpoint checkpoint_at(const JsonView& node);              // "none", "except_last", "always"
// A model the analytic zoo describes ("unet:B=5,C=64"), checked with zoo::describe_model.
std::string zoo_model_at(const JsonView& node);
std::string partitioner_at(const JsonView& node);  // a name make_partitioner knows
std::string schedule_at(const JsonView& node);     // a name make_schedule knows
// A cluster shipped in the catalog's clusters/ folder (or a path to a cluster file).
std::string cluster_at(const JsonView& node, const Catalog& catalog);
// A formula of `vars` (studies/reproduce/formula.hpp: "1/3", "6*K + 6"), evaluated.
double formula_at(const JsonView& node, const std::map<std::string, double>& vars = {});

// The table a data file names: {"name": "table1-time", "title": <template>}.
struct TableText {
  std::string name;
  Text title;
  ReproTable table(const TextArgs& args = {}) const { return {name, title(args), {}}; }
};
TableText table_text_at(const JsonView& node);

int positive_int_at(const JsonView& node);  // "expected a positive integer, got 0"

// One member of an object in a data file and where read_fields() puts its value, by the type of
// the destination: a template (Text, text_at), a table's name and title (TableText), a plain
// string, a positive integer or number, a bool, a checkpoint mode, a non-empty list of positive
// integers or numbers, a list of strings or of templates; or, for anything else, a function that
// reads the member (into(), cluster_into()).
struct Field {
  using Reader = std::function<void(const JsonView&)>;
  Field(const char* key, Text* out);
  Field(const char* key, TableText* out);
  Field(const char* key, std::string* out);
  Field(const char* key, int* out);
  Field(const char* key, double* out);
  Field(const char* key, bool* out);
  Field(const char* key, Checkpoint* out);
  Field(const char* key, std::vector<int>* out);
  Field(const char* key, std::vector<double>* out);
  Field(const char* key, std::vector<std::string>* out);
  Field(const char* key, std::vector<Text>* out);
  Field(const char* key, Reader read) : key(key), read(std::move(read)) {}

  const char* key;
  Reader read;
};

// A reader that stores what `read` (a reader of one node, or a JsonView member function) makes
// of the member: Field("model", into(&m.model, zoo_model_at)).
template <class T, class Read>
Field::Reader into(T* out, Read read) {
  return [out, read](const JsonView& node) { *out = std::invoke(read, node); };
}
// cluster_at's reader.
Field::Reader cluster_into(std::string* out, const Catalog& catalog);

// Reads the object `node`: a member that is none of `fields` is an InputError first ("unknown
// field (known: ...)", listed in the fields' order), then every field is required and read in
// that order.
void read_fields(const JsonView& node, std::initializer_list<Field> fields);

// An entry whose title and run both start from its data file: `load` reads it (the entry's
// load_data), `title` makes the line of `pipetwin reproduce list` of it, `run` the entry's result
// (its id set here).
template <class Data>
class DataEntry final : public ReproEntry {
 public:
  using Load = Data (*)(const ReproContext&);
  using Title = std::string (*)(const Data&, const ReproContext&);
  using Run = ReproResult (*)(const Data&, const ReproContext&);

  DataEntry(std::string id, Load load, Title title, Run run)
      : id_(std::move(id)), load_(load), title_(title), run_(run) {}

  std::string id() const override { return id_; }
  std::string title(const ReproContext& context) const override {
    return title_(load_(context), context);
  }
  ReproResult run(const ReproContext& context) const override {
    ReproResult result = run_(load_(context), context);
    result.id = id_;
    return result;
  }

 private:
  std::string id_;
  Load load_;
  Title title_;
  Run run_;
};

// The title of an entry set on one cluster (data.cluster): data.title filled with its facts.
template <class Data>
std::string cluster_title(const Data& data, const ReproContext& context) {
  return data.title(cluster_facts(load_cluster(data.cluster, context.catalog)));
}

}  // namespace pipetwin::sim
