// Reproduction of the papers' figures: one entry per table or figure the issues name.
//
// An entry runs pipetwin's engines on the setting a paper states and returns tables of
// comparisons — one row per figure: the paper's value, ours, and the relative error — plus the
// modelling assumptions it made. The paper's values are read from experiments/reference/*.csv
// (transcribed from the papers, each file citing paper and table), never typed into code, so the
// figure compared against has one source. Which rows an entry computes (its grid and
// configurations) and its text are data too, in experiments/reference/<id>-entry.json
// (studies/reproduce/entry_data.hpp); the code keeps how a row is computed.
// `pipetwin reproduce ID|all -o DIR` writes, per entry,
// DIR/ID/<table>.csv and DIR/ID/README.md (tables side by side and the assumptions), and
// DIR/summary.csv with one row per comparison over all entries.
//
// Thread-safety: entries are stateless; run() may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster.hpp"

namespace pipetwin::sim {

// One figure, the paper's and ours. `paper` is NaN when the paper gives no number for a row we
// still report (e.g. a derived quantity).
struct Comparison {
  std::string item;    // what is compared: "ddg, K=4"
  std::string metric;  // "time per step (T_F)", "speedup", ...
  double paper = 0;
  double ours = 0;
  std::string unit;
  std::string note;
  // (ours - paper) / |paper|; NaN when the paper's value is missing or zero.
  double relative_error() const;
};

struct ReproTable {
  std::string name;   // file stem: "table1-time"
  std::string title;  // "EPFL Table 1: computation time per step"
  std::vector<Comparison> rows;
};

struct ReproResult {
  std::string id;
  std::string citation;
  std::vector<ReproTable> tables;
  std::vector<std::string> assumptions;
};

struct ReproContext {
  Catalog catalog;
  std::string reference_dir;  // experiments/reference of the data folder
};

class ReproEntry {
 public:
  virtual ~ReproEntry() = default;
  virtual std::string id() const = 0;
  // One line for `pipetwin reproduce list`: the "title" of the entry's data file.
  virtual std::string title(const ReproContext& context) const = 0;
  virtual ReproResult run(const ReproContext& context) const = 0;
};

// Every entry, in a fixed order.
const std::vector<std::unique_ptr<ReproEntry>>& repro_entries();
// The entry with this id; InputError listing the known ids otherwise.
const ReproEntry& find_repro_entry(const std::string& id);
// PIPETWIN_DATA (or the build's data folder) + "/experiments/reference".
std::string default_reference_dir();

// A reference CSV: '#' lines are comments (the citation), then a header row and data rows.
struct ReferenceTable {
  std::string path;
  std::vector<std::string> comments;
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  // Cell of `row` in `column`; InputError naming the file, row and column when absent.
  const std::string& cell(size_t row, const std::string& column) const;
  double number(size_t row, const std::string& column) const;
  // Index of the first row whose `column` equals `value`; InputError when none.
  size_t find(const std::string& column, const std::string& value) const;
};
ReferenceTable load_reference(const ReproContext& context, const std::string& file);

// Writes DIR/<id>/<table>.csv and DIR/<id>/README.md; returns the README text.
std::string write_repro_result(const ReproResult& result, const std::string& dir);
// DIR/summary.csv over several results.
void write_repro_summary(const std::vector<ReproResult>& results, const std::string& dir);
// A fixed-width side-by-side rendering for terminals and the README.
std::string render_repro_table(const ReproTable& table);

}  // namespace pipetwin::sim
