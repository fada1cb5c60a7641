// Reproduction framework (studies/reproduce/): formulas, reference tables, the entries' data files
// and their text templates (one-line errors naming the file and the JSON path), the EPFL Table 1
// entry.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/json_io.hpp"
#include "studies/reproduce/entry_data.hpp"
#include "studies/reproduce/formula.hpp"
#include "studies/reproduce/pipetransformer.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/reproduce/text.hpp"
#include "studies/reproduce/torchgpipe.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

// ---- text templates ----------------------------------------------------------------------------

TEST(ReproduceText, FillsNamedFieldsWithTheirFormats) {
  const Text t{"{gpus} x P40 ({memory:g} GiB, {bandwidth:.2f} GB/s), M in {{16, 32}}, {name}",
               "t.json", "assumptions[0]"};
  EXPECT_EQ(
      t(TextArgs().set("gpus", 8).set("memory", 22.0).set("bandwidth", 15.754).set("name", "x")),
      "8 x P40 (22 GiB, 15.75 GB/s), M in {16, 32}, x");
  EXPECT_EQ((Text{"no fields", "t.json", "title"})(), "no fields");
}

TEST(ReproduceText, UnknownFieldsAndBadSyntaxAreOneLineErrorsNamingFileAndPath) {
  const TextArgs args = TextArgs().set("gpus", 8);
  EXPECT_EQ(test::input_error([&] {
              (Text{"{gpus} and {gpu_count}", "t.json", "notes.a"})(args);
            }),
            "t.json: notes.a: unknown text field {gpu_count} (known: gpus)");
  EXPECT_THAT(test::input_error([&] {
                (Text{"{gpus:.q}", "t.json", "title"})(args);
              }),
              HasSubstr("t.json: title: bad text template: "));
  EXPECT_THAT(test::input_error([&] {
                (Text{"{} GPUs", "t.json", "title"})(args);
              }),
              HasSubstr("t.json: title: a text field needs a name"));
  EXPECT_THAT(test::input_error([&] {
                (Text{"{gpus", "t.json", "title"})(args);
              }),
              HasSubstr("t.json: title: bad text template: "));
}

// The cluster's facts are the catalog's numbers: torchgpipe's P40 server, PipeDream's Cluster-A.
TEST(ReproduceText, ClusterFactsAreTheCatalogsNumbers) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  const Cluster p40 = load_cluster("torchgpipe-8x-p40", catalog);
  const Text t{
      "{cluster}: {gpus} x {gpu} ({gpu_memory_gib:g} GiB, {gpu_tflops_float32:g} TFLOP/s, "
      "{gpu_memory_bandwidth_gbs:g} GB/s), {intra_gbs:.2f} GB/s, {intra_latency_us:g} us",
      "t.json", "a"};
  EXPECT_EQ(t(cluster_facts(p40)),
            "torchgpipe-8x-p40: 8 x tesla-p40 (22 GiB, 11.76 TFLOP/s, 346 GB/s), 15.75 GB/s, 5 us");
  EXPECT_DOUBLE_EQ(std::get<double>(cluster_facts(p40).values().at("gpu_memory_gib")),
                   p40.device.memory_bytes / (1024.0 * 1024 * 1024));
  const Cluster a = load_cluster("pipedream-cluster-a-4x4-v100", catalog);
  const Text n{
      "{a_nodes} servers x {a_gpus_per_node}, {a_nics_per_node_word} {a_inter_gbit:g} Gb "
      "Ethernet interface per server",
      "t.json", "a"};
  EXPECT_EQ(n(cluster_facts(a, "a_")), "4 servers x 4, one 10 Gb Ethernet interface per server");
}

// ---- the entries' data files
// ---------------------------------------------------------------------

// A copy of the shipped reference folder, whose data files a test breaks one field at a time.
class EntryFiles : public test::TempDirTest {
 protected:
  void SetUp() override { fs::copy(default_reference_dir(), ref_, fs::copy_options::recursive); }
  static const Catalog& catalog() {
    static const Catalog c = Catalog::load(Catalog::default_dir());
    return c;
  }
  ReproContext context() const { return ReproContext{catalog(), ref_.string()}; }
  std::string path(const std::string& file) const { return (ref_ / file).string(); }
  // Sets the member at JSON pointer `at` ("/ablation/model") of `file` to `value`.
  void set(const std::string& file, const std::string& at, const Json& value) {
    Json doc = load_json_file(path(file));
    doc[Json::json_pointer(at)] = value;
    write_file_atomic(path(file), dump_json(doc));
  }
  // The error loading entry `id`'s data file gives (title() reads and checks the whole file).
  std::string error(const std::string& id) const {
    const std::string e = test::input_error([&] { find_repro_entry(id).title(context()); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << "not one line: " << e;
    return e;
  }
  const fs::path ref_ = dir_ / "reference";  // the copy
};

TEST_F(EntryFiles, EveryShippedFileLoadsAndGivesTheTitle) {
  for (const auto& e : repro_entries()) EXPECT_FALSE(e->title(context()).empty()) << e->id();
  // The GPU count is the cluster file's, not a literal.
  EXPECT_THAT(find_repro_entry("ftpipe").title(context()), HasSubstr("T5-3B on 8 x RTX 2080 Ti"));
}

TEST_F(EntryFiles, AMissingFileIsNamed) {
  for (const std::string id : {"epfl", "torchgpipe", "ftpipe", "pipetransformer", "pipedream"}) {
    fs::remove(path(id + "-entry.json"));
    EXPECT_THAT(error(id), StartsWith(path(id + "-entry.json") + ": cannot open")) << id;
    const std::string run = test::input_error([&] { find_repro_entry(id).run(context()); });
    EXPECT_THAT(run, StartsWith(path(id + "-entry.json") + ": cannot open")) << id;
  }
}

TEST_F(EntryFiles, ABadFieldNamesFileJsonPathAndValue) {
  set("epfl-entry.json", "/devices/1", "four");
  EXPECT_EQ(error("epfl"),
            path("epfl-entry.json") + ": devices[1]: expected an integer, got \"four\"");
  set("torchgpipe-entry.json", "/memory/pipeline/checkpoint", "sometimes");
  EXPECT_EQ(error("torchgpipe"), path("torchgpipe-entry.json") +
                                     ": memory.pipeline.checkpoint: unknown checkpoint "
                                     "\"sometimes\" (known: none, except_last, always)");
  set("ftpipe-entry.json", "/partitioners/seq/1", "optimum");
  EXPECT_THAT(error("ftpipe"),
              StartsWith(path("ftpipe-entry.json") + ": partitioners.seq[1]: unknown partitioner "
                                                     "\"optimum\" (known: "));
  set("pipetransformer-entry.json", "/freeze_steps", 0);
  EXPECT_EQ(error("pipetransformer"), path("pipetransformer-entry.json") +
                                          ": freeze_steps: expected a positive integer, got 0");
  set("pipedream-entry.json", "/batch_scale", Json::array({0.5}));
  EXPECT_THAT(error("pipedream"),
              StartsWith(path("pipedream-entry.json") + ": batch_scale: unknown field (known: "));
}

TEST_F(EntryFiles, AnUnknownMemberIsNamedWithTheKnownOnesInTheFilesOrder) {
  set("torchgpipe-entry.json", "/memory/notes/extra", "x");
  EXPECT_EQ(error("torchgpipe"), path("torchgpipe-entry.json") +
                                     ": memory.notes.extra: unknown field (known: usage, "
                                     "naive_fits, fits, naive_on_one, largest, deepest)");
  set("epfl-entry.json", "/extra", 1);
  EXPECT_EQ(error("epfl"), path("epfl-entry.json") +
                               ": extra: unknown field (known: format, version, about, title, "
                               "reference, citation, devices, forward_ms, backward_ms, input_kb, "
                               "saved_kb, iterations, tables, notes, assumptions)");
  // A member every entry needs is required.
  Json doc = load_json_file(path("ftpipe-entry.json"));
  doc["figures"].erase("volume");
  write_file_atomic(path("ftpipe-entry.json"), dump_json(doc));
  EXPECT_THAT(error("ftpipe"), StartsWith(path("ftpipe-entry.json") + ": figures"));
}

TEST_F(EntryFiles, BadClustersSchedulesAndFormatsAreNamed) {
  set("pipetransformer-entry.json", "/cluster", "pipetransformer-3x8");
  EXPECT_THAT(error("pipetransformer"),
              StartsWith(path("pipetransformer-entry.json") + ": cluster: no cluster "
                                                              "\"pipetransformer-3x8\" in "));
  set("torchgpipe-entry.json", "/speed/amoebanet/schedule", "gpipe2");
  EXPECT_THAT(error("torchgpipe"),
              StartsWith(path("torchgpipe-entry.json") + ": speed.amoebanet.schedule: "));
  set("epfl-entry.json", "/format", "pipetwin.reproduce.ftpipe");
  EXPECT_EQ(
      error("epfl"),
      path("epfl-entry.json") +
          ": format: expected \"pipetwin.reproduce.epfl\", got \"pipetwin.reproduce.ftpipe\"");
  set("ftpipe-entry.json", "/version", 2);
  EXPECT_THAT(error("ftpipe"),
              StartsWith(path("ftpipe-entry.json") + ": version: unsupported version 2"));
}

TEST_F(EntryFiles, AnUnknownModelNameNamesFileAndField) {
  struct Case {
    std::string id, at, field;
  };
  int copies = 0;  // a fresh copy of the reference folder per case
  for (const Case& c : {Case{"torchgpipe", "/ablation/model", "ablation.model"},
                        Case{"torchgpipe", "/speed/amoebanet/model", "speed.amoebanet.model"},
                        Case{"ftpipe", "/model", "model"},
                        Case{"pipetransformer", "/zoo_models/ViT-B~116", "zoo_models.ViT-B/16"},
                        Case{"pipedream", "/models/2/zoo", "models[2].zoo"}}) {
    SCOPED_TRACE(c.id + " " + c.field);
    const fs::path fresh = dir_ / ("copy-" + std::to_string(copies++));
    fs::copy(default_reference_dir(), fresh, fs::copy_options::recursive);
    const std::string file = (fresh / (c.id + "-entry.json")).string();
    Json doc = load_json_file(file);
    doc[Json::json_pointer(c.at)] = "vnet:B=5,C=64";
    write_file_atomic(file, dump_json(doc));
    const ReproContext ctx{catalog(), fresh.string()};
    const std::string e = test::input_error([&] { find_repro_entry(c.id).title(ctx); });
    EXPECT_THAT(e, StartsWith(file + ": " + c.field + ": \"vnet:B=5,C=64\": "));
    EXPECT_THAT(e, HasSubstr("\"vnet\""));
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
  // A model of the paper's Table 3 missing from the file's zoo names: the file, the field and
  // the table's row are named.
  set("pipetransformer-entry.json", "/zoo_models", Json::object({{"ViT-B/16", "vit:b16"}}));
  const pipetransformer::Data data = pipetransformer::load_data(context());
  EXPECT_EQ(test::input_error([&] { pipetransformer::settings(context(), data); }),
            path("pipetransformer-entry.json") + ": zoo_models: no \"BERT-large-uncased\" (" +
                path("pipetransformer-table3-hparams.csv") + " row 1 names it)");
}

// A template naming a field the entry does not supply fails when the text is made, naming the
// file and the template's path.
TEST_F(EntryFiles, ATemplateWithAnUnknownFieldNamesFileAndPath) {
  set("epfl-entry.json", "/assumptions/0", "forward {forward_ms:g} ms, f = {f_ms} ms");
  EXPECT_EQ(test::input_error([&] { find_repro_entry("epfl").run(context()); }),
            path("epfl-entry.json") +
                ": assumptions[0]: unknown text field {f_ms} (known: backward_ms, forward_ms)");
}

// The text names the cluster's facts from the catalog: change the cluster file, and the text
// follows; the shipped files give the sentences the entries always wrote.
TEST_F(EntryFiles, ClusterFactsInTheTextFollowTheCatalog) {
  const fs::path hardware = dir_ / "hardware";
  fs::copy(Catalog::default_dir(), hardware, fs::copy_options::recursive);
  const std::string cluster = (hardware / "clusters" / "ftpipe-8x-2080ti.json").string();
  Json doc = load_json_file(cluster);
  doc["devices_per_node"] = 4;
  write_file_atomic(cluster, dump_json(doc));
  const ReproContext ctx{Catalog::load(hardware.string()), ref_.string()};
  EXPECT_THAT(find_repro_entry("ftpipe").title(ctx), HasSubstr("T5-3B on 4 x RTX 2080 Ti"));
  const torchgpipe::Data data = torchgpipe::load_data(context());
  torchgpipe::Setup setup;
  setup.cluster = load_cluster(data.cluster, catalog());
  setup.data = &data;
  EXPECT_EQ(data.assumptions.at(0)(setup.args()),
            "8 x Tesla P40 (22 GiB usable, 11.76 TFLOP/s float32, 346 GB/s) on PCIe 3.0 x16 "
            "(15.75 GB/s, 5 us), hardware/clusters/torchgpipe-8x-p40.json");
}

}  // namespace
}  // namespace pipetwin::sim
