// The data file of a reproduction entry: which rows it computes, in what setting, and its text.
//
// Every entry of `pipetwin reproduce` keeps its grid (models, batch sizes, M, K, schedules,
// partitioners, clusters), its configurations and its titles, notes and assumptions in
// <reference folder>/<id>.json beside the paper's tables (experiments/reference/); the C++ keeps
// the mechanisms, how a row is computed. Each file is {"format": "pipetwin.reproduce.<id>",
// "version": 1, ...}, read through core/json_io.hpp's JsonView, so a bad field is a one-line
// InputError naming the file and the JSON path ("torchgpipe.json: ablation.model: ...").
// The readers below check a field's type and meaning (a zoo model that exists, a partitioner,
// schedule or cluster that pipetwin knows) when the file is loaded, before anything runs.
//
// Thread-safety: EntryDoc is a value; the readers are pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/json_io.hpp"
#include "core/schedule/schedule.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/reproduce/text.hpp"

namespace pipetwin::sim {

// A loaded data file. root() views the document, which lives as long as the EntryDoc.
struct EntryDoc {
  std::string path;
  Json doc;
  JsonView root() const { return JsonView(doc, path); }
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

}  // namespace pipetwin::sim
