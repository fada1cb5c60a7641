#include "sim/pipeline_sim.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/collective.hpp"
#include "core/error.hpp"
#include "core/json_io.hpp"
#include "sim/memory_pools.hpp"
#include "core/routes.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/limits.hpp"
#include "core/schedule/weight_versions.hpp"

namespace pipetwin::sim {

namespace {

// Whether some stage's step into a new weight version costs other than its step in place. Only
// then does the simulator need to know which steps those are, a walk of the whole schedule that
// sweeps over profiles without the distinction (synthetic, analytic) would pay for nothing.
bool step_kinds_differ(const PlanContext& ctx) {
  for (const StageCost& st : ctx.stages) {
    if (st.optimizer_new_version_s != st.optimizer_s) return true;
  }
  return false;
}

// A Send's or Recv's copy: its bytes and the cluster devices the data goes from and to.
struct Copy {
  double bytes = 0;
  int from = 0, to = 0;
};

Copy copy_of(const PlanContext& ctx, const CompiledSchedule& schedule, int id) {
  const Action& a = schedule.action(id);
  const auto& sh = schedule.shape();
  const int dev = schedule.device(id);
  const int replica = dev / sh.devices_per_replica;
  const bool act = a.payload == Payload::kActivation;
  const bool sending = a.op == Op::kSend;
  const int from = (act == sending) ? a.stage : a.peer_stage;
  const int to = (act == sending) ? a.peer_stage : a.stage;
  Copy c;  // bytes of the last edge from -> to
  for (auto e = sh.edges.rbegin(); e != sh.edges.rend(); ++e) {
    if (e->from == from && e->to == to) {
      c.bytes = e->bytes_per_sample * ctx.plan.micro_batch_size();
      break;
    }
  }
  const int peer = replica * sh.devices_per_replica + sh.device_of(a.peer_stage, a.micro_batch);
  const int here = ctx.placement[static_cast<size_t>(dev)];
  const int there = ctx.placement[static_cast<size_t>(peer)];
  c.from = act == sending ? here : there;
  c.to = act == sending ? there : here;
  return c;
}

// The cluster devices of an all-reduce (the stage's devices in every replica), in ring order.
std::vector<int> ring_of(const PlanContext& ctx, const CompiledSchedule& schedule, int id) {
  std::vector<int> devices;
  for (int d : schedule.shape().gradient_copy_devices(schedule.action(id).stage))
    devices.push_back(ctx.placement[static_cast<size_t>(d)]);
  return devices;
}

double bucket_bytes(const PlanContext& ctx, const Action& a) {
  const StageCost& st = ctx.stages[static_cast<size_t>(a.stage)];
  return st.buckets.empty() ? 0 : st.buckets[static_cast<size_t>(a.bucket)].bytes;
}

// On a cluster with a topology, copies and all-reduces move their bytes as flows over the shared
// links (engine.hpp "Network"): a copy is one flow along its route (core/topology.hpp), moved by
// the Send; an all-reduce is its ring's messages, one flow per ring edge, moved by the group's
// first member and sized so that alone they take the algorithm's time (core/collective.hpp).
void add_flows(TaskGraph& g, double bytes, const Route& r) {
  g.flow_bytes.push_back(bytes);
  g.flow_path_links.insert(g.flow_path_links.end(), r.links.begin(), r.links.end());
  g.flow_path_begin.push_back(static_cast<int32_t>(g.flow_path_links.size()));
}

void route_network(const PlanContext& ctx, const CompiledSchedule& schedule, TaskGraph& g) {
  const Cluster& cluster = ctx.plan.cluster;
  // The framework's communication scale (core/framework.hpp) stretches a flow's time alone: its
  // bytes and its latency.
  const double scale = ctx.cost.options().framework.communication_scale;
  g.net_capacity = topology_links(cluster);
  const auto n = static_cast<size_t>(schedule.num_actions());
  g.net_flow_begin.assign(1, 0);
  g.net_latency.assign(n, 0);
  for (int id = 0; id < schedule.num_actions(); ++id) {
    const Action& a = schedule.action(id);
    if (a.op == Op::kSend) {
      const Copy c = copy_of(ctx, schedule, id);
      if (c.bytes > 0 && c.from != c.to) {
        const Route r = route(cluster, c.from, c.to);
        add_flows(g, c.bytes * scale, r);
        g.net_latency[static_cast<size_t>(id)] = r.latency * scale;
      }
    } else if (a.op == Op::kAllReduce && schedule.group_members(schedule.group(id))[0] == id) {
      const std::vector<int> ring = ring_of(ctx, schedule, id);
      if (ring.size() > 1) {
        const AllReduceCost cost =
            allreduce_cost(cluster, g.net_capacity, bucket_bytes(ctx, a), ring);
        std::vector<Route> routes;
        for (size_t i = 0; i < ring.size(); ++i)
          routes.push_back(route(cluster, ring[i], ring[(i + 1) % ring.size()]));
        const double alone = slowest_rate(g.net_capacity, routes);
        // A reduce-scatter (distributed optimizer) is half the ring's messages.
        const double share = ctx.gradient_reduce_share;
        for (const Route& r : routes)
          add_flows(g, (cost.seconds - cost.latency) * alone * scale * share, r);
        g.net_latency[static_cast<size_t>(id)] = cost.latency * scale * share;
      }
    }
    g.net_flow_begin.push_back(static_cast<int32_t>(g.flow_bytes.size()));
  }
}

}  // namespace

PipelineSimulator::PipelineSimulator(const PlanContext& context, CompiledSchedule schedule)
    : ctx_(context),
      schedule_(std::move(schedule)),
      new_version_step_(step_kinds_differ(context) ? steps_writing_new_version(schedule_)
                                                   : std::vector<char>()) {
  const int n = schedule_.num_actions();
  for (int d = 0; d < schedule_.num_devices(); ++d) {
    slowdown_.push_back(ctx_.cost.device_slowdown(ctx_.placement[static_cast<size_t>(d)]));
  }
  tasks_.num_streams = schedule_.num_streams();
  tasks_.duration.resize(static_cast<size_t>(n));
  tasks_.stream.resize(static_cast<size_t>(n));
  tasks_.group.resize(static_cast<size_t>(n));
  tasks_.dep_begin.resize(static_cast<size_t>(n) + 1);
  tasks_.dep_begin[0] = 0;
  for (int id = 0; id < n; ++id) {
    const auto deps = schedule_.deps(id);
    tasks_.dep_begin[static_cast<size_t>(id) + 1] =
        tasks_.dep_begin[static_cast<size_t>(id)] + static_cast<int32_t>(deps.size());
  }
  tasks_.dep_pred.resize(static_cast<size_t>(tasks_.dep_begin.back()));
  tasks_.dep_offset.resize(tasks_.dep_pred.size());
  for (int id = 0; id < n; ++id) {
    tasks_.duration[static_cast<size_t>(id)] = duration(id);
    tasks_.stream[static_cast<size_t>(id)] = schedule_.stream(id);
    tasks_.group[static_cast<size_t>(id)] = schedule_.group(id);
    const Action& a = schedule_.action(id);
    auto k = static_cast<size_t>(tasks_.dep_begin[static_cast<size_t>(id)]);
    for (const auto& d : schedule_.deps(id)) {
      tasks_.dep_pred[k] = d.pred;
      double offset = -1;
      if (d.from_layer >= 0 && a.op == Op::kAllReduce) {
        const StageCost& st = ctx_.stages[static_cast<size_t>(a.stage)];
        const bool weight_half = schedule_.action(d.pred).op == Op::kBackwardWeight;
        offset = (weight_half ? st.bucket_weight_ready_s
                              : st.bucket_ready_s)[static_cast<size_t>(a.bucket)];
      }
      tasks_.dep_offset[k++] = offset;
    }
  }
  tasks_.stream_begin.assign(1, 0);
  tasks_.stream_tasks.reserve(static_cast<size_t>(n));
  for (int s = 0; s < tasks_.num_streams; ++s) {
    const auto acts = schedule_.stream_actions(s);
    tasks_.stream_tasks.insert(tasks_.stream_tasks.end(), acts.begin(), acts.end());
    tasks_.stream_begin.push_back(static_cast<int32_t>(tasks_.stream_tasks.size()));
  }
  tasks_.group_begin.assign(1, 0);
  for (int g = 0; g < schedule_.num_groups(); ++g) {
    const auto members = schedule_.group_members(g);
    tasks_.group_members.insert(tasks_.group_members.end(), members.begin(), members.end());
    tasks_.group_begin.push_back(static_cast<int32_t>(tasks_.group_members.size()));
  }
  share_compute();
  if (ctx_.plan.cluster.topology) route_network(ctx_, schedule_, tasks_);
  tasks_.prepare();
}

void PipelineSimulator::share_compute() {
  // Compute streams of devices that share a core slow each other down (processor sharing).
  const int n = schedule_.num_actions();
  bool sharing = false;
  // Where a node has fewer cores than devices (Cluster::cores_per_node), the devices on one core
  // take turns on it.
  const Cluster& cluster = ctx_.plan.cluster;
  tasks_.stream_share.assign(static_cast<size_t>(tasks_.num_streams), -1);
  tasks_.stream_core.clear();
  if (cluster.cores_per_node > 0) tasks_.stream_core.assign(tasks_.stream_share.size(), -1);
  for (int d = 0; d < schedule_.num_devices(); ++d) {
    const int placed = ctx_.placement[static_cast<size_t>(d)];
    const auto compute = static_cast<size_t>(d * kStreamsPerDevice);
    const int group = cluster.sharing_group(placed);
    tasks_.stream_share[compute] = group;
    if (!tasks_.stream_core.empty()) tasks_.stream_core[compute] = cluster.core_of(placed);
    sharing = sharing || group >= 0;
  }
  if (sharing) {
    tasks_.shared_duration.resize(static_cast<size_t>(n));
    for (int id = 0; id < n; ++id)
      tasks_.shared_duration[static_cast<size_t>(id)] = shared_duration(id);
    cold_starts();
    if (ctx_.plan.cluster.device.serial_backward) serialize_backward();
  } else {
    tasks_.stream_share.clear();
    tasks_.stream_core.clear();
  }
}

void PipelineSimulator::serialize_backward() {
  // One backward at a time per sharing group (core/cluster.hpp serial_backward): the group's lock.
  const int n = schedule_.num_actions();
  tasks_.lock.assign(static_cast<size_t>(n), -1);
  for (int id = 0; id < n; ++id) {
    if (!is_backward(schedule_.action(id).op)) continue;
    tasks_.lock[static_cast<size_t>(id)] =
        tasks_.stream_share[static_cast<size_t>(tasks_.stream[static_cast<size_t>(id)])];
  }
}

void PipelineSimulator::cold_starts() {
  // The profile's cold figures were measured beside a co-runner on the core's other half, which
  // evicts a waiting stage's weights and activations from the caches they share: they apply to
  // devices in a sharing group, where that is what the other stage does while this one waits.
  const std::vector<double>& waits = ctx_.cost.cold_pauses();
  if (waits.empty()) return;
  const int n = schedule_.num_actions();
  tasks_.cold_waits = waits;
  tasks_.cold_extra.assign(static_cast<size_t>(n) * waits.size(), 0.0);
  for (int id = 0; id < n; ++id) {
    if (tasks_.stream_share[static_cast<size_t>(tasks_.stream[static_cast<size_t>(id)])] < 0)
      continue;
    const Action& a = schedule_.action(id);
    const StageCost& st = ctx_.stages[static_cast<size_t>(a.stage)];
    // A split backward's cold start falls on its first half, the one that waited.
    const std::vector<double>* extra = is_input_backward(a.op) ? &st.cold_backward_s
                                       : a.op == Op::kForward || a.op == Op::kRecompute
                                           ? &st.cold_forward_s
                                           : nullptr;
    if (extra == nullptr || extra->size() != waits.size()) continue;
    for (size_t i = 0; i < waits.size(); ++i) {
      double x = slowdown(id) * (*extra)[i];
      if (i > 0) x = std::max(x, tasks_.cold_extra[static_cast<size_t>(id) * waits.size() + i - 1]);
      tasks_.cold_extra[static_cast<size_t>(id) * waits.size() + i] = x;  // never less when longer
    }
  }
}

// A stage's compute times as one simulation reads them: alone on its core, or while a device
// sharing the core works too (the *_shared_s fields).
struct ComputeTimes {
  double StageCost::*forward;
  double StageCost::*backward;
  double StageCost::*backward_weight;
  double StageCost::*recompute;
  double StageCost::*optimizer;
  double StageCost::*optimizer_new_version;
};

namespace {

constexpr ComputeTimes kAlone{&StageCost::forward_s,         &StageCost::backward_s,
                              &StageCost::backward_weight_s, &StageCost::recompute_s,
                              &StageCost::optimizer_s,       &StageCost::optimizer_new_version_s};
constexpr ComputeTimes kShared{
    &StageCost::forward_shared_s,         &StageCost::backward_shared_s,
    &StageCost::backward_weight_shared_s, &StageCost::recompute_shared_s,
    &StageCost::optimizer_shared_s,       &StageCost::optimizer_new_version_shared_s};

}  // namespace

std::optional<double> PipelineSimulator::compute_duration(int id, const ComputeTimes& t) const {
  const Action& a = schedule_.action(id);
  const StageCost& st = ctx_.stages[static_cast<size_t>(a.stage)];
  switch (a.op) {
    case Op::kForward:
      return slowdown(id) * st.*t.forward;
    case Op::kBackward:
      return slowdown(id) * st.*t.backward;
    case Op::kBackwardInput:
      return slowdown(id) * (st.*t.backward - st.*t.backward_weight);
    case Op::kBackwardWeight:
      return slowdown(id) * st.*t.backward_weight;
    case Op::kRecompute:
      return slowdown(id) * st.*t.recompute;
    case Op::kOptimizerStep:
      return slowdown(id) * (new_version_step(id) ? st.*t.optimizer_new_version : st.*t.optimizer);
    default:
      return std::nullopt;
  }
}

double PipelineSimulator::shared_duration(int id) const {
  const auto shared = compute_duration(id, kShared);
  return shared ? *shared : duration(id);
}

double PipelineSimulator::duration(int id) const {
  if (const auto compute = compute_duration(id, kAlone)) return *compute;
  const Action& a = schedule_.action(id);
  if (a.op == Op::kSend || a.op == Op::kRecv) {
    const Copy c = copy_of(ctx_, schedule_, id);
    return ctx_.cost.transfer_s(c.bytes, c.from, c.to);
  }
  if (a.op == Op::kAllReduce) {
    return ctx_.gradient_reduce_share *
           ctx_.cost.allreduce_s(bucket_bytes(ctx_, a), ring_of(ctx_, schedule_, id));
  }
  return 0;
}

void PipelineSimulator::add_tensor_parallel_event(Timeline& t, int id, double start,
                                                  double end) const {
  if (ctx_.plan.tp() < 2) return;
  const Action& a = schedule_.action(id);
  const StageCost& st = ctx_.stages[static_cast<size_t>(a.stage)];
  double part = 0;
  if (a.op == Op::kForward) part = st.tp_forward_s;
  if (a.op == Op::kRecompute) part = st.tp_recompute_s;
  if (is_input_backward(a.op)) part = st.tp_backward_s;
  if (part <= 0) return;
  Action tp = a;
  tp.op = Op::kTensorParallel;
  tp.payload = is_input_backward(a.op) ? Payload::kGradient : Payload::kActivation;
  t.events.push_back({schedule_.device(id), tp, std::max(start, end - slowdown(id) * part), end});
}

std::vector<std::string> PipelineSimulator::device_names() const {
  std::vector<std::string> names;
  const auto& sh = schedule_.shape();
  for (int d = 0; d < schedule_.num_devices(); ++d) {
    const int first = ctx_.placement[static_cast<size_t>(d)], t = ctx_.plan.tp();
    const std::string where =
        t > 1 ? fmt::format("#{}-#{}", first, first + t - 1) : fmt::format("#{}", first);
    names.push_back(fmt::format("replica {} device {} ({} {})", d / sh.devices_per_replica,
                                d % sh.devices_per_replica, ctx_.plan.cluster.device.name, where));
  }
  return names;
}

void PipelineSimulator::run_engine(std::vector<double>& start, std::vector<double>& end) {
  engine_.run(tasks_, start, end);
}

SimResult PipelineSimulator::run() {
  SimResult r;
  std::vector<double> start, end;
  run_engine(start, end);
  r.memory = walk_memory(schedule_, ctx_.stages);
  Timeline& t = r.timeline;
  t.source = "simulated";
  t.schedule = schedule_.schedule().kind;
  t.device_names = device_names();
  t.memory.resize(static_cast<size_t>(schedule_.num_devices()));
  t.events.reserve(static_cast<size_t>(schedule_.num_actions()));
  for (int id = 0; id < schedule_.num_actions(); ++id) {
    const Action& a = schedule_.action(id);
    const int dev = schedule_.device(id);
    t.events.push_back({dev, a, start[static_cast<size_t>(id)], end[static_cast<size_t>(id)]});
    add_tensor_parallel_event(t, id, start[static_cast<size_t>(id)], end[static_cast<size_t>(id)]);
    if (stream_of(a.op) == StreamKind::kCompute) {
      // Allocation at the start of forward/recompute, release at the end of the backward (of its
      // weight half when split).
      const bool releases = a.op == Op::kBackward || a.op == Op::kBackwardWeight;
      const double when = releases ? end[static_cast<size_t>(id)] : start[static_cast<size_t>(id)];
      t.memory[static_cast<size_t>(dev)].push_back(
          {when, r.memory.after_action[static_cast<size_t>(id)]});
    }
  }
  for (const auto& d : r.memory.devices) t.peak_memory_bytes.push_back(d.peak_bytes);
  r.framework_bytes =
      framework_bytes_by_device(ctx_.plan.cluster, ctx_.placement, t.peak_memory_bytes);
  r.metrics = compute_metrics(t, schedule_.shape().num_stages,
                              schedule_info(ctx_.plan.schedule).asynchronous, ctx_.plan.batch_size);
  return r;
}

MemoryWalk PipelineSimulator::memory_in_run() {
  std::vector<double> start, end;
  run_engine(start, end);
  return walk_memory(schedule_, ctx_.stages, start, end);
}

MemoryWalk simulate_memory_in_run(const PlanContext& context) {
  PipelineSimulator sim(context,
                        CompiledSchedule(make_schedule(context.plan.schedule, context.shape),
                                         "schedule " + context.plan.schedule));
  return sim.memory_in_run();
}

SimResult simulate_plan(const PlanContext& context) {
  return simulate_plan(context, make_schedule(context.plan.schedule, context.shape),
                       "schedule " + context.plan.schedule);
}

SimResult simulate_plan(const PlanContext& context, const Schedule& custom,
                        const std::string& origin) {
  PipelineSimulator sim(context, CompiledSchedule(custom, origin));
  return sim.run();
}

SimResult simulate_checked(const PlanContext& context, const std::string& origin,
                           const std::string& schedule_file) {
  try {
    check_action_limit(context.plan.schedule, context.shape);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", origin, e.what()));
  }
  if (schedule_file.empty()) return simulate_plan(context);
  const Json doc = load_json_file(schedule_file);
  return simulate_plan(context, schedule_from_json(JsonView(doc, schedule_file)), schedule_file);
}

}  // namespace pipetwin::sim
