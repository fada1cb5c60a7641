// Trainer: its checkpoints, its resume, and the agreement between ranks both need
// (exec/trainer.hpp, exec/checkpoint.hpp).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/autocast.hpp"
#include "exec/checkpoint.hpp"
#include "exec/distributed.hpp"
#include "exec/session.hpp"
#include "exec/train_data.hpp"
#include "exec/trainer.hpp"
#include "exec/trainer_progress.hpp"

namespace pipetwin::exec {

namespace {

Json optional_number(const std::optional<double>& x) {
  return x ? Json(*x) : Json(nullptr);
}

// "--seed: the checkpoint has 7, this run 8" when the checkpoint's value differs from the run's.
template <typename T>
void expect_same(const JsonView& v, const char* key, const T& mine, const char* flag) {
  const T stored = v.at(key).raw().get<T>();
  if (stored != mine) {
    v.at(key).fail(
        fmt::format("{}, but this run has {} {}", Json(stored).dump(), flag, Json(mine).dump()));
  }
}

}  // namespace

Json EpochReport::to_json() const {
  Json j;
  j["epoch"] = epoch;
  j["step"] = step;
  j["K"] = K;
  j["dp"] = dp;
  j["M"] = M;
  j["frozen_layers"] = frozen_layers;
  j["steps"] = steps;
  j["samples"] = samples;
  j["lr"] = lr;
  j["samples_per_s"] = samples_per_s;
  j["train_loss"] = train_loss;
  j["eval_loss"] = eval_loss;
  j["eval_accuracy"] = optional_number(eval_accuracy);
  j["train_s"] = train_s;
  j["transition_s"] = transition_s;
  j["wall_s"] = wall_s;
  j["cache"] = cache;
  if (cache_stats) j["cache_stats"] = elastic::cache_counts_to_json(*cache_stats);
  return j;
}

EpochReport EpochReport::from_json(const JsonView& v) {
  EpochReport r;
  r.epoch = v.int32("epoch");
  r.step = v.integer("step");
  r.K = v.int32("K");
  r.dp = v.int32("dp");
  r.M = v.int32("M");
  r.frozen_layers = v.int32("frozen_layers");
  r.steps = v.integer("steps");
  r.samples = v.integer("samples");
  r.lr = v.number("lr");
  r.samples_per_s = v.number("samples_per_s");
  r.train_loss = v.number("train_loss");
  r.eval_loss = v.number("eval_loss");
  if (!v.at("eval_accuracy").raw().is_null()) r.eval_accuracy = v.number("eval_accuracy");
  r.train_s = v.number("train_s");
  r.transition_s = v.nonneg_or("transition_s", 0);
  r.wall_s = v.number("wall_s");
  r.cache = v.bool_or("cache", false);
  if (v.has("cache_stats")) r.cache_stats = elastic::cache_counts_from_json(v.at("cache_stats"));
  return r;
}

Json Trainer::progress_json() const {
  const Progress& p = *progress_;
  const auto& o = options_.exec.optimizer;
  Json j;
  j["step"] = p.step;
  j["epoch"] = p.epoch;
  j["epoch_step"] = p.epoch_step;
  j["epoch_sample"] = p.epoch_sample;
  j["steps_per_epoch"] = steps_per_epoch();
  if (data_->epochs) {
    const elastic::ElasticSampler::Position pos = data_->epochs->position();
    j["sampler"] = {{"epoch", pos.epoch}, {"cursor", pos.cursor}};
  }
  // The plan in use (a re-plan's), and the one the run started from.
  j["initial_plan"] = initial_fingerprint_;
  if (fingerprint_ != initial_fingerprint_) j["plan"] = plan_to_json(plan_);
  if (elastic_) j["elastic"] = elastic_->state();
  j["seed"] = options_.exec.seed;
  j["data"] = options_.exec.data;
  j["optimizer"] = {{"kind", o.kind},
                    {"lr", o.lr},
                    {"momentum", o.momentum},
                    {"weight_decay", o.weight_decay},
                    {"beta1", o.beta1},
                    {"beta2", o.beta2},
                    {"eps", o.eps}};
  j["lr_schedule"] = {{"decay", options_.lr_decay}, {"every_epochs", options_.lr_decay_every}};
  j["lr"] = p.lr;
  // Dropout masks are keyed by (seed, replica, global micro-batch): the step fixes the next key.
  j["dropout"] = {{"seed", options_.exec.seed}, {"next_micro_batch", p.step * plan_.chunks}};
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

void Trainer::restore_progress(const JsonView& v) {
  const auto& o = options_.exec.optimizer;
  expect_same<int64_t>(v, "steps_per_epoch", steps_per_epoch(), "steps per epoch");
  expect_same<uint64_t>(v, "seed", options_.exec.seed, "--seed");
  expect_same<std::string>(v, "data", options_.exec.data, "--data");
  const JsonView opt = v.at("optimizer");
  expect_same<std::string>(opt, "kind", o.kind, "--optimizer");
  expect_same<double>(opt, "lr", o.lr, "--lr");
  expect_same<double>(opt, "momentum", o.momentum, "--momentum");
  expect_same<double>(opt, "weight_decay", o.weight_decay, "weight decay");
  expect_same<double>(opt, "beta1", o.beta1, "beta1");
  expect_same<double>(opt, "beta2", o.beta2, "beta2");
  expect_same<double>(opt, "eps", o.eps, "eps");
  expect_same<double>(v.at("lr_schedule"), "decay", options_.lr_decay, "--lr-decay");
  expect_same<int>(v.at("lr_schedule"), "every_epochs", options_.lr_decay_every,
                   "--lr-decay-every");
  Progress& p = *progress_;
  p.step = v.integer("step");
  p.epoch = v.integer("epoch");
  p.epoch_step = v.integer("epoch_step");
  p.epoch_sample = v.integer("epoch_sample");
  if (data_->epochs) {
    const JsonView s = v.at("sampler");
    elastic::ElasticSampler::Position pos;
    pos.epoch = s.int32("epoch");
    for (const auto& c : s.at("cursor").items())
      pos.cursor.push_back(static_cast<long>(c.as_int()));
    try {
      data_->epochs->restore(pos);
    } catch (const InputError& e) {
      s.fail(e.what());
    }
  }
  if (elastic_) elastic_->restore(v.at("elastic"));
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
  p.loss_sum = session_->rank() == 0 ? part.number("loss_sum") : 0;
  p.samples = part.integer("samples");
  p.steps = part.integer("steps");
  p.train_s = part.number("train_s");
  p.transition_s = part.number("transition_s");
  p.wall_s = part.number("wall_s");
  p.log.clear();
  for (const auto& r : v.at("log").items()) p.log.push_back(EpochReport::from_json(r));
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) const {
  if (!dist_) return values;
  std::vector<at::Tensor> t{at::tensor(values, at::kDouble)};
  try {
    dist_->world().allreduce(t)->wait(dist_->timeout());
  } catch (const std::exception& e) {
    throw RunFailure(fmt::format("rank {}: step {}: waiting for the other ranks: {}", dist_->rank(),
                                 progress_->step, e.what()));
  }
  const at::Tensor& r = t[0];
  return std::vector<double>(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
}

void Trainer::agree(std::exception_ptr failure, const std::string& what, bool input_error) const {
  std::string msg;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
      msg = "unknown error";
    }
  }
  const int rank = dist_ ? dist_->rank() : 0, world = dist_ ? dist_->world_size() : 1;
  std::vector<double> flags(static_cast<size_t>(world), 0.0);
  flags[static_cast<size_t>(rank)] = failure ? 1.0 : 0.0;
  if (dist_) {
    if (failure) {
      dist_->store().set(fmt::format("agree/{}/{}", what, rank),
                         std::vector<uint8_t>(msg.begin(), msg.end()));
    }
    flags = sum_over_ranks(flags);
  }
  const std::string me = dist_ ? fmt::format("rank {}: ", rank) : std::string();
  auto fail = [input_error](const std::string& text) {
    if (input_error) throw InputError(text);
    throw RunFailure(text);
  };
  if (failure) {
    if (input_error && !dist_) std::rethrow_exception(failure);
    fail(fmt::format("{}{} failed: {}", me, what, msg));
  }
  for (int r = 0; r < world; ++r) {
    if (flags[static_cast<size_t>(r)] == 0) continue;
    const std::vector<uint8_t> m = dist_->store().get(fmt::format("agree/{}/{}", what, r));
    fail(fmt::format("{}{} failed on rank {}: {}", me, what, r, std::string(m.begin(), m.end())));
  }
}

bool Trainer::checkpoint_due(bool epoch_end) const {
  if (options_.checkpoint_dir.empty()) return false;
  const int64_t s = progress_->step;
  if (s == progress_->last_checkpoint) return false;
  return (options_.checkpoint_every_epoch && epoch_end) ||
         (options_.checkpoint_every_steps > 0 && s % options_.checkpoint_every_steps == 0);
}

RankState Trainer::capture_state() {
  Progress& p = *progress_;
  // The epoch's partial loss as one number, so any rank can hold it after a resume.
  const double local_loss = p.loss_sum;
  p.loss_sum = sum_over_ranks({local_loss})[0];
  p.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - p.mark).count();
  p.mark = std::chrono::steady_clock::now();
  RankState st;
  st.rank = session_->rank();
  st.world = session_->world();
  st.step = p.step;
  st.plan = fingerprint_;
  st.progress = progress_json();
  p.loss_sum = local_loss;
  for (const auto& [d, stages] : session_->hosted()) {
    for (const auto& [s, rt] : stages) {
      st.stages.push_back(
          capture_stage(d / session_->shape().devices_per_replica, *rt, session_->model()));
    }
  }
  {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    st.rng_state = gen.get_state();
  }
  return st;  // the data's position is the sampler's, in `progress`
}

Manifest Trainer::gather_manifest(const ManifestFile& mine) const {
  // Every rank contributes its file's size and hash (as two exact 32-bit halves) to a sum.
  const int rank = session_->rank(), world = session_->world();
  std::vector<double> table(static_cast<size_t>(3 * world), 0.0);
  table[static_cast<size_t>(3 * rank)] = static_cast<double>(mine.bytes);
  table[static_cast<size_t>(3 * rank + 1)] = static_cast<double>(mine.fnv1a64 >> 32);
  table[static_cast<size_t>(3 * rank + 2)] = static_cast<double>(mine.fnv1a64 & 0xffffffffULL);
  table = sum_over_ranks(table);
  Manifest m;
  m.step = progress_->step;
  m.world = world;
  m.plan = fingerprint_;
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

void Trainer::checkpoint() {
  Progress& p = *progress_;
  const std::string& dir = options_.checkpoint_dir;
  const int rank = session_->rank();
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
  agree(failure, what, false);
  // 2. The manifest, once every file is there.
  const Manifest m = gather_manifest(mine);
  try {
    Fault::from_environment().at_checkpoint(rank, p.step);
    if (rank == 0) write_manifest(dir, m);
  } catch (...) {
    failure = std::current_exception();
  }
  agree(failure, what + " (manifest)", false);
  // 3. What no manifest names any more.
  if (rank == 0) remove_unreferenced(dir, m);
  p.last_checkpoint = p.step;
}

std::optional<Plan> Trainer::resumed_plan(const Manifest& m, const RankState& st,
                                          const std::string& origin) const {
  if (m.plan == fingerprint_) return std::nullopt;
  // An elastic run checkpointed after a re-plan: the plan is in the checkpoint, and the run must
  // have started from --plan.
  const JsonView v(st.progress, origin, "progress");
  const std::string initial = v.string_or("initial_plan", "");
  if (initial != fingerprint_ || !v.has("plan")) {
    throw InputError(fmt::format(
        "{}: plan: \"{}\", but --plan gives \"{}\", and the run did not start from it either "
        "(it started from \"{}\")",
        origin, m.plan, fingerprint_, initial));
  }
  Plan p = plan_from_json(v.at("plan"));
  const std::string fp = plan_fingerprint(p, precision_tag(options_.exec.precision()));
  if (fp != m.plan) {
    v.at("plan").fail(fmt::format("fingerprint \"{}\", but the manifest says \"{}\"", fp, m.plan));
  }
  return p;
}

void Trainer::resume() {
  const std::string& dir = options_.checkpoint_dir;
  const std::string manifest_path = dir + "/" + kManifestName;
  const std::optional<Manifest> m = read_manifest(dir);
  if (!m) throw InputError(fmt::format("--resume: {}: no checkpoint to resume", manifest_path));
  // An elastic run may continue on fewer ranks (a rank was lost, --on-rank-loss continue).
  const bool fewer = m->world != session_->world();
  if (fewer && !(elastic_ && session_->world() < m->world)) {
    throw InputError(fmt::format(
        "{}: world: {} processes wrote it, but this run has {} (only an --elastic run may continue "
        "on fewer)",
        manifest_path, m->world, session_->world()));
  }
  if (m->plan != fingerprint_ && !elastic_) {
    throw InputError(fmt::format(
        "{}: plan: \"{}\", but --plan gives \"{}\" (another model, partition, schedule, M, DP "
        "width, batch or dtype)",
        manifest_path, m->plan, fingerprint_));
  }
  std::exception_ptr failure;
  RankState st;
  std::string origin;
  std::optional<Plan> plan;
  StageState all;  // fewer ranks: every layer's state, from every rank's file
  try {
    st = fewer ? read_every_rank(*m, all) : read_rank_file(dir, *m, session_->rank());
    origin = dir + "/" + m->files[static_cast<size_t>(st.rank)].file;
    plan = resumed_plan(*m, st, origin);
  } catch (...) {
    failure = std::current_exception();
  }
  agree(failure, "resume", true);
  // Every rank: the same plan, from the same progress.
  if (plan && !fewer) replace_session(*plan);
  try {
    restore_progress(JsonView(st.progress, origin, "progress"));
    if (fewer) {
      if (plan) plan_ = *plan;  // what the lost ranks ran, for the message
      continue_on_fewer_ranks(*m, all, origin);
      restore_rng(st);
    } else {
      restore_stages(st, origin);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  agree(failure, "resume (state)", true);
  set_cache(progress_->cache);  // an empty cache at the checkpoint's boundary
  progress_->last_checkpoint = m->step;
  result_.resumed_from = m->step;
}

void Trainer::restore_stages(const RankState& st, const std::string& origin) {
  for (const auto& [d, stages] : session_->hosted()) {
    for (const auto& [s, rt] : stages) {
      const int replica = d / session_->shape().devices_per_replica;
      const StageState* found = nullptr;
      for (const auto& x : st.stages) {
        if (x.replica == replica && x.stage == s) found = &x;
      }
      if (!found) {
        throw InputError(fmt::format("{}: stages: no replica {} stage {}", origin, replica, s));
      }
      restore_stage(*found, *rt, session_->model(), origin);
    }
  }
  restore_rng(st);
}

void Trainer::restore_rng(const RankState& st) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(st.rng_state);
}

}  // namespace pipetwin::exec
