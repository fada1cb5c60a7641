// `pipetwin reproduce torchgpipe`: the entry and torchgpipe Table 1 (see torchgpipe.hpp).
//
// Table 1: "Performance of torchpipe when optimization components are incrementally added. The
// U-Net model with (B, C) = (5, 64) is used ... The batch size and the number of micro-batches
// are fixed as 128 and 8, respectively. The model is partitioned and placed on four devices"
// (balance found "with the aid of torchpipe.balance": we use balance-time, torchgpipe's
// balance_by_time). The components map onto our engines as follows:
//   Dependency  the backward runs in the clock-cycle order. Our schedule IR always fixes the
//               order, so the row without it (the autograd engine's own order) is not modelled.
//   Streams     copies on their own streams, overlapping compute (our default). Without them,
//               "copies and computations" are not concurrent: we chain every device's actions,
//               transfers included, in list order (control dependencies).
//   Portals     a skip tensor travels once, producer -> consumer (our default). Without them the
//               model is "fully sequential ... skip connections are encoded as inputs and outputs
//               of layers that they pass through": we reroute every skip edge through each stage
//               in between, whose input (kept for its backward) grows by the skipped bytes.
#include "studies/reproduce/torchgpipe.hpp"

#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/schedule/generators.hpp"
#include "profiles/model_source.hpp"
#include "sim/pipeline_sim.hpp"
#include "studies/reproduce/entries.hpp"

namespace pipetwin::sim {

namespace torchgpipe {

Profile sgd_profile(const Setup& setup, const std::string& model) {
  Profile p = resolve_profile(model, "", setup.cluster.device);
  for (auto& layer : p.layers) layer.optimizer_bytes = 0;  // plain SGD: no optimizer state
  return p;
}

PlanRequest request(const Setup& setup, const std::string& model, const Profile& profile,
                    int stages, const std::string& schedule, int batch, int chunks,
                    Checkpoint checkpoint, const std::string& partitioner) {
  return {.model = model,
          .profile = profile,
          .cluster = setup.cluster,
          .catalog = setup.catalog,
          .stages = stages,
          .schedule = schedule,
          .batch_size = batch,
          .chunks = chunks,
          .partitioner = partitioner,
          .checkpoint = checkpoint};
}

double measured_bytes(const Setup& setup, double allocated) {
  return setup.framework
             ? setup.framework->reserved_bytes(allocated, setup.cluster.device.memory_bytes)
             : allocated;
}

bool fits(const Setup& setup, double allocated) {
  const double reservable = setup.cluster.device.memory_bytes;
  return setup.framework ? setup.framework->fits_after_release(allocated, reservable)
                         : allocated <= reservable;
}

std::vector<double> allocated_peaks(const Plan& plan) {
  // The simulated run's walk: received gradients held from when they arrive (core/memory.hpp).
  std::vector<double> out;
  for (const auto& d : simulate_memory_in_run(PlanContext(plan, 0)).devices)
    out.push_back(d.peak_bytes);
  return out;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "Without portals": every skip edge a -> b (b > a + 1) travels a -> a+1 -> ... -> b, and each
// stage in between keeps the passing tensor as part of its input.
void route_skips_through_stages(PlanContext& ctx) {
  const double mb = ctx.plan.micro_batch_size();
  std::map<std::pair<int, int>, double> chain;
  for (const auto& e : ctx.shape.edges) {
    for (int j = e.from; j < e.to; ++j) chain[{j, j + 1}] += e.bytes_per_sample;
    for (int j = e.from + 1; j < e.to; ++j) {
      ctx.stages[static_cast<size_t>(j)].input_bytes += e.bytes_per_sample * mb;
    }
  }
  ctx.shape.edges.clear();
  for (const auto& [key, bytes] : chain) ctx.shape.edges.push_back({key.first, key.second, bytes});
}

// "Without streams": a device runs its copies in line with its compute, in list order.
void serialize_copies(Schedule& s) {
  for (int d = 0; d < s.num_devices(); ++d) {
    const auto n = static_cast<int32_t>(s.devices[static_cast<size_t>(d)].size());
    for (int32_t i = 1; i < n; ++i) s.control.push_back({{d, i - 1}, {d, i}});
  }
}

struct AblationRun {
  double throughput = kNaN, utilization = kNaN, memory_gib = kNaN;
};

AblationRun run_ablation(const Setup& setup, const Profile& profile, bool streams, bool portals) {
  const Data::Ablation& a = setup.data->ablation;
  PlanRequest r = request(setup, a.model, profile, a.stages, a.run.schedule, a.batch, a.chunks,
                          a.run.checkpoint, a.run.partitioner);
  const Plan plan = make_plan(r);
  PlanContext ctx(plan, 0);
  if (!portals) route_skips_through_stages(ctx);
  Schedule s = make_schedule(a.run.schedule, ctx.shape);
  if (!streams) serialize_copies(s);
  const SimResult sim = simulate_plan(ctx, s, "torchgpipe Table 1");
  AblationRun out;
  out.throughput = sim.metrics.throughput_samples_per_s;
  out.utilization = 0;
  out.memory_gib = 0;
  for (const auto& d : sim.metrics.devices) {
    out.utilization += d.utilization / static_cast<double>(sim.metrics.devices.size());
    out.memory_gib += measured_bytes(setup, d.peak_memory_bytes) / kGiB;
  }
  return out;
}

ReproTable ablation_table(const Setup& setup, const ReferenceTable& ref) {
  const Data::Ablation& a = setup.data->ablation;
  const TextArgs args = setup.args();
  ReproTable t = a.table.table(args);
  const Profile profile = sgd_profile(setup, a.model);
  std::vector<AblationRun> runs;
  std::vector<std::string> names;
  size_t base = ref.rows.size();  // the first modelled row (dependency only)
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const bool dep = ref.cell(i, "dependency") == "yes";
    const bool streams = ref.cell(i, "streams") == "yes", portals = ref.cell(i, "portals") == "yes";
    names.push_back(fmt::format("{}{}{}", dep ? "dependency" : "baseline",
                                streams ? " + streams" : "", portals ? " + portals" : ""));
    runs.push_back(dep ? run_ablation(setup, profile, streams, portals) : AblationRun{});
    if (dep && base == ref.rows.size()) base = i;
  }
  const std::string not_modelled = a.not_modelled(args);
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const bool modelled = std::isfinite(runs[i].throughput);
    const std::string note = modelled ? "" : not_modelled;
    t.rows.push_back({names[i], "throughput", ref.number(i, "throughput_per_s"), runs[i].throughput,
                      "samples/s", note});
    t.rows.push_back({names[i], "GPU utilization", ref.number(i, "utilization"),
                      runs[i].utilization, "", modelled ? a.utilization(args) : note});
    t.rows.push_back({names[i], "memory usage", ref.number(i, "memory_gib"), runs[i].memory_gib,
                      "GiB", modelled ? a.memory(args) : note});
    if (base < ref.rows.size() && i > base) {
      t.rows.push_back({names[i], "speed-up over dependency only",
                        ref.number(i, "throughput_per_s") / ref.number(base, "throughput_per_s"),
                        runs[i].throughput / runs[base].throughput, "x", a.speedup(args)});
    }
  }
  return t;
}

ReproResult run_entry(const Data& data, const ReproContext& context) {
  const ReferenceTable t1 = load_reference(context, data.ablation_reference);
  const ReferenceTable t3 = load_reference(context, data.memory_reference);
  Setup setup;
  setup.catalog = &context.catalog;
  setup.cluster = load_cluster(data.cluster, context.catalog);
  setup.data = &data;
  if (const FrameworkMemory* fw =
          FrameworkCatalog::load_dir(context.catalog.dir()).for_device(setup.cluster.device.name))
    setup.framework = *fw;
  const TextArgs args = setup.args();
  ReproResult res;
  res.citation = data.citation(TextArgs(args).set("ablation", t1.path).set("memory", t3.path));
  res.tables.push_back(memory_table(setup, t3));
  res.tables.push_back(ablation_table(setup, t1));
  for (auto& t : speed_tables(setup)) res.tables.push_back(std::move(t));
  for (const Text& a : data.assumptions) res.assumptions.push_back(a(args));
  for (auto& note : memory_notes(setup, t3, res.tables.front())) {
    res.assumptions.push_back(std::move(note));
  }
  for (const Text& a : data.closing_notes) res.assumptions.push_back(a(args));
  return res;
}

}  // namespace

}  // namespace torchgpipe

std::unique_ptr<ReproEntry> make_torchgpipe_entry() {
  return std::make_unique<DataEntry<torchgpipe::Data>>(
      "torchgpipe", torchgpipe::load_data, cluster_title<torchgpipe::Data>, torchgpipe::run_entry);
}

}  // namespace pipetwin::sim
