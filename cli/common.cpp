#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::cli {

void plan_training_defaults(const Profile& profile, std::string& dtype, bool float64,
                            std::string& optimizer, double& momentum) {
  if (dtype.empty() && !float64 && profile.dtype != "float32" && profile.dtype != "tfloat32") {
    dtype = profile.dtype;
  }
  if (!optimizer.empty()) return;
  optimizer = profile.optimizer == "adam" ? "adam" : "sgd";
  if (profile.optimizer == "momentum" && momentum == 0) momentum = 0.9;
}

Catalog load_catalog(const std::string& dir) {
  return Catalog::load(dir.empty() ? Catalog::default_dir() : dir);
}

namespace {

// "K=4 stages on 4 devices", or "8 stages on K=4 devices" when devices host several stages;
// "... on 4 groups of t=2 devices" with tensor parallelism.
std::string stages_text(const Plan& p) {
  const std::string devices =
      p.tp() > 1 ? fmt::format("groups of t={} devices", p.tp()) : std::string("devices");
  if (p.num_stages() == p.devices_per_replica()) {
    return fmt::format("K={} stages on {} {}", p.num_stages(), p.devices_per_replica(), devices);
  }
  return fmt::format("{} stages on K={} {}", p.num_stages(), p.devices_per_replica(), devices);
}

// "tensor parallel: t=2, sequence parallel; groups 0-1, 2-3; distributed optimizer over dp 2".
std::string parallel_line(const PlanContext& ctx) {
  const Plan& p = ctx.plan;
  std::string out;
  if (p.tp() > 1 || p.tensor_parallel.selective_recompute) {
    std::vector<std::string> groups;
    for (int first : ctx.placement) groups.push_back(fmt::format("{}-{}", first, first + p.tp() - 1));
    out = fmt::format("tensor parallel: {}", describe(p.tensor_parallel));
    if (p.tp() > 1) out += fmt::format("; groups {}", fmt::join(groups, ", "));
  }
  if (p.distributed_optimizer) {
    out += fmt::format("{}distributed optimizer over dp {}", out.empty() ? "" : "; ", p.dp);
  }
  return out.empty() ? out : out + "\n";
}

std::string device_text(const PlanContext& ctx, int device) {
  if (ctx.plan.tp() < 2) return std::to_string(device);
  const int first = ctx.placement[static_cast<size_t>(device)];
  return fmt::format("{}-{}", first, first + ctx.plan.tp() - 1);
}

// "stages per device: d0 = [0, 7], d1 = [1, 6], ...", when a device hosts several stages.
std::string layout_line(const Plan& p) {
  if (p.num_stages() == p.devices_per_replica()) return "";
  std::vector<std::vector<int>> on(static_cast<size_t>(p.devices_per_replica()));
  for (int s = 0; s < p.num_stages(); ++s) {
    on[static_cast<size_t>(p.stages[static_cast<size_t>(s)].device)].push_back(s);
  }
  std::vector<std::string> parts;
  for (size_t d = 0; d < on.size(); ++d)
    parts.push_back(fmt::format("d{} = [{}]", d, fmt::join(on[d], ", ")));
  return fmt::format("stages per device: {}\n", fmt::join(parts, ", "));
}

}  // namespace

std::string plan_summary(const PlanContext& ctx) {
  const Plan& p = ctx.plan;
  std::string out = fmt::format(
      "plan: {} on {} ({} x {} {}), schedule {}, {} x dp {}, batch {} = {} x M={} chunks x "
      "micro-batch {}, checkpoint {}, partitioner {}, {}{}\n",
      p.model, p.cluster.name, p.cluster.nodes, p.cluster.devices_per_node, p.cluster.device.name,
      p.schedule, stages_text(p), p.dp, p.batch_size, p.dp, p.chunks, p.micro_batch_size(),
      checkpoint_name(p.checkpoint), p.partitioner, p.profile.dtype,
      p.profile.optimizer.empty() ? "" : ", optimizer " + p.profile.optimizer);
  out += layout_line(p) + parallel_line(ctx);
  Table t({"stage", p.tp() > 1 ? "devices" : "device", "layers", "forward", "backward", "params",
           "activations/mb"});
  for (size_t s = 0; s < ctx.stages.size(); ++s) {
    const auto& st = ctx.stages[s];
    const auto& layers = p.stages[s].layers;
    const int lo = *std::min_element(layers.begin(), layers.end());
    const int hi = *std::max_element(layers.begin(), layers.end());
    const bool contiguous = hi - lo + 1 == static_cast<int>(layers.size());
    t.add({std::to_string(s), device_text(ctx, p.stages[s].device),
           contiguous ? fmt::format("{}..{}", lo, hi) : fmt::format("{} layers", layers.size()),
           fmt_seconds(st.forward_s), fmt_seconds(st.backward_s), fmt_bytes(st.param_bytes),
           fmt_bytes(st.input_bytes + st.saved_bytes)});
  }
  return out + t.render();
}

namespace {

// One row per device. On a GPU the framework's memory beside the tensors' peak
// (sim/memory_pools.hpp) gets its own column, and the capacity counts both.
std::string device_table(const PlanContext& ctx, const Metrics& m) {
  const Plan& p = ctx.plan;
  std::vector<double> peaks;
  for (const auto& d : m.devices) peaks.push_back(d.peak_memory_bytes);
  std::vector<double> framework(peaks.size(), 0.0);
  if (ctx.placement.size() >= peaks.size())
    framework = framework_bytes_by_device(p.cluster, ctx.placement, peaks);
  const bool any = std::any_of(framework.begin(), framework.end(), [](double b) { return b > 0; });
  std::vector<std::string> head = {"device", "utilization", "busy", "comm", "peak memory"};
  if (any) head.push_back("framework");
  head.push_back("capacity");
  Table dev(head);
  for (size_t i = 0; i < m.devices.size(); ++i) {
    const auto& d = m.devices[i];
    std::vector<std::string> row = {d.name, fmt_percent(d.utilization), fmt_seconds(d.busy_s),
                                    fmt_seconds(d.comm_s), fmt_bytes(d.peak_memory_bytes)};
    if (any) row.push_back(fmt_bytes(framework[i]));
    row.push_back(
        fmt_percent((d.peak_memory_bytes + framework[i]) / p.cluster.device.memory_bytes));
    dev.add(row);
  }
  return dev.render();
}

}  // namespace

std::string metrics_summary(const PlanContext& ctx, const Metrics& m) {
  const Plan& p = ctx.plan;
  std::string out;
  out += fmt::format("{} {}: K={} M={} dp={} batch={} on {}, {} steps\n", m.source, m.schedule,
                     p.num_stages(), p.chunks, p.dp, p.batch_size, p.cluster.name, m.steps);
  Table head({"metric", "value"});
  head.add({"iteration time", fmt_seconds(m.iteration_time_s) +
                                  (m.steady_state ? " (steady state)" : " (whole run)")});
  head.add({"throughput", fmt_rate(m.throughput_samples_per_s) + " samples"});
  head.add({"bubble fraction", fmt_percent(m.bubble_fraction)});
  head.add({"communication", fmt_seconds(m.comm_time_s) + ", " +
                                 fmt_percent(m.comm_overlap_fraction) +
                                 " overlapped with compute"});
  if (m.tensor_parallel_s > 0) {
    head.add({"tensor-parallel collectives",
              fmt_seconds(m.tensor_parallel_s) + " in the passes (all devices)"});
  }
  head.add({"makespan", fmt_seconds(m.makespan_s)});
  out += head.render() + "\n";
  out += device_table(ctx, m);
  if (!m.staleness.empty()) {
    out += "\n";
    Table st({"stage", "staleness max", "staleness mean", "gradient staleness", "weight versions"});
    for (size_t s = 0; s < m.staleness.size(); ++s) {
      const auto& x = m.staleness[s];
      st.add({std::to_string(s), std::to_string(x.max), fmt::format("{:.2f}", x.mean),
              std::to_string(x.gradient_max), std::to_string(x.weight_versions)});
    }
    out += st.render();
  }
  return out;
}

}  // namespace pipetwin::cli
