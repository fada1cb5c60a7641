#include "exec/executor.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "exec/board.hpp"
#include "exec/c10d_transport.hpp"
#include "exec/distributed.hpp"
#include "exec/host.hpp"
#include "exec/inprocess_transport.hpp"
#include "exec/memory_tracker.hpp"
#include "exec/timeline_exchange.hpp"
#include "exec/worker.hpp"
#include "models/zoo.hpp"
#include "sim/planner.hpp"

namespace pipetwin::exec {

int device_rank(int device, int devices, int world) {
  return static_cast<int>(static_cast<int64_t>(device) * world / devices);
}

namespace {

// The plan's layers must be the model's layers, in the same order.
void check_plan_matches_model(const Plan& plan, const models::LayeredModel& model) {
  const auto& layers = plan.profile.layers;
  if (layers.size() != model.layers.size()) {
    throw InputError(fmt::format("plan: profile.layers: {} layers, but model {} has {}",
                                 layers.size(), plan.model, model.layers.size()));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name != model.layers[i].name) {
      throw InputError(
          fmt::format("plan: profile.layers[{}].name: \"{}\", but layer {} of model {} is \"{}\"",
                      i, layers[i].name, i, plan.model, model.layers[i].name));
    }
    // Gradient buckets are cut from the profile's parameter bytes: a layer the profile thinks
    // has none would never be all-reduced.
    if (layers[i].param_bytes == 0 && model.layers[i].num_parameters() > 0) {
      throw InputError(
          fmt::format("plan: profile.layers[{}].param_bytes: 0, but layer {} of model {} "
                      "has {} parameters",
                      i, i, plan.model, model.layers[i].num_parameters()));
    }
  }
}

void check_chain_stages(const PipelineShape& sh) {
  std::vector<int> in(static_cast<size_t>(sh.num_stages), 0),
      out(static_cast<size_t>(sh.num_stages), 0);
  for (const auto& e : sh.edges) {
    if (++in[static_cast<size_t>(e.to)] > 1 || ++out[static_cast<size_t>(e.from)] > 1) {
      throw InputError(
          fmt::format("plan: stages: stage {} -> {} adds a second data edge; the "
                      "executor runs chains of stages (one input, one output each)",
                      e.from, e.to));
    }
  }
}

// Output shape of every layer for one micro-batch, from a dry run without autograd.
std::vector<at::Tensor> layer_outputs_like(models::LayeredModel& model, const at::Tensor& input) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  at::Tensor x = input;
  for (auto& l : model.layers) {
    x = l.module.forward(x);
    out.push_back(at::empty_like(x));
  }
  return out;
}

}  // namespace

ExecResult execute_plan(const Plan& plan, const ExecOptions& opt, Distributed* dist) {
  opt.optimizer.validate();
  MemoryTracker::install();
  tune_malloc();
  // The main thread builds the model and dry-runs it: keep it to the stage thread count, so no
  // idle OpenMP team spins on the cores the stages will use.
  at::set_num_threads(opt.threads_per_stage);
  const PlanContext ctx(plan, opt.iterations);
  const at::ScalarType dtype = opt.float64 ? at::kDouble : at::kFloat;
  models::LayeredModel model = models::build_model(plan.model, dtype, opt.seed);
  check_plan_matches_model(plan, model);
  check_chain_stages(ctx.shape);
  if (opt.check_memory) sim::check_fits(plan);
  const CompiledSchedule cs(make_schedule(plan.schedule, ctx.shape), "schedule " + plan.schedule);

  const int world = dist ? dist->world_size() : 1, rank = dist ? dist->rank() : 0;
  const int devices = cs.num_devices();
  std::vector<int> ranks;
  for (int d = 0; d < devices; ++d) ranks.push_back(device_rank(d, devices, world));

  AbortSignal abort(opt.timeout);
  std::unique_ptr<Transport> transport;
  if (dist) {
    auto t = std::make_unique<C10dTransport>(*dist, ranks, abort);
    std::vector<std::vector<int>> sets;
    for (int s = 0; s < ctx.shape.num_stages; ++s) {
      std::vector<int> set;
      for (int r = 0; r < ctx.shape.replicas; ++r)
        set.push_back(r * ctx.shape.devices_per_replica + ctx.shape.device_of(s));
      sets.push_back(set);
    }
    t->prepare_groups(sets);
    transport = std::move(t);
  } else {
    transport = std::make_unique<InProcessTransport>(abort);
  }

  auto data =
      opt.data == "synthetic"
          ? synthetic_batches(model, plan.batch_size, opt.seed, opt.float64)
          : digits_batches(plan.batch_size, opt.seed, opt.data == "digits-tokens", opt.float64);
  data->configure(plan.batch_size, plan.dp, plan.chunks);
  const auto like = layer_outputs_like(model, data->input(0, 0, 0));
  auto boundary_like = [&](int from, int /*to*/) {
    const auto& layers = plan.stages[static_cast<size_t>(from)].layers;
    return like[static_cast<size_t>(*std::max_element(layers.begin(), layers.end()))];
  };

  // Stage runtimes of the hosted devices, built with allocations attributed to their device.
  std::vector<std::unique_ptr<StageRuntime>> runtimes;
  std::map<int, std::map<int, StageRuntime*>> by_device;
  for (int d = 0; d < devices; ++d) {
    if (ranks[static_cast<size_t>(d)] != rank) continue;
    MemoryTracker::reset_peak(d);
    MemoryTracker::ScopedDevice attribute(d);
    for (int s : ctx.shape.stages_on(d % ctx.shape.devices_per_replica)) {
      StageSpec spec;
      spec.stage = s;
      spec.layers = ctx.stages[static_cast<size_t>(s)].layers;
      spec.first = true;
      spec.last = true;
      for (const auto& e : ctx.shape.edges) {
        if (e.to == s) spec.first = false;
        if (e.from == s) spec.last = false;
      }
      spec.loss_scale = 1.0 / plan.batch_size;
      spec.per_layer_backward = plan.dp > 1;
      spec.dropout_seed = opt.seed;
      spec.replica = d / ctx.shape.devices_per_replica;
      auto factory = [name = plan.model, dtype, seed = opt.seed, layers = spec.layers] {
        models::LayeredModel m = models::build_model(name, dtype, seed);
        std::vector<torch::nn::AnyModule> out;
        for (int l : layers) out.push_back(m.layers[static_cast<size_t>(l)].module);
        return out;
      };
      auto loss = [&model](const at::Tensor& y, const at::Tensor& t) {
        return model.per_sample_loss(y, t);
      };
      runtimes.push_back(std::make_unique<StageRuntime>(spec, factory, opt.optimizer, loss));
      by_device[d][s] = runtimes.back().get();
    }
  }

  Board board(cs, abort);
  std::mutex loss_mu;
  std::vector<double> step_loss(static_cast<size_t>(ctx.shape.iterations), 0.0);
  WorkerShared shared;
  shared.schedule = &cs;
  shared.context = &ctx;
  shared.board = &board;
  shared.transport = transport.get();
  shared.abort = &abort;
  shared.data = data.get();
  shared.boundary_like = boundary_like;
  shared.threads_per_stage = opt.threads_per_stage;
  shared.pin_threads = opt.pin_threads;
  shared.warmup = opt.warmup;
  shared.on_step = [&](int, int, int step, double loss) {
    std::lock_guard<std::mutex> lock(loss_mu);
    step_loss[static_cast<size_t>(step)] += loss / plan.batch_size;
  };
  StartGate gate(static_cast<int>(by_device.size()));
  shared.gate = &gate;
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  for (auto& [d, stages] : by_device)
    workers.push_back(std::make_unique<DeviceWorker>(d, shared, stages));
  for (auto& w : workers) w->start();
  try {
    gate.wait_warmed_up(abort);
    if (dist) dist->barrier();
    for (const auto& [d, stages] : by_device) MemoryTracker::reset_peak(d);
  } catch (const std::exception& e) {
    abort.raise(fmt::format("start-up: {}", e.what()));
  }
  shared.t0 = std::chrono::steady_clock::now();
  gate.open();
  for (auto& w : workers) w->join();
  if (abort.raised()) {
    const std::string who = dist ? fmt::format("rank {}: ", rank) : std::string();
    throw RunFailure(who + abort.message());
  }

  ExecResult result;
  Timeline& t = result.timeline;
  t.source = "measured";
  t.schedule = plan.schedule;
  for (int d = 0; d < devices; ++d) {
    t.device_names.push_back(
        fmt::format("replica {} device {} ({} #{})", d / ctx.shape.devices_per_replica,
                    d % ctx.shape.devices_per_replica, plan.cluster.device.name,
                    ctx.placement[static_cast<size_t>(d)]));
  }
  t.memory.resize(static_cast<size_t>(devices));
  t.peak_memory_bytes.assign(static_cast<size_t>(devices), 0);
  for (size_t i = 0; i < workers.size(); ++i) {
    for (auto& e : workers[i]->take_events()) t.events.push_back(e);
    const int d = std::next(by_device.begin(), static_cast<long>(i))->first;
    t.memory[static_cast<size_t>(d)] = workers[i]->take_memory();
    t.peak_memory_bytes[static_cast<size_t>(d)] = static_cast<double>(MemoryTracker::peak_bytes(d));
  }
  if (dist) t = gather_timeline(*dist, t);
  result.metrics = compute_metrics(t, ctx.shape.num_stages,
                                   schedule_info(plan.schedule).asynchronous, plan.batch_size);
  result.step_loss = step_loss;
  for (const auto& [d, stages] : by_device) {
    for (const auto& [s, rt] : stages)
      result.parameters[{d / ctx.shape.devices_per_replica, s}] = rt->parameters();
  }
  return result;
}

}  // namespace pipetwin::exec
