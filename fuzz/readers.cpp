#include "fuzz/readers.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include <unistd.h>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/elastic/epoch_log.hpp"
#include "core/elastic/freeze_trace.hpp"
#include "sim/transition_overheads.hpp"
#include "core/error.hpp"
#include "core/json_io.hpp"
#include "core/metrics.hpp"
#include "profiles/model_spec.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "report/csv_table.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/synthetic.hpp"
#include "core/timeline.hpp"
#include "profiles/trace_import/gzip.hpp"
#include "profiles/trace_import/import.hpp"
#include "studies/capacity.hpp"
#include "studies/reproduce/reproduce.hpp"
#include "studies/sweep/grid.hpp"
#include "studies/sweep/results.hpp"

namespace pipetwin::fuzz {

namespace {

void read_profile(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.profile.json");
  const Profile p = profile_from_json(JsonView(doc, "fuzz.profile.json"));
  Cluster c;
  c.device.name = p.device;
  c.device.memory_bytes = 1e12;
  c.intra_node = c.inter_node = {"link", "", 1e9, 1e-6};
  const CostModel cost(p, c);
  (void)cost.graph().topological_order();
}

void read_cluster(std::string_view bytes) {
  static const Catalog catalog = Catalog::load(Catalog::default_dir());
  const Json doc = parse_json_text(bytes, "fuzz.cluster.json");
  const Cluster c = cluster_from_json(JsonView(doc, "fuzz.cluster.json"), catalog);
  for (int d = 0; d < std::min(c.num_devices(), 64); ++d) (void)c.sharing_group(d);
}

// Simulation is left out: its size is the plan's to choose, and refusing enormous runs is the
// resource-limit check's job.
void read_plan(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.plan.json");
  const Plan plan = plan_from_json(JsonView(doc, "fuzz.plan.json"));
  plan.validate("fuzz.plan.json");
  const PlanContext ctx(plan, 1);
  (void)ctx.stages.size();
}

// As `pipetwin compare` reads a measured timeline.
void read_timeline(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.timeline.json");
  const Timeline t = timeline_from_chrome_trace(JsonView(doc, "fuzz.timeline.json"));
  for (bool async : {false, true})
    (void)compute_metrics(t, std::max(1, t.num_devices()), async, 1.0);
}

void read_metrics(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.metrics.json");
  (void)metrics_to_json(metrics_from_json(JsonView(doc, "fuzz.metrics.json")));
}

void read_schedule(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.schedule.json");
  (void)schedule_from_json(JsonView(doc, "fuzz.schedule.json"));
}

void read_model_spec(std::string_view bytes) {
  const ModelSpec spec = ModelSpec::parse(std::string(bytes), "--model");
  if (is_synthetic_model(spec)) (void)synthetic_profile(spec);
}

// Loaders that take a path get the bytes as a file: one per process, in a private folder, so the
// loader's own reading (and its errors, which name the file) is what is fuzzed.
std::string as_file(std::string_view bytes, const char* name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("pipetwin-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

void read_freeze_trace(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.trace.json");
  (void)elastic::freeze_trace_from_json(JsonView(doc, "fuzz.trace.json"));
}

void read_epoch_log(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.epochs.json");
  const elastic::EpochLog log = elastic::epoch_log_from_json(JsonView(doc, "fuzz.epochs.json"));
  (void)elastic::epoch_log_csv(log);
}

// As `pipetwin sweep --grid` reads its spec (a flag, not a file: errors name the field).
void read_sweep_grid(std::string_view bytes) {
  const sim::Grid g = sim::Grid::parse(bytes);
  (void)g.to_string();
  if (g.size() > 0) {
    sim::PointConfig c;
    g.apply(g.size() - 1, c);
  }
}

// As `pipetwin sweep --merge` and the summary read a finished sweep.
void read_sweep_csv(std::string_view bytes) {
  const sim::SweepTable t = sim::load_sweep(as_file(bytes, "fuzz.sweep.csv"));
  (void)sim::best_points(t, 5);
  (void)sim::varying_inputs(t);
}

void read_prices(std::string_view bytes) {
  static const Catalog catalog = Catalog::load(Catalog::default_dir());
  (void)sim::load_prices(as_file(bytes, "fuzz.prices.json"), catalog);
}

void read_transition_overheads(std::string_view bytes) {
  (void)elastic::load_transition_overheads(as_file(bytes, "fuzz.overheads.csv"));
}

// A paper's table as `pipetwin reproduce --reference DIR` reads it.
void read_reference_table(std::string_view bytes) {
  const std::string path = as_file(bytes, "fuzz.reference.csv");
  sim::ReproContext context{Catalog(), std::filesystem::path(path).parent_path().string()};
  const sim::ReferenceTable t = sim::load_reference(context, "fuzz.reference.csv");
  // Reading a cell as a number may refuse it (InputError), as an entry would.
  for (size_t r = 0; r < t.rows.size(); ++r) (void)t.number(r, t.columns.front());
}

// A CSV the report page embeds (report/scan.cpp).
void read_report_csv(std::string_view bytes) {
  (void)report::parse_csv(bytes, "fuzz.report.csv");
}

// A PyTorch profiler trace as `pipetwin import-trace` reads it (profiles/trace_import/). The profile
// it makes must be one pipetwin reads back: a refusal there is the importer's bug, not the input's.
void read_import_trace(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.kineto.json");
  const auto r = trace_import::import_traces(
      {trace_import::parse_kineto_trace(doc, "fuzz.kineto.json")}, trace_import::ImportOptions{});
  const Json written = profile_to_json(r.profile);
  try {
    (void)profile_from_json(JsonView(written, "imported profile"));
  } catch (const InputError& e) {
    throw std::logic_error(std::string("import-trace made a profile it cannot read: ") + e.what());
  }
}

// A gzipped trace (profiles/trace_import/gzip.hpp): inflated, then read as import_trace reads one.
void read_gzip_trace(std::string_view bytes) {
  if (!trace_import::is_gzip(bytes)) return;  // load_kineto_trace reads such bytes as plain JSON
  read_import_trace(trace_import::gunzip(bytes, "fuzz.trace.json.gz"));
}

const std::pair<const char*, Reader> kReaders[] = {
    {"profile", read_profile},
    {"cluster", read_cluster},
    {"plan", read_plan},
    {"timeline", read_timeline},
    {"metrics", read_metrics},
    {"schedule", read_schedule},
    {"model_spec", read_model_spec},
    {"freeze_trace", read_freeze_trace},
    {"epoch_log", read_epoch_log},
    {"sweep_grid", read_sweep_grid},
    {"sweep_csv", read_sweep_csv},
    {"prices", read_prices},
    {"transition_overheads", read_transition_overheads},
    {"reference_table", read_reference_table},
    {"report_csv", read_report_csv},
    {"import_trace", read_import_trace},
    {"gzip_trace", read_gzip_trace},
};

}  // namespace

Reader find_reader(std::string_view format) {
  for (const auto& [name, reader] : kReaders) {
    if (format == name) return reader;
  }
  return nullptr;
}

std::vector<std::string> reader_names() {
  std::vector<std::string> out;
  for (const auto& r : kReaders) out.emplace_back(r.first);
  return out;
}

}  // namespace pipetwin::fuzz
