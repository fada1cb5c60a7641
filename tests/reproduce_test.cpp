// Reproduction framework (studies/reproduce/): formulas, reference tables, the EPFL Table 1 entry.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "studies/reproduce/formula.hpp"
#include "studies/reproduce/reproduce.hpp"

namespace pipetwin::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(Formula, EvaluatesThePapersClosedForms) {
  const std::map<std::string, double> v = {{"T_F", 4}, {"T_B", 8}, {"K", 4}, {"k", 2}};
  EXPECT_DOUBLE_EQ(eval_formula("T_F + T_B", v, "t"), 12);
  EXPECT_DOUBLE_EQ(eval_formula("T_F + T_B/K", v, "t"), 6);
  EXPECT_DOUBLE_EQ(eval_formula("(T_F + T_B)/K", v, "t"), 3);
  EXPECT_DOUBLE_EQ(eval_formula("K-k+1", v, "t"), 3);
  EXPECT_DOUBLE_EQ(eval_formula("-2*(K - 1.5)", v, "t"), -5);
}

TEST(Formula, ErrorsNameTheOriginAndThePosition) {
  const std::map<std::string, double> v = {{"K", 4}};
  try {
    eval_formula("K + T_X", v, "table.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("table.csv"));
    EXPECT_THAT(e.what(), HasSubstr("unknown variable \"T_X\" at position 5"));
  }
  EXPECT_THROW(eval_formula("(K + 1", v, "t"), InputError);
  EXPECT_THROW(eval_formula("K 1", v, "t"), InputError);
}

class ReferenceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipetwin_ref_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  ReproContext context() const { return ReproContext{{}, dir_.string()}; }
  fs::path dir_;
};

TEST_F(ReferenceFiles, ParsesCommentsHeaderAndRows) {
  write("t.csv", "# Paper, Table 9\nname,value\na,1.5\n\"b,c\",2\n");
  const ReferenceTable t = load_reference(context(), "t.csv");
  EXPECT_EQ(t.comments, std::vector<std::string>{"Paper, Table 9"});
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.cell(1, "name"), "b,c");
  EXPECT_DOUBLE_EQ(t.number(t.find("name", "a"), "value"), 1.5);
}

TEST_F(ReferenceFiles, BrokenTablesAreOneLineErrorsNamingFileRowAndColumn) {
  write("ragged.csv", "a,b\n1\n");
  EXPECT_THAT([&] { load_reference(context(), "ragged.csv"); },
              ::testing::ThrowsMessage<InputError>(
                  HasSubstr("ragged.csv: row 1 has 1 cells, the header 2")));
  write("nan.csv", "a,b\nx,fast\n");
  const ReferenceTable t = load_reference(context(), "nan.csv");
  EXPECT_THAT([&] { t.number(0, "b"); }, ::testing::ThrowsMessage<InputError>(HasSubstr(
                                             "nan.csv: row 1: b must be a number (\"fast\")")));
  EXPECT_THAT([&] { t.cell(0, "c"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("no column \"c\"")));
  EXPECT_THROW(load_reference(context(), "missing.csv"), InputError);
}

TEST(Reproduce, UnknownEntryListsTheKnownOnes) {
  EXPECT_THAT([] { find_repro_entry("nope"); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("known: epfl")));
}

// The simulator's schedules against the report's formulas: every row exact.
TEST(Reproduce, EpflTable1MatchesTheReportsFormulas) {
  const ReproContext ctx{{}, default_reference_dir()};
  const ReproResult r = find_repro_entry("epfl").run(ctx);
  ASSERT_EQ(r.tables.size(), 2u);
  EXPECT_EQ(r.tables[0].rows.size(), 4u * 3u);  // four schedules, K in {2, 4, 8}
  int compared = 0;
  for (const auto& t : r.tables) {
    for (const auto& row : t.rows) {
      if (!std::isfinite(row.paper)) continue;
      EXPECT_NEAR(row.ours, row.paper, 1e-6 * std::max(1.0, std::abs(row.paper)))
          << row.item << " " << row.metric;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12 + 3 * (2 + 4 + 8));  // times, and the memory of naive, ddg, pipedream
}

TEST(Reproduce, WritesTablesReadmeAndSummary) {
  const fs::path dir = fs::temp_directory_path() / ("pipetwin_repro_" + std::to_string(::getpid()));
  ReproResult r;
  r.id = "demo";
  r.citation = "Demo paper, Table 1";
  r.tables.push_back({"t1", "Table 1", {{"x, K=2", "speedup", 2.0, 2.2, "", ""}}});
  r.assumptions = {"none"};
  const std::string readme = write_repro_result(r, dir.string());
  write_repro_summary({r}, dir.string());
  EXPECT_THAT(readme, HasSubstr("+10.0%"));
  std::ifstream csv(dir / "demo" / "t1.csv");
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  EXPECT_EQ(header, "item,metric,paper,ours,unit,relative_error,note");
  EXPECT_EQ(row, "\"x, K=2\",speedup,2,2.2,,0.1,");
  EXPECT_TRUE(fs::exists(dir / "summary.csv"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetwin::sim
