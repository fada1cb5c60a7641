// EPFL report, Table 1: computation time per step and memory of the model-parallel schedules
// (naive model parallel, DDG, Features Replay, PipeDream).
//
// Setting: K devices, one layer per device, each layer forward f and backward b for the
// mini-batch, so the sequential mini-batch forward is T_F = K f and backward T_B = K b as the
// report defines them; transfers free (the table ignores communication). The table's formulas are
// read from experiments/reference/epfl-table1-schedules.csv and evaluated at each K; ours is the
// simulator's steady-state time per step and, from the schedule's memory walk, the most
// micro-batches (intermediate states) device k holds at once. The setting (the K, f, b, the
// bytes per micro-batch, the iterations simulated) and the text are in
// experiments/reference/epfl-entry.json.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "profiles/synthetic.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim/planner.hpp"
#include "studies/reproduce/entries.hpp"
#include "studies/reproduce/entry_data.hpp"
#include "studies/reproduce/formula.hpp"

namespace pipetwin::sim {

namespace {

// experiments/reference/epfl-entry.json.
struct EpflData {
  Text title;
  std::string reference;
  Text citation;
  std::vector<int> devices;
  double forward_ms = 0, backward_ms = 0, input_kb = 0, saved_kb = 0;
  std::string iterations;  // a formula of K
  TableText time, memory;
  Text memory_without_count;
  std::vector<Text> assumptions;
  // The values the text templates may name.
  TextArgs args() const {
    return TextArgs().set("forward_ms", forward_ms).set("backward_ms", backward_ms);
  }
};

EpflData load_data(const ReproContext& context) {
  const EntryDoc doc = load_entry_doc(context, "epfl-entry.json", "pipetwin.reproduce.epfl");
  EpflData d;
  const auto iterations = [&d](const JsonView& v) {
    d.iterations = v.as_string();
    formula_at(v, {{"K", 1}});  // checks it names K alone
  };
  const auto tables = [&d](const JsonView& t) {
    read_fields(t, {Field("time", &d.time), Field("memory", &d.memory)});
  };
  const auto notes = [&d](const JsonView& n) {
    read_fields(n, {Field("memory_without_count", &d.memory_without_count)});
  };
  doc.read_fields({Field("title", &d.title), Field("reference", &d.reference),
                   Field("citation", &d.citation), Field("devices", &d.devices),
                   Field("forward_ms", &d.forward_ms), Field("backward_ms", &d.backward_ms),
                   Field("input_kb", &d.input_kb), Field("saved_kb", &d.saved_kb),
                   Field("iterations", iterations), Field("tables", tables), Field("notes", notes),
                   Field("assumptions", &d.assumptions)});
  return d;
}

Cluster free_links_cluster(int devices) {
  const LinkSpec link{.name = "ideal-link", .description = "", .bandwidth = 1e15, .latency = 0};
  Cluster c;
  c.name = "ideal";
  c.device.name = "ideal-device";
  c.device.memory_bytes = 1e15;
  c.device.memory_bandwidth = 1e12;
  c.device.peak_flops = {{"float32", 1e15}};
  c.devices_per_node = devices;
  c.intra_node = link;
  c.inter_node = link;
  return c;
}

SimResult simulate_schedule(const EpflData& d, const std::string& schedule, int K, int iterations) {
  const double f = d.forward_ms / 1e3, b = d.backward_ms / 1e3;
  PlanRequest r;
  r.profile = synthetic_profile(
      ModelSpec::parse(fmt::format("uniform:layers={},fwd_ms={},bwd_ms={},act_kb={},saved_kb={}", K,
                                   f * 1e3, b * 1e3, d.input_kb, d.saved_kb),
                       "reproduce epfl"));
  r.cluster = free_links_cluster(K);
  r.stages = K;
  r.schedule = schedule;
  r.batch_size = 1;
  r.chunks = 1;
  r.iterations = iterations;  // steady state well past fill and drain
  const Plan plan = make_plan(r);
  const PlanContext ctx(plan, plan.iterations);
  return simulate_plan(ctx);
}

// "K-k+1 intermediate states on device k" -> "K-k+1"; "1 mini-batch" -> "1"; otherwise "".
std::string state_count_formula(const std::string& memory) {
  const auto states = memory.find(" intermediate states");
  if (states != std::string::npos) return memory.substr(0, states);
  if (memory == "1 mini-batch") return "1";
  return "";
}

// The memory rows of one schedule at one K: per device k, the intermediate states it holds.
void memory_rows(const EpflData& d, const ReferenceTable& ref, size_t row, int K,
                 const SimResult& sim, ReproTable& memory) {
  const std::string method = ref.cell(row, "method");
  const std::string count = state_count_formula(ref.cell(row, "memory"));
  const double f = d.forward_ms / 1e3, b = d.backward_ms / 1e3;
  const double input_bytes = d.input_kb * 1024, saved_bytes = d.saved_kb * 1024;
  for (int k = 1; k <= K; ++k) {
    const std::map<std::string, double> v = {
        {"T_F", K * f * 1e3}, {"T_B", K * b * 1e3}, {"K", K}, {"k", k}};
    const DeviceMemory& dm = sim.memory.devices[static_cast<size_t>(k - 1)];
    const double paper =
        count.empty() ? std::numeric_limits<double>::quiet_NaN() : eval_formula(count, v, ref.path);
    // One input and one set of saved activations per micro-batch: what is held at the peak.
    const double saved_sets = (dm.activation_bytes - dm.max_in_flight * input_bytes) / saved_bytes;
    memory.rows.push_back({fmt::format("{}, K={}, k={}", method, K, k), "intermediate states",
                           paper, static_cast<double>(dm.max_in_flight), "",
                           count.empty()
                               ? d.memory_without_count(TextArgs()
                                                            .set("paper", ref.cell(row, "memory"))
                                                            .set("inputs", dm.max_in_flight)
                                                            .set("saved_sets", saved_sets))
                               : ""});
  }
}

std::string entry_title(const EpflData& d, const ReproContext&) {
  return d.title(d.args());
}

ReproResult run_entry(const EpflData& d, const ReproContext& context) {
  const ReferenceTable ref = load_reference(context, d.reference);
  const double f = d.forward_ms / 1e3, b = d.backward_ms / 1e3;
  ReproResult res;
  res.citation = d.citation(TextArgs().set("reference", ref.path));
  ReproTable time = d.time.table(d.args());
  ReproTable memory = d.memory.table(d.args());
  for (size_t row = 0; row < ref.rows.size(); ++row) {
    const std::string method = ref.cell(row, "method");
    for (int K : d.devices) {
      const int iterations = static_cast<int>(
          std::lround(eval_formula(d.iterations, {{"K", K}}, "reproduce epfl: iterations")));
      const SimResult sim = simulate_schedule(d, method, K, iterations);
      const std::map<std::string, double> vars = {
          {"T_F", K * f * 1e3}, {"T_B", K * b * 1e3}, {"K", K}};
      time.rows.push_back({fmt::format("{}, K={}", method, K), "time per step",
                           eval_formula(ref.cell(row, "computation_time"), vars, ref.path),
                           sim.metrics.iteration_time_s * 1e3, "ms", ""});
      memory_rows(d, ref, row, K, sim, memory);
    }
  }
  res.tables = {time, memory};
  for (const Text& a : d.assumptions) res.assumptions.push_back(a(d.args()));
  return res;
}

}  // namespace

std::unique_ptr<ReproEntry> make_epfl_entry() {
  return std::make_unique<DataEntry<EpflData>>("epfl", load_data, entry_title, run_entry);
}

}  // namespace pipetwin::sim
