#include "exec/runtime/session.hpp"

#include <algorithm>
#include <set>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "exec/platform/host.hpp"
#include "exec/platform/memory_tracker.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/board.hpp"
#include "exec/runtime/loss_scaler.hpp"
#include "exec/runtime/worker.hpp"
#include "models/tensor_parallel_model.hpp"
#include "models/zoo.hpp"
#include "sim/planner.hpp"

namespace pipetwin::exec {

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

// The profile's layer graph must be the model's: the simulator's stage edges come from the
// profile, the tensors the executor sends from the model's skip connections.
void check_edges_match_model(const Plan& plan, const models::LayeredModel& model) {
  std::set<std::pair<int, int>> profile, built;
  for (const auto& e : plan.profile.effective_edges()) profile.insert({e.from, e.to});
  for (const auto& e : model.edges()) built.insert(e);
  for (const auto& [from, to] : built) {
    if (!profile.count({from, to})) {
      throw InputError(
          fmt::format("plan: profile.edges: no edge {} -> {}, but model {} has one "
                      "(layer {} reads layer {}'s output)",
                      from, to, plan.model, to, from));
    }
  }
  for (const auto& [from, to] : profile) {
    if (!built.count({from, to})) {
      throw InputError(
          fmt::format("plan: profile.edges: edge {} -> {}, but layer {} of model {} "
                      "does not read layer {}",
                      from, to, to, plan.model, from));
    }
  }
}

// The stage edges the schedule was built with must carry every tensor that crosses stages.
void check_stage_edges(const PipelineShape& sh, const StageGraph& graph) {
  std::set<std::pair<int, int>> scheduled;
  for (const auto& e : sh.edges) scheduled.insert({e.from, e.to});
  const auto needed = graph.edges();
  if (scheduled != std::set<std::pair<int, int>>(needed.begin(), needed.end())) {
    std::string list;
    for (const auto& [from, to] : needed)
      list += fmt::format("{}{} -> {}", list.empty() ? "" : ", ", from, to);
    throw InputError(
        fmt::format("plan: stages: the schedule's stage edges differ from those the "
                    "model's tensors cross ({})",
                    list));
  }
}

// F_frozen and AutoCache hand on one tensor, the frozen prefix's output: no skip may leave it.
void check_frozen_prefix(const Plan& plan, const models::LayeredModel& model) {
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const int from = model.layers[l].skip_from;
    if (from >= 0 && from < plan.frozen_layers) {
      throw InputError(
          fmt::format("plan: frozen_layers: {}, but layer {} ({}) reads frozen layer "
                      "{} through a skip connection; freeze fewer than {} layers",
                      plan.frozen_layers, l, model.layers[l].name, from, from + 1));
    }
  }
}

// Output shape and dtype of every layer for one micro-batch, from a dry run without autograd.
// Under autocast the dry run runs in the CPU's autocast in bfloat16 (the one dtype LibTorch 1.13's
// CPU autocast has), and what it produces in bfloat16 crosses stages in the run's autocast dtype;
// senders cast to these dtypes (worker.cpp), so a GPU whose autocast lists an operation the CPU's
// does not still puts on the wire what the receiver expects. For a GPU run, a layer this CPU cannot
// run under autocast (check_cpu_autocast_trains) goes without it, and from there on every floating
// output crosses in the autocast dtype.
std::vector<at::Tensor> layer_outputs_like(models::LayeredModel& model, const at::Tensor& input,
                                           at::ScalarType autocast) {
  at::NoGradGuard no_grad;
  const bool mixed = autocast != at::ScalarType::Undefined;
  bool cpu_autocast = mixed;
  std::vector<at::Tensor> out;
  std::map<int, at::Tensor> values{{models::LayeredModel::kModelInput, input}};
  for (int l = 0; l < static_cast<int>(model.layers.size()); ++l) {
    try {
      const AutocastGuard guard(at::kCPU, at::kBFloat16, cpu_autocast);
      model.forward_layers({l}, values);
    } catch (const std::exception&) {
      if (!cpu_autocast) throw;
      cpu_autocast = false;
      model.forward_layers({l}, values);
    }
    const at::Tensor& y = values.at(l);
    const bool reduced = mixed && (cpu_autocast ? y.scalar_type() == at::kBFloat16
                                                : c10::isFloatingType(y.scalar_type()));
    out.push_back(at::empty(y.sizes(), y.options().dtype(reduced ? autocast : y.scalar_type())));
  }
  return out;
}

// Tensor parallelism (models/tensor_parallel_model.hpp) needs the job's group and a model with
// tensor-parallel layers.
void check_tensor_parallel(const Plan& plan, const ExecOptions& opt,
                           const models::LayeredModel& model) {
  if (plan.tp() == 1) return;
  if (!opt.tp_comm) {
    throw InputError(fmt::format(
        "tensor_parallel: size {} runs one process per shard; run with --nproc (dp x devices x "
        "{}) ranks, not in threads of one process",
        plan.tp(), plan.tp()));
  }
  if (opt.tp_comm->size() != plan.tp()) {
    throw std::logic_error(fmt::format("session: a tensor-parallel group of {} for tp {}",
                                       opt.tp_comm->size(), plan.tp()));
  }
  models::check_tensor_parallel(model, plan.tp(), plan.tensor_parallel.sequence_parallel);
}

// What a precision needs of the plan and the job (exec/runtime/autocast.hpp,
// exec/runtime/loss_scaler.hpp).
void check_precision(const Plan& plan, const ExecOptions& opt, const PipelineShape& sh,
                     bool distributed) {
  const Precision p = opt.precision();
  if (p.float64 && p.mixed())
    throw InputError("--dtype: float64 and autocast mixed precision exclude each other");
  if (p.mixed() && p.autocast != at::kBFloat16 && p.autocast != at::kHalf) {
    throw InputError(fmt::format("--dtype: autocast to {} is not supported (bfloat16 or float16)",
                                 c10::toString(p.autocast)));
  }
  check_precision_device(p, opt.device);
  if (!opt.loss_scaling && p.autocast != at::kHalf) return;
  opt.loss_scaler.validate();
  // The stages must skip the same steps. In an asynchronous schedule they step at different
  // times, each on gradients of micro-batches whose losses were scaled at different steps, and no
  // point of the schedule finds them all between two steps: agreeing would put a barrier across
  // the pipeline at every step, which is what these schedules exist to avoid.
  if (schedule_info(plan.schedule).asynchronous) {
    throw InputError(fmt::format(
        "--dtype float16: schedule {} is asynchronous; dynamic loss scaling needs the stages to "
        "skip the same steps, which only a synchronous schedule (naive, gpipe, 1f1b) gives",
        plan.schedule));
  }
  // The vote is an in-process rendezvous at each stage's optimizer step: a device whose compute
  // thread runs two stages would wait in the first stage's step for the second's.
  if (distributed)
    throw InputError(
        "--dtype float16: loss scaling agrees within one process; run without --nproc");
  for (int d = 0; d < sh.devices_per_replica; ++d) {
    if (sh.stages_on(d).size() > 1) {
      throw InputError(fmt::format(
          "--dtype float16: device {} hosts {} stages; loss scaling needs one stage per device", d,
          sh.stages_on(d).size()));
    }
  }
}

}  // namespace

// The schedule of one window length, compiled once, with its liveness walk (what each device
// keeps alive, core/schedule/liveness.hpp) and, with ExecOptions::check_liveness, the walk the
// stages are checked against.
struct PipelineSession::Program {
  Program(const Plan& plan, const ExecOptions& opt, int steps)
      : ctx(plan, steps),
        cs(make_schedule(plan.schedule, ctx.shape), "schedule " + plan.schedule),
        liveness(cs) {
    if (!opt.check_liveness) return;
    check = &liveness;
    if (opt.check_liveness_against.empty()) return;
    other = std::make_unique<CompiledSchedule>(make_schedule(opt.check_liveness_against, ctx.shape),
                                               "schedule " + opt.check_liveness_against);
    other_liveness = std::make_unique<Liveness>(*other);
    check = other_liveness.get();
  }
  PlanContext ctx;
  CompiledSchedule cs;
  Liveness liveness;
  std::unique_ptr<CompiledSchedule> other;  // check_liveness_against's schedule
  std::unique_ptr<Liveness> other_liveness;
  const Liveness* check = nullptr;
};

PipelineSession::PipelineSession(const Plan& plan, const ExecOptions& opt, ControlPlane& control,
                                 std::shared_ptr<BatchSource> data, TransportFactory transport)
    : plan_(plan), options_(opt), control_(&control), abort_(opt.timeout) {
  build(std::move(data), transport);
}

PipelineSession::PipelineSession(const Plan& plan, const ExecOptions& opt, Distributed* dist,
                                 std::shared_ptr<BatchSource> data)
    : plan_(plan),
      options_(opt),
      owned_control_(make_control_plane(dist)),
      control_(owned_control_.get()),
      abort_(opt.timeout) {
  build(std::move(data), nullptr);
}

void PipelineSession::build(std::shared_ptr<BatchSource> data, const TransportFactory& transport) {
  const Plan& plan = plan_;
  const ExecOptions& opt = options_;
  opt.optimizer.validate();
  fault_ = Fault::from_environment();
  MemoryTracker::install();
  tune_malloc();
  // The main thread builds the model and dry-runs it: keep it to the stage thread count, so no
  // idle OpenMP team spins on the cores the stages will use.
  at::set_num_threads(opt.threads_per_stage);
  const PlanContext ctx(plan, opt.iterations);
  shape_ = ctx.shape;
  check_precision(plan, opt, shape_, control_->world_size() > 1);
  const at::ScalarType dtype = weight_dtype(opt.precision());
  model_ = std::make_unique<models::LayeredModel>(models::build_model(plan.model, dtype, opt.seed));
  check_plan_matches_model(plan, *model_);
  check_edges_match_model(plan, *model_);
  check_frozen_prefix(plan, *model_);
  check_tensor_parallel(plan, opt, *model_);
  {
    std::vector<std::vector<int>> layers;
    for (const auto& st : ctx.stages) layers.push_back(st.layers);
    graph_ = std::make_unique<StageGraph>(model_->skip_sources(), layers);
  }
  check_stage_edges(shape_, *graph_);
  if (opt.check_memory) sim::check_fits(plan);
  world_ = control_->world_size();
  rank_ = control_->rank();
  const int devices = shape_.devices_per_replica * shape_.replicas;
  for (int d = 0; d < devices; ++d) ranks_.push_back(device_rank(d, devices, world_));
  // Processes on GPUs (several sharing one GPU, the one-GPU machine's case) talk over Gloo, whose
  // transport stages GPU tensors through host memory (exec/platform/c10d_transport.cpp).
  // A tensor-parallel group's t ranks take t GPUs, d x t .. d x t + t - 1 (the plan's default
  // placement of group d), not schedule device d's one.
  const int t = opt.tp_comm ? opt.tp_comm->size() : 1,
            tp_rank = opt.tp_comm ? opt.tp_comm->rank() : 0;
  for (int d = 0; d < devices; ++d) {
    if (ranks_[static_cast<size_t>(d)] == rank_)
      devices_[d] = make_device(opt.device, d * t + tp_rank);
  }
  build_transport(transport);
  if (data) {
    data_ = std::move(data);
  } else {
    data_ =
        opt.data == "synthetic"
            ? synthetic_batches(*model_, plan.batch_size, opt.seed, opt.float64)
            : digits_batches(plan.batch_size, opt.seed, opt.data == "digits-tokens", opt.float64);
    data_->set_prefetch(autocast_device_type(opt.device) == at::kCUDA);  // data.hpp
  }
  data_->configure(plan.batch_size, plan.dp, plan.chunks);
  const bool on_cpu = autocast_device_type(opt.device) == at::kCPU;
  if (opt.autocast != at::ScalarType::Undefined && on_cpu)
    check_cpu_autocast_trains(*model_, data_->example_input(), opt.autocast);
  like_ = layer_outputs_like(*model_, data_->example_input(), opt.autocast);
  if (plan.tp() > 1) {
    // What crosses a stage boundary on a rank is its shard (sequence parallelism).
    for (size_t l = 0; l < like_.size(); ++l) {
      like_[l] = at::empty(
          models::tensor_parallel_output_shape(*model_, static_cast<int>(l), like_[l].sizes(),
                                               plan.tp(), plan.tensor_parallel.sequence_parallel),
          like_[l].options());
    }
  }
  build_runtimes(ctx);
}

PipelineSession::~PipelineSession() = default;

const PipelineSession::Program& PipelineSession::program(int steps) {
  auto it = programs_.find(steps);
  if (it == programs_.end()) {
    it = programs_.emplace(steps, std::make_unique<Program>(plan_, options_, steps)).first;
  }
  return *it->second;
}

void PipelineSession::build_transport(const TransportFactory& factory) {
  TransportSetup setup;
  setup.abort = &abort_;
  setup.device_rank = ranks_;
  for (int s = 0; s < shape_.num_stages; ++s)
    setup.replica_sets.push_back(shape_.gradient_copy_devices(s));
  transport_ = factory ? factory(setup) : control_->make_transport(setup);
}

int PipelineSession::device_of(int replica, int stage) const {
  return replica * shape_.devices_per_replica + shape_.device_of(stage);
}

StageRuntime* PipelineSession::runtime(int replica, int stage) const {
  auto d = by_device_.find(device_of(replica, stage));
  if (d == by_device_.end()) return nullptr;
  auto s = d->second.find(stage);
  return s == d->second.end() ? nullptr : s->second;
}

void PipelineSession::build_runtimes(const PlanContext& ctx) {
  const at::ScalarType dtype = weight_dtype(options_.precision());
  for (int d = 0; d < devices(); ++d) {
    if (rank_of_device(d) != rank_) continue;
    devices_.at(d)->reset_peak();
    MemoryTracker::ScopedDevice attribute(d);
    const c10::Device where = devices_.at(d)->torch_device();
    for (int s : shape_.stages_on(d % shape_.devices_per_replica)) {
      StageSpec spec;
      spec.stage = s;
      spec.layers = ctx.stages[static_cast<size_t>(s)].layers;
      for (int l : spec.layers)
        spec.skip_from.push_back(model_->layers[static_cast<size_t>(l)].skip_from);
      const StageIO& io = graph_->io(s);
      spec.inputs = io.inputs;
      spec.outputs = io.outputs;
      spec.first = io.first;
      spec.last = io.last;
      spec.loss_scale = 1.0 / plan_.batch_size;
      spec.per_layer_backward = shape_.gradient_copies(s) > 1;
      spec.dropout_seed = options_.seed;
      spec.replica = d / shape_.devices_per_replica;
      spec.frozen_layers = plan_.frozen_layers;
      // Replicas hold the same all-reduced gradients: replica 0's norms stand for all.
      spec.track_gradient_norms = options_.track_gradient_norms && spec.replica == 0 &&
                                  d % shape_.devices_per_replica == shape_.device_of(s);
      spec.autocast = options_.autocast;
      spec.autocast_device = autocast_device_type(options_.device);
      spec.loss_scaling = options_.loss_scaling || options_.autocast == at::kHalf;
      spec.loss_scaler = options_.loss_scaler;
      // With tensor parallelism: the shards of the whole model built as one process builds it.
      auto factory = [name = plan_.model, dtype, seed = options_.seed, layers = spec.layers, where,
                      tp = options_.tp_comm, sp = plan_.tensor_parallel.sequence_parallel] {
        models::LayeredModel m = models::build_model(name, dtype, seed);
        std::vector<torch::nn::AnyModule> out;
        if (tp) {
          out = models::tensor_parallel_layers(m, layers, tp, sp);
        } else {
          for (int l : layers) out.push_back(m.layers[static_cast<size_t>(l)].module);
        }
        if (!where.is_cpu()) {
          for (auto& module : out) module.ptr()->to(where);
        }
        return out;
      };
      auto loss = [model = model_.get(), tp = options_.tp_comm](const at::Tensor& y,
                                                                const at::Tensor& t) {
        return tp ? models::tensor_parallel_loss(*model, y, t, *tp) : model->per_sample_loss(y, t);
      };
      runtimes_.push_back(std::make_unique<StageRuntime>(spec, factory, options_.optimizer, loss));
      by_device_[d][s] = runtimes_.back().get();
    }
  }
}

void PipelineSession::share(WorkerShared& shared, const Program& prog, Board& board, int first_step,
                            bool warmup) {
  shared.schedule = &prog.cs;
  shared.liveness = &prog.liveness;
  shared.check = prog.check;
  shared.context = &prog.ctx;
  shared.board = &board;
  shared.transport = transport_.get();
  shared.abort = &abort_;
  shared.data = data_.get();
  shared.graph = graph_.get();
  shared.value_like = [this](int producer) { return value_like(producer); };
  shared.threads_per_stage = options_.threads_per_stage;
  shared.pin_threads = options_.pin_threads;
  shared.warmup = warmup;
  shared.first_step = first_step;
  shared.rank = rank_;
  shared.fault = fault_;
}

WindowResult PipelineSession::run_window(int first_step, int steps, bool warmup) {
  abort_.check();
  const Program& prog = program(steps);
  const int M = shape_.micro_batches;
  for (auto& rt : runtimes_) rt->begin_window(static_cast<int64_t>(first_step) * M);
  Board board(prog.cs, abort_);
  std::mutex loss_mu;
  WindowResult result;
  result.step_loss_sum.assign(static_cast<size_t>(steps), 0.0);
  WorkerShared shared;
  share(shared, prog, board, first_step, warmup);
  std::unique_ptr<OverflowVote> vote;
  if (!runtimes_.empty() && runtimes_.front()->loss_scaler()) {
    vote = std::make_unique<OverflowVote>(static_cast<int>(runtimes_.size()), abort_);
    shared.vote = vote.get();
  }
  shared.on_step = [&](int, int, int step, double loss) {
    std::lock_guard<std::mutex> lock(loss_mu);
    result.step_loss_sum[static_cast<size_t>(step - first_step)] += loss;
  };
  StartGate gate(static_cast<int>(by_device_.size()));
  shared.gate = &gate;
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  for (auto& [d, stages] : by_device_)
    workers.push_back(std::make_unique<DeviceWorker>(d, *devices_.at(d), shared, stages));
  for (auto& w : workers) w->start();
  try {
    gate.wait_warmed_up(abort_);
    control_->barrier();
    for (const auto& [d, stages] : by_device_) devices_.at(d)->reset_peak();
  } catch (const std::exception& e) {
    abort_.raise(fmt::format("start-up: {}", e.what()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Mark>> zero;
  for (const auto& [d, stages] : by_device_) {
    zero.push_back(devices_.at(d)->start_mark(t0));
    shared.t0[d] = zero.back().get();
  }
  gate.open();
  for (auto& w : workers) w->join();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (abort_.raised()) {
    throw RunFailure(control_->who() + abort_.message());
  }
  size_t i = 0;
  for (const auto& [d, stages] : by_device_) {
    result.events[d] = workers[i]->take_events();
    result.memory[d] = workers[i]->take_memory();
    ++i;
  }
  return result;
}

}  // namespace pipetwin::exec
