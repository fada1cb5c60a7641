#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/auto_cache.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/checkpointer.hpp"
#include "exec/train/train_data.hpp"
#include "exec/train/train_run.hpp"
#include "models/tensor_parallel.hpp"

namespace pipetwin::exec {

namespace {

// "--seed: the checkpoint has 7, this run 8" when the checkpoint's value differs from the run's.
template <typename T>
void expect_same(const JsonView& v, const char* key, const T& mine, const char* flag) {
  const T stored = v.at(key).raw().get<T>();
  if (stored != mine) {
    v.at(key).fail(
        fmt::format("{}, but this run has {} {}", Json(stored).dump(), flag, Json(mine).dump()));
  }
}

// The tensor-parallel slices (exec/platform/tp_comm.hpp) resume one step: every rank of a group
// learns the group's lowest and highest checkpoint step (-1: none).
void slices_agree(models::TpComm& tp, int64_t step, const std::string& dir) {
  at::Tensor high = at::full({1}, static_cast<double>(step), at::kDouble);
  at::Tensor low = -high;
  tp.all_reduce(high, models::TpComm::Op::kMax);
  tp.all_reduce(low, models::TpComm::Op::kMax);
  const auto lo = static_cast<int64_t>(-low.item<double>());
  const auto hi = static_cast<int64_t>(high.item<double>());
  if (lo != hi) {
    throw InputError(fmt::format(
        "--resume: {}: the tensor-parallel slices' checkpoints are of steps {} and {} (the run "
        "stopped between their manifests); they cannot resume together",
        dir, lo, hi));
  }
}

}  // namespace

Json Checkpointer::progress_json() const {
  const TrainProgress& p = run_.progress;
  const auto& o = run_.options.exec.optimizer;
  Json j;
  j["step"] = p.step;
  j["epoch"] = p.epoch;
  j["epoch_step"] = p.epoch_step;
  j["epoch_sample"] = p.epoch_sample;
  j["steps_per_epoch"] = run_.steps_per_epoch();
  if (run_.data->epochs) {
    const elastic::ElasticSampler::Position pos = run_.data->epochs->position();
    j["sampler"] = {{"epoch", pos.epoch}, {"cursor", pos.cursor}};
  }
  // The plan in use (a re-plan's), and the one the run started from.
  j["initial_plan"] = run_.initial_fingerprint;
  if (run_.fingerprint != run_.initial_fingerprint) j["plan"] = plan_to_json(run_.plan);
  if (run_.elastic_policy) j["elastic"] = run_.elastic_policy->state();
  j["seed"] = run_.options.exec.seed;
  j["data"] = run_.options.exec.data;
  j["optimizer"] = {{"kind", o.kind},
                    {"lr", o.lr},
                    {"momentum", o.momentum},
                    {"weight_decay", o.weight_decay},
                    {"beta1", o.beta1},
                    {"beta2", o.beta2},
                    {"eps", o.eps}};
  j["lr_schedule"] = {{"decay", run_.options.lr_decay},
                      {"every_epochs", run_.options.lr_decay_every}};
  j["lr"] = p.lr;
  // Dropout masks are keyed by (seed, replica, global micro-batch): the step fixes the next key.
  j["dropout"] = {{"seed", run_.options.exec.seed},
                  {"next_micro_batch", p.step * run_.plan.chunks}};
  j["frozen_layers"] = p.frozen_layers;
  j["cache"] = p.cache;
  Json trace = Json::array();
  for (const auto& e : p.freeze) {
    trace.push_back({{"epoch", e.epoch},
                     {"sample", e.sample},
                     {"step", e.step},
                     {"frozen_layers", e.frozen_layers}});
  }
  j["freeze_trace"] = {{"layers", p.freeze_layers}, {"events", std::move(trace)}};
  j["epoch_partial"] = {
      {"loss_sum", p.loss_sum}, {"samples", p.samples},           {"steps", p.steps},
      {"train_s", p.train_s},   {"transition_s", p.transition_s}, {"wall_s", p.wall_s}};
  Json log = Json::array();
  for (const auto& r : p.log) log.push_back(r.to_json());
  j["log"] = std::move(log);
  return j;
}

void Checkpointer::restore_progress(const JsonView& v) {
  const auto& o = run_.options.exec.optimizer;
  expect_same<int64_t>(v, "steps_per_epoch", run_.steps_per_epoch(), "steps per epoch");
  expect_same<uint64_t>(v, "seed", run_.options.exec.seed, "--seed");
  expect_same<std::string>(v, "data", run_.options.exec.data, "--data");
  const JsonView opt = v.at("optimizer");
  expect_same<std::string>(opt, "kind", o.kind, "--optimizer");
  expect_same<double>(opt, "lr", o.lr, "--lr");
  expect_same<double>(opt, "momentum", o.momentum, "--momentum");
  expect_same<double>(opt, "weight_decay", o.weight_decay, "weight decay");
  expect_same<double>(opt, "beta1", o.beta1, "beta1");
  expect_same<double>(opt, "beta2", o.beta2, "beta2");
  expect_same<double>(opt, "eps", o.eps, "eps");
  expect_same<double>(v.at("lr_schedule"), "decay", run_.options.lr_decay, "--lr-decay");
  expect_same<int>(v.at("lr_schedule"), "every_epochs", run_.options.lr_decay_every,
                   "--lr-decay-every");
  TrainProgress& p = run_.progress;
  p.step = v.integer("step");
  p.epoch = v.integer("epoch");
  p.epoch_step = v.integer("epoch_step");
  p.epoch_sample = v.integer("epoch_sample");
  if (run_.data->epochs) {
    const JsonView s = v.at("sampler");
    elastic::ElasticSampler::Position pos;
    pos.epoch = s.int32("epoch");
    for (const auto& c : s.at("cursor").items())
      pos.cursor.push_back(static_cast<long>(c.as_int()));
    try {
      run_.data->epochs->restore(pos);
    } catch (const InputError& e) {
      s.fail(e.what());
    }
  }
  if (run_.elastic_policy) run_.elastic_policy->restore(v.at("elastic"));
  p.lr = v.number("lr");
  p.frozen_layers = v.int32("frozen_layers");
  p.cache = v.bool_or("cache", false);
  const JsonView trace = v.at("freeze_trace");
  p.freeze_layers = trace.int32("layers");
  p.freeze.clear();
  for (const auto& e : trace.at("events").items()) {
    p.freeze.push_back({e.int32("epoch"), static_cast<long>(e.integer("sample")),
                        static_cast<long>(e.integer("step")), e.int32("frozen_layers")});
  }
  const JsonView part = v.at("epoch_partial");
  p.loss_sum = run_.session->rank() == 0 ? part.number("loss_sum") : 0;
  p.samples = part.integer("samples");
  p.steps = part.integer("steps");
  p.train_s = part.number("train_s");
  p.transition_s = part.number("transition_s");
  p.wall_s = part.number("wall_s");
  p.log.clear();
  for (const auto& r : v.at("log").items()) p.log.push_back(EpochReport::from_json(r));
}

bool Checkpointer::due(bool epoch_end) const {
  if (run_.options.checkpoint_dir.empty()) return false;
  const int64_t s = run_.progress.step;
  if (s == run_.progress.last_checkpoint) return false;
  return (run_.options.checkpoint_every_epoch && epoch_end) ||
         (run_.options.checkpoint_every_steps > 0 && s % run_.options.checkpoint_every_steps == 0);
}

RankState Checkpointer::capture_state() {
  TrainProgress& p = run_.progress;
  // The epoch's partial loss as one number, so any rank can hold it after a resume.
  const double local_loss = p.loss_sum;
  p.loss_sum = run_.sum_over_ranks({local_loss})[0];
  p.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p.mark).count();
  p.mark = std::chrono::steady_clock::now();
  RankState st;
  st.rank = run_.session->rank();
  st.world = run_.session->world();
  st.step = p.step;
  st.plan = run_.fingerprint;
  st.progress = progress_json();
  p.loss_sum = local_loss;
  for (const auto& [d, stages] : run_.session->hosted()) {
    for (const auto& [s, rt] : stages) {
      st.stages.push_back(
          capture_stage(d / run_.session->shape().devices_per_replica, *rt, run_.session->model()));
    }
  }
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    st.rng_state = gen.get_state();
  }
  return st;  // the data's position is the sampler's, in `progress`
}

Manifest Checkpointer::gather_manifest(const ManifestFile& mine) const {
  // Every rank contributes its file's size and hash (as two exact 32-bit halves) to a sum.
  const int rank = run_.session->rank(), world = run_.session->world();
  std::vector<double> table(static_cast<size_t>(3 * world), 0.0);
  table[static_cast<size_t>(3 * rank)] = static_cast<double>(mine.bytes);
  table[static_cast<size_t>(3 * rank + 1)] = static_cast<double>(mine.fnv1a64 >> 32);
  table[static_cast<size_t>(3 * rank + 2)] = static_cast<double>(mine.fnv1a64 & 0xffffffffULL);
  table = run_.sum_over_ranks(table);
  Manifest m;
  m.step = run_.progress.step;
  m.world = world;
  m.plan = run_.fingerprint;
  for (int r = 0; r < world; ++r) {
    ManifestFile f;
    f.rank = r;
    f.file = rank_file_name(m.step, r);
    f.bytes = static_cast<uint64_t>(table[static_cast<size_t>(3 * r)]);
    f.fnv1a64 = (static_cast<uint64_t>(table[static_cast<size_t>(3 * r + 1)]) << 32) |
                static_cast<uint64_t>(table[static_cast<size_t>(3 * r + 2)]);
    m.files.push_back(f);
  }
  return m;
}

void Checkpointer::write() {
  TrainProgress& p = run_.progress;
  const std::string& dir = run_.options.checkpoint_dir;
  const int rank = run_.session->rank();
  const std::string what = p.last_checkpoint >= 0
                               ? fmt::format("checkpoint at step {} (the one of step {} stays)",
                                             p.step, p.last_checkpoint)
                               : fmt::format("checkpoint at step {}", p.step);
  const RankState st = capture_state();
  // 1. Every rank's file, durable.
  ManifestFile mine;
  std::exception_ptr failure;
  try {
    const Fault fault = Fault::from_environment();
    std::unique_ptr<FileSizeLimit> full;
    if (fault.disk_full(rank, p.step)) full = std::make_unique<FileSizeLimit>(512);
    mine = write_rank_file(dir, st);
  } catch (...) {
    failure = std::current_exception();
  }
  run_.agree(failure, what, false);
  // 2. The manifest, once every file is there.
  const Manifest m = gather_manifest(mine);
  try {
    Fault::from_environment().at_checkpoint(rank, p.step);
    if (rank == 0) write_manifest(dir, m);
  } catch (...) {
    failure = std::current_exception();
  }
  run_.agree(failure, what + " (manifest)", false);
  // 3. What no manifest names any more: with tensor parallelism, once every slice's manifest
  // names this step (each group's all-reduce passes when all its slices have got here).
  if (const auto& tp = run_.options.exec.tp_comm) {
    at::Tensor here = at::ones({1}, at::kDouble);
    tp->all_reduce(here, models::TpComm::Op::kSum);
  }
  if (rank == 0) remove_unreferenced(dir, m);
  p.last_checkpoint = p.step;
}

std::optional<Plan> Checkpointer::resumed_plan(const Manifest& m, const RankState& st,
                                               const std::string& origin) const {
  if (m.plan == run_.fingerprint) return std::nullopt;
  // An elastic run checkpointed after a re-plan: the plan is in the checkpoint, and the run must
  // have started from --plan.
  const JsonView v(st.progress, origin, "progress");
  const std::string initial = v.string_or("initial_plan", "");
  if (initial != run_.fingerprint || !v.has("plan")) {
    throw InputError(fmt::format(
        "{}: plan: \"{}\", but --plan gives \"{}\", and the run did not start from it either "
        "(it started from \"{}\")",
        origin, m.plan, run_.fingerprint, initial));
  }
  Plan p = plan_from_json(v.at("plan"));
  const std::string fp = plan_fingerprint(p, precision_tag(run_.options.exec.precision()));
  if (fp != m.plan) {
    v.at("plan").fail(fmt::format("fingerprint \"{}\", but the manifest says \"{}\"", fp, m.plan));
  }
  return p;
}

int64_t Checkpointer::resume() {
  const std::string& dir = run_.options.checkpoint_dir;
  const std::string manifest_path = dir + "/" + kManifestName;
  const std::optional<Manifest> m = read_manifest(dir);
  if (const auto& tp = run_.options.exec.tp_comm) slices_agree(*tp, m ? m->step : -1, dir);
  if (!m) throw InputError(fmt::format("--resume: {}: no checkpoint to resume", manifest_path));
  // An elastic run may continue on fewer ranks (a rank was lost, --on-rank-loss continue).
  const bool fewer = m->world != run_.session->world();
  if (fewer && !(run_.elastic_policy && run_.session->world() < m->world)) {
    throw InputError(fmt::format(
        "{}: world: {} processes wrote it, but this run has {} (only an --elastic run may continue "
        "on fewer)",
        manifest_path, m->world, run_.session->world()));
  }
  if (m->plan != run_.fingerprint && !run_.elastic_policy) {
    throw InputError(fmt::format(
        "{}: plan: \"{}\", but --plan gives \"{}\" (another model, partition, schedule, M, DP "
        "width, batch or dtype)",
        manifest_path, m->plan, run_.fingerprint));
  }
  std::exception_ptr failure;
  RankState st;
  std::string origin;
  std::optional<Plan> plan;
  StageState all;  // fewer ranks: every layer's state, from every rank's file
  try {
    st = fewer ? read_every_rank(*m, all) : read_rank_file(dir, *m, run_.session->rank());
    origin = dir + "/" + m->files[static_cast<size_t>(st.rank)].file;
    plan = resumed_plan(*m, st, origin);
  } catch (...) {
    failure = std::current_exception();
  }
  run_.agree(failure, "resume", true);
  // Every rank: the same plan, from the same progress.
  if (plan && !fewer) run_.replace_session(*plan);
  try {
    restore_progress(JsonView(st.progress, origin, "progress"));
    if (fewer) {
      if (plan) run_.plan = *plan;  // what the lost ranks ran, for the message
      continue_on_fewer_ranks(*m, all, origin);
      restore_rng(st);
    } else {
      restore_stages(st, origin);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  run_.agree(failure, "resume (state)", true);
  cache_.set(run_.progress.cache);  // an empty cache at the checkpoint's boundary
  run_.progress.last_checkpoint = m->step;
  return m->step;
}

void Checkpointer::restore_stages(const RankState& st, const std::string& origin) {
  for (const auto& [d, stages] : run_.session->hosted()) {
    for (const auto& [s, rt] : stages) {
      const int replica = d / run_.session->shape().devices_per_replica;
      const StageState* found = nullptr;
      for (const auto& x : st.stages) {
        if (x.replica == replica && x.stage == s) found = &x;
      }
      if (!found) {
        throw InputError(fmt::format("{}: stages: no replica {} stage {}", origin, replica, s));
      }
      restore_stage(*found, *rt, run_.session->model(), origin);
    }
  }
  restore_rng(st);
}

void Checkpointer::restore_rng(const RankState& st) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(st.rng_state);
}

}  // namespace pipetwin::exec
