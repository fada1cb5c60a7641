// Fixtures of the executor tests: plans over real zoo models on an ideal cluster, training
// options, and plain single-process training to compare against. The per-test folder fixture is
// test::TempDirTest (test_util.hpp).
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <gmock/gmock.h>

#include "core/plan.hpp"
#include "core/schedule/generators.hpp"
#include "exec/runtime/data.hpp"
#include "exec/runtime/executor.hpp"
#include "exec/runtime/optimizer.hpp"
#include "exec/runtime/reference.hpp"
#include "exec/train/trainer.hpp"
#include "models/zoo.hpp"
#include "sim/planner.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::testing {

// A profile whose layers are the model's (names matter: the executor checks them).
inline Profile profile_of(const std::string& model_name) {
  const models::LayeredModel m = models::build_model(model_name, at::kFloat, 0);
  Profile p;
  p.model = m.name;
  p.device = "test";
  p.source = "synthetic";
  for (const auto& l : m.layers) {
    LayerProfile lp;
    lp.name = l.name;
    lp.kind = l.kind;
    lp.timings.push_back({1, 1e-3, 2e-3, 1e-3});
    lp.output_bytes_per_sample = 1024;
    lp.saved_bytes_per_sample = 1024;
    for (const auto& t : l.parameters())
      lp.param_bytes += static_cast<double>(t.numel() * t.element_size());
    p.layers.push_back(lp);
  }
  if (m.has_skips()) {
    for (const auto& [from, to] : m.edges()) p.edges.push_back({from, to, 1024});
  }
  return p;
}

struct ExecSpec {
  std::string model = "mlp:layers=4,width=32,input=16";
  std::string schedule = "gpipe";
  int stages = 2;
  int chunks = 4;
  int micro_batch = 2;
  int dp = 1;
  Checkpoint checkpoint = Checkpoint::kNone;
};

inline Plan exec_plan(const ExecSpec& s) {
  Plan p;
  p.model = s.model;
  p.profile = profile_of(s.model);
  p.cluster.name = "test";
  p.cluster.device.name = "test-cpu";
  p.cluster.device.memory_bytes = 64e9;
  p.cluster.device.memory_bandwidth = 1e10;
  p.cluster.device.peak_flops["float32"] = 1e11;
  p.cluster.nodes = 1;
  p.cluster.devices_per_node = 64;
  p.cluster.intra_node = {"shm", "", 8e9, 2e-6};
  p.cluster.inter_node = p.cluster.intra_node;
  p.schedule = s.schedule;
  p.chunks = s.chunks;
  p.dp = s.dp;
  p.batch_size = s.micro_batch * s.chunks * s.dp;
  p.checkpoint = s.checkpoint;
  p.stages = contiguous_stages(p.profile.num_layers(), s.stages);
  return p;
}

// A Mixed-pipe placement (FTPipe Section 4.1): stage s holds layers[s] on device devices[s] of
// the replica; several stages may share a device and consecutive stages need not be neighbours.
inline Plan mixed_plan(ExecSpec s, const std::vector<std::vector<int>>& layers,
                       const std::vector<int>& devices) {
  s.stages = 1;
  Plan p = exec_plan(s);
  p.partitioner = "mixed-pipe";
  p.stages.clear();
  for (size_t i = 0; i < layers.size(); ++i) p.stages.push_back({layers[i], devices[i]});
  p.validate("mixed plan");
  return p;
}

// PipeDream's "3-1" on four devices (PipelineShape::stage_replicas): every layer but the last in
// stage 0, replicated on devices 0..2 (micro-batch j on device j mod 3), the last layer in stage 1
// on device 3. M must be a multiple of 3.
inline Plan three_one_plan(const std::string& schedule, int M) {
  ExecSpec s;
  s.schedule = schedule;
  s.chunks = M;
  Plan p = exec_plan(s);
  const int L = p.profile.num_layers();
  std::vector<int> first;
  for (int l = 0; l + 1 < L; ++l) first.push_back(l);
  p.stages = {{first, 0, 3}, {{L - 1}, 3, 1}};
  p.validate("three-one plan");
  return p;
}

// The shipped hardware catalog, loaded once (a PlanRequest points at it).
inline const Catalog& shipped_catalog() {
  static const Catalog catalog = Catalog::load(std::string(PIPETWIN_SOURCE_DIR) + "/hardware");
  return catalog;
}

// What `pipetwin plan` gets for `model` on the shipped two-core CPU cluster, batch 8 in 4
// micro-batches on 2 stages.
inline sim::PlanRequest local_cpu_request(const std::string& model, Profile profile,
                                          const std::string& schedule,
                                          const std::string& partitioner) {
  sim::PlanRequest q;
  q.model = model;
  q.profile = std::move(profile);
  q.cluster = load_cluster("local-cpu-2", shipped_catalog());
  q.catalog = &shipped_catalog();
  q.stages = 2;
  q.schedule = schedule;
  q.batch_size = 8;
  q.chunks = 4;
  q.partitioner = partitioner;
  return q;
}

// Saves `plan` as dir/plan.json (a file for `pipetwin run|train --plan`) and returns that path.
inline std::string write_plan(const Plan& plan, const std::filesystem::path& dir) {
  const std::string path = (dir / "plan.json").string();
  save_plan(plan, path);
  return path;
}

inline exec::ExecOptions float64_options(int iterations) {
  exec::ExecOptions o;
  o.iterations = iterations;
  o.float64 = true;
  o.seed = 7;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.pin_threads = false;
  o.timeout = std::chrono::seconds(60);
  // Every run of the tests asserts that the stages hold what the liveness walk says
  // (exec/runtime/liveness_check.hpp).
  o.check_liveness = true;
  return o;
}

// A training run of float64_options on synthetic data: `steps_per_epoch` steps an epoch for
// `epochs` epochs, its step log at `log`.
inline exec::TrainOptions synthetic_train_options(int steps_per_epoch, int epochs,
                                                  const std::filesystem::path& log) {
  exec::TrainOptions o;
  o.exec = float64_options(0);
  o.exec.data = "synthetic";
  o.steps_per_epoch = steps_per_epoch;
  o.epochs = epochs;
  o.log = log.string();
  return o;
}

// Plain single-process mini-batch training: the whole model, the mean loss of each mini-batch.
inline std::vector<at::Tensor> plain_training(const Plan& plan, const exec::ExecOptions& o,
                                              int steps) {
  models::LayeredModel model =
      models::build_model(plan.model, o.float64 ? at::kDouble : at::kFloat, o.seed);
  auto data = exec::synthetic_batches(model, plan.batch_size, o.seed, o.float64);
  data->configure(plan.batch_size, 1, 1);
  std::vector<at::Tensor> params = model.parameters();
  exec::Optimizer opt(o.optimizer);
  for (int step = 0; step < steps; ++step) {
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    const auto [x, y] = data->mini_batch(step);
    model.per_sample_loss(model.forward(x), y).mean().backward();
    std::vector<at::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    at::NoGradGuard no_grad;
    opt.step(params, grads, params);
  }
  return params;
}

// Largest |a - b| / max(|b|, 1e-12) over all elements of the concatenated lists.
inline double max_relative_error(const std::vector<at::Tensor>& a,
                                 const std::vector<at::Tensor>& b) {
  double worst = 0;
  if (a.size() != b.size()) return INFINITY;
  for (size_t i = 0; i < a.size(); ++i) {
    const at::Tensor d = (a[i] - b[i]).abs();
    const double scale = std::max(b[i].abs().max().item<double>(), 1e-12);
    worst = std::max(worst, d.max().item<double>() / scale);
  }
  return worst;
}

// The executor's parameters of every stage of `replica`, concatenated in stage order.
inline std::vector<at::Tensor> executor_parameters(const exec::ExecResult& r, int stages,
                                                   int replica = 0) {
  std::vector<at::Tensor> out;
  for (int s = 0; s < stages; ++s) {
    for (const auto& t : r.parameters.at({replica, s})) out.push_back(t);
  }
  return out;
}

// A shell command's exit status, output (stdout and stderr) and duration.
struct Outcome {
  int status = 0;
  std::string output;
  double seconds = 0;
};

inline Outcome sh(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  Outcome o;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  while (p && std::fgets(buf, sizeof(buf), p)) o.output += buf;
  const int raw = p ? ::pclose(p) : -1;
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 255;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

// Command-line flags and the message that refuses them.
using RefusedFlags = std::vector<std::pair<std::string, std::string>>;

// `command + flags` of each case exits with status 2 and prints one line that contains
// `prefix + message` (the CLI's one-line InputError).
inline void expect_refused(const std::string& command, const RefusedFlags& cases,
                           const std::string& prefix = "") {
  for (const auto& [flags, message] : cases) {
    const Outcome o = sh(command + flags);
    EXPECT_EQ(o.status, 2) << flags << ": " << o.output;
    EXPECT_THAT(o.output, ::testing::HasSubstr(prefix + message)) << flags;
    EXPECT_EQ(std::count(o.output.begin(), o.output.end(), '\n'), 1) << o.output;
  }
}

// Every tensor of `a` equals (torch::equal: same shape, same bits) the one at its index in `b`.
inline bool all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].sizes().equals(b[i].sizes()) || !at::equal(a[i], b[i])) return false;
  }
  return true;
}

// Runs `plan` for `iterations` steps and checks that (a) every compute action ran on the weight
// version the schedule declares, as the runtime counts them, (b) the weights equal single-process
// training at those versions, and (c) staleness is real: plain synchronous SGD ends elsewhere.
inline void expect_declared_versions(const Plan& plan, int iterations) {
  const auto opt = float64_options(iterations);
  const exec::ExecResult r = exec::execute_plan(plan, opt);
  const PlanContext ctx(plan, iterations);
  const Schedule sched = make_schedule(plan.schedule, ctx.shape);
  std::map<std::tuple<int, int, int, int>, int> declared;  // device, op, stage, mb -> version
  for (int d = 0; d < sched.num_devices(); ++d) {
    for (const auto& a : sched.devices[static_cast<size_t>(d)]) {
      if (stream_of(a.op) == StreamKind::kCompute) {
        declared[{d, static_cast<int>(a.op), a.stage,
                  a.op == Op::kOptimizerStep ? a.step : a.micro_batch}] = a.version;
      }
    }
  }
  int checked = 0;
  for (const auto& e : r.timeline.events) {
    const Action& a = e.action;
    if (stream_of(a.op) != StreamKind::kCompute) continue;
    const auto key = std::make_tuple(e.device, static_cast<int>(a.op), a.stage,
                                     a.op == Op::kOptimizerStep ? a.step : a.micro_batch);
    ASSERT_TRUE(declared.count(key));
    EXPECT_EQ(a.version, declared[key]) << describe(a);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(declared.size()));
  const exec::ReferenceResult ref = exec::reference_training(plan, sched, opt);
  std::vector<at::Tensor> expected;
  for (const auto& st : ref.stage_parameters) expected.insert(expected.end(), st.begin(), st.end());
  EXPECT_LT(max_relative_error(executor_parameters(r, plan.num_stages()), expected), 1e-9);
  EXPECT_GT(max_relative_error(expected, plain_training(plan, opt, iterations)), 1e-6);
}

}  // namespace pipetwin::testing
