#include "exec/runtime/executor.hpp"

#include <fmt/format.h>

#include "core/schedule/generators.hpp"
#include "exec/platform/c10d_control_plane.hpp"
#include "exec/platform/tp_comm.hpp"
#include "exec/runtime/session.hpp"
#include "exec/runtime/timeline_exchange.hpp"

namespace pipetwin::exec {

int device_rank(int device, int devices, int world) {
  return static_cast<int>(static_cast<int64_t>(device) * world / devices);
}

ExecResult execute_plan(const Plan& plan, const ExecOptions& opt, Distributed* dist) {
  if (plan.tp() > 1 && dist != nullptr) {
    TensorParallelJob job =
        join_tensor_parallel(*dist, plan.tp(), plan.dp * plan.devices_per_replica());
    ExecOptions o = opt;
    o.tp_comm = job.comm;
    C10dControlPlane control(*job.slice);
    ExecResult r = execute_plan(plan, o, control);
    r.tp_rank = job.tp_rank;
    return r;
  }
  const std::unique_ptr<ControlPlane> control = make_control_plane(dist);
  return execute_plan(plan, opt, *control);
}

ExecResult execute_plan(const Plan& plan, const ExecOptions& opt, ControlPlane& control,
                        TransportFactory transport) {
  PipelineSession session(plan, opt, control, nullptr, std::move(transport));
  const int iterations = session.shape().iterations;
  WindowResult w = session.run_window(0, iterations, opt.warmup);
  const PipelineShape& sh = session.shape();
  ExecResult result;
  Timeline& t = result.timeline;
  t.source = "measured";
  t.schedule = plan.schedule;
  const PlanContext ctx(plan, iterations);
  for (int d = 0; d < session.devices(); ++d) {
    t.device_names.push_back(fmt::format(
        "replica {} device {} ({} #{})", d / sh.devices_per_replica, d % sh.devices_per_replica,
        plan.cluster.device.name, ctx.placement[static_cast<size_t>(d)]));
    if (session.rank_of_device(d) == session.rank() && session.device(d).is_cuda())
      t.device_names.back() += " on " + session.device(d).describe();
  }
  t.memory.resize(static_cast<size_t>(session.devices()));
  t.peak_memory_bytes.assign(static_cast<size_t>(session.devices()), 0);
  for (auto& [d, events] : w.events) {
    for (auto& e : events) t.events.push_back(e);
    t.memory[static_cast<size_t>(d)] = std::move(w.memory[d]);
    t.peak_memory_bytes[static_cast<size_t>(d)] =
        static_cast<double>(session.device(d).peak_bytes());
  }
  t = gather_timeline(control, t);
  result.metrics =
      compute_metrics(t, sh.num_stages, schedule_info(plan.schedule).asynchronous, plan.batch_size);
  for (double l : w.step_loss_sum) result.step_loss.push_back(l / plan.batch_size);
  for (const auto& [d, stages] : session.hosted()) {
    for (const auto& [s, rt] : stages) {
      std::vector<at::Tensor> params;
      for (const auto& p : rt->parameters()) params.push_back(p.cpu());  // no copy on CPU
      const int replica = d / sh.devices_per_replica;
      const int copy = sh.stage_replica(s, d % sh.devices_per_replica);
      if (copy == 0) {
        result.parameters[{replica, s}] = std::move(params);
      } else {
        result.stage_copies[{replica, s, copy}] = std::move(params);
      }
    }
  }
  return result;
}

}  // namespace pipetwin::exec
