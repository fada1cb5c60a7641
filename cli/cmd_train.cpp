// `pipetwin train`: a training run of a plan over epochs, with a per-epoch log, atomic
// checkpoints and resume (exec/train/trainer.hpp). Without --elastic it is PipeTransformer's
// baseline mode: the plan's pipeline and data parallelism, no freezing. With --elastic it is
// PipeTransformer live (exec/train/elastic_policy.hpp): at every freeze step (--freeze-interval N
// epochs or N steps) Equation 1 with rate --alpha on the measured gradient norms, then AutoPipe
// (lambda_frozen --lambda-frozen, Equation 2 compression, M from [K, 6K]) and AutoDP; and
// AutoCache (--autocache auto|on|off, --cache-dir, --cache-spill-dir, --cache-memory;
// exec/runtime/activation_store.hpp).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "cli/plan_flags.hpp"
#include "core/error.hpp"
#include "exec/platform/distributed.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"

namespace pipetwin::cli {

namespace {

struct TrainArgs {
  std::string plan, data = "digits", optimizer, log, epoch_log, freeze_trace;
  std::string checkpoint_dir, checkpoint_every;
  bool elastic = false;
  std::string freeze_interval = "1epoch", lambda_frozen = "1/6", freeze_rule = "eq1";
  std::string autocache = "auto", cache_dir, cache_spill_dir, cache_memory;
  std::string on_rank_loss = "stop";
  std::string dtype;
  int max_restarts = 3;
  double alpha = 1.0 / 3.0;
  int epochs = 1, nproc = 1, master_port = 0, threads = 1, timeout_s = 120;
  int64_t max_steps = 0;
  int steps_per_epoch = 8, eval_batches = 4, lr_decay_every = 0;
  uint64_t seed = 1;
  double lr = 0.05, momentum = 0.9, weight_decay = 0, lr_decay = 1;
  bool float64 = false, no_pin = false, quiet = false, resume = false;
};

// --checkpoint-every STEPS|epoch
void parse_checkpoint_every(const std::string& text, exec::TrainOptions& o) {
  if (text.empty()) return;
  if (text == "epoch" || text == "epochs") {
    o.checkpoint_every_epoch = true;
    return;
  }
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (*end != 0 || n <= 0 || n > (1LL << 30)) {
    throw InputError(fmt::format(
        "--checkpoint-every: expected a positive number of steps or \"epoch\", got \"{}\"", text));
  }
  o.checkpoint_every_steps = static_cast<int>(n);
}

// --freeze-interval N[epoch|step]: "2", "2epoch", "2epochs", "50step", "50steps".
void parse_freeze_interval(const std::string& text, exec::ElasticOptions& e) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = used > 0 ? text.substr(used) : std::string("?");
  if (used == 0 || n <= 0 || n > (1LL << 30) ||
      !(unit.empty() || unit == "epoch" || unit == "epochs" || unit == "step" || unit == "steps")) {
    throw InputError(fmt::format(
        "--freeze-interval: expected N, Nepoch or Nstep with N positive, got \"{}\"", text));
  }
  e.interval = static_cast<int>(n);
  e.unit = unit.rfind("step", 0) == 0 ? elastic::FreezeUnit::kStep : elastic::FreezeUnit::kEpoch;
}

// --lambda-frozen: a number or a fraction "1/6".
double parse_fraction(const std::string& flag, const std::string& text) {
  const size_t slash = text.find('/');
  try {
    size_t used = 0;
    if (slash == std::string::npos) {
      const double x = std::stod(text, &used);
      if (used == text.size()) return x;
    } else {
      const double num = std::stod(text.substr(0, slash), &used);
      if (used == slash) {
        const std::string rest = text.substr(slash + 1);
        const double den = std::stod(rest, &used);
        if (used == rest.size() && den != 0) return num / den;
      }
    }
  } catch (const std::exception&) {
  }
  throw InputError(
      fmt::format("{}: expected a number or a fraction like 1/6, got \"{}\"", flag, text));
}

// --cache-memory BYTES: "1048576", "512KiB", "64MiB", "2GiB" (also K, M, G: binary units).
double parse_bytes(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double x = -1;
  try {
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = used > 0 ? text.substr(used) : std::string("?");
  const std::vector<std::pair<std::string, double>> units = {
      {"", 1},          {"B", 1},           {"K", 1024.0},       {"KiB", 1024.0},
      {"M", 1048576.0}, {"MiB", 1048576.0}, {"G", 1073741824.0}, {"GiB", 1073741824.0}};
  for (const auto& [name, scale] : units) {
    if (unit == name && x >= 0) return x * scale;
  }
  throw InputError(fmt::format(
      "{}: expected a non-negative number of bytes like 1048576, 512MiB or 2GiB, got \"{}\"", flag,
      text));
}

exec::CacheOptions cache_options(const TrainArgs& a) {
  exec::CacheOptions c;
  c.mode = exec::parse_autocache_mode(a.autocache);
  c.dir = a.cache_dir;
  c.spill_dir = a.cache_spill_dir;
  if (!a.cache_memory.empty())
    c.memory_budget_bytes = parse_bytes("--cache-memory", a.cache_memory);
  c.validate();
  return c;
}

std::optional<exec::ElasticOptions> elastic_options(const TrainArgs& a) {
  if (!a.elastic) return std::nullopt;
  exec::ElasticOptions e;
  e.alpha = a.alpha;
  parse_freeze_interval(a.freeze_interval, e);
  e.lambda_frozen = parse_fraction("--lambda-frozen", a.lambda_frozen);
  if (a.freeze_rule != "eq1" && a.freeze_rule != "bound") {
    throw InputError(
        fmt::format("--freeze-rule: expected eq1 or bound, got \"{}\"", a.freeze_rule));
  }
  e.gradient_norms = a.freeze_rule == "eq1";
  e.validate();
  return e;
}

exec::TrainOptions train_options(const TrainArgs& a) {
  exec::TrainOptions o;
  o.exec.seed = a.seed;
  o.exec.optimizer.kind = a.optimizer.empty() ? "sgd" : a.optimizer;
  o.exec.optimizer.lr = a.lr;
  o.exec.optimizer.momentum = a.momentum;
  o.exec.optimizer.weight_decay = a.weight_decay;
  const exec::Precision precision = exec::parse_precision_flags(a.dtype, a.float64);
  o.exec.float64 = precision.float64;
  o.exec.autocast = precision.autocast;
  exec::check_precision_device(precision, o.exec.device);
  o.exec.threads_per_stage = a.threads;
  o.exec.pin_threads = !a.no_pin;
  o.exec.timeout = std::chrono::seconds(a.timeout_s);
  o.exec.data = a.data;
  o.epochs = a.epochs;
  o.max_steps = a.max_steps;
  o.steps_per_epoch = a.steps_per_epoch;
  o.eval_batches = a.eval_batches;
  o.lr_decay = a.lr_decay;
  o.lr_decay_every = a.lr_decay_every;
  o.checkpoint_dir = a.checkpoint_dir;
  parse_checkpoint_every(a.checkpoint_every, o);
  o.resume = a.resume;
  o.log = a.log;
  o.epoch_log = a.epoch_log;
  o.freeze_trace = a.freeze_trace;
  o.verbose = !a.quiet;
  o.elastic = elastic_options(a);
  o.autocache = cache_options(a);
  o.validate();
  return o;
}

// --on-rank-loss stop|continue: a lost rank (killed, crashed) ends the job on every rank (the
// peers fail their next collective within --timeout and exit with the error); with "continue"
// the launcher then starts the job again without the lost ranks, resuming the last checkpoint:
// the trainer re-plans the elastic run for the devices that are left (AutoDP with fewer
// replicas, exec/train/trainer.hpp "fewer ranks"). Like torchelastic, the work since that
// checkpoint is done again. Only a rank that died by a signal counts as lost: a rank that raised an
// error would raise it again.
void check_rank_loss_flags(const TrainArgs& a) {
  if (a.on_rank_loss != "stop" && a.on_rank_loss != "continue") {
    throw InputError(
        fmt::format("--on-rank-loss: expected stop or continue, got \"{}\"", a.on_rank_loss));
  }
  if (a.max_restarts < 0) {
    throw InputError(fmt::format("--max-restarts must not be negative ({} given)", a.max_restarts));
  }
  if (a.on_rank_loss == "continue" && (!a.elastic || a.checkpoint_dir.empty())) {
    throw InputError(
        "--on-rank-loss continue: needs --elastic (the policy re-plans for fewer replicas) and "
        "--checkpoint-dir (the state to continue from)");
  }
}

void run_local_train(const TrainArgs& a) {
  int nproc = a.nproc;
  std::vector<std::string> extra;
  for (int restart = 0;; ++restart) {
    // The processes' restart count, as torchelastic's TORCHELASTIC_RESTART_COUNT.
    ::setenv("PIPETWIN_RESTART_COUNT", std::to_string(restart).c_str(), 1);
    const LocalJobResult job = relaunch_local_job(nproc, a.master_port, extra);
    if (job.status == 0) return;
    const std::string failed =
        fmt::format("train: the {}-process job failed (exit status {})", nproc, job.status);
    if (a.on_rank_loss != "continue" || job.lost.empty()) throw RunFailure(failed);
    const int left = nproc - static_cast<int>(job.lost.size());
    const std::optional<exec::Manifest> m = exec::read_manifest(a.checkpoint_dir);
    std::string why;
    if (left < 1) why = "no rank is left";
    if (!m) why = fmt::format("there is no checkpoint in {}", a.checkpoint_dir);
    if (restart >= a.max_restarts) why = fmt::format("--max-restarts {} reached", a.max_restarts);
    if (!why.empty()) {
      throw RunFailure(fmt::format("{}; lost rank(s) {}, not continuing: {}", failed,
                                   fmt::join(job.lost, ", "), why));
    }
    std::fprintf(stderr,
                 "pipetwin: lost rank(s) %s; continuing on %d process%s from the checkpoint of "
                 "step %lld (restart %d of at most %d)\n",
                 fmt::format("{}", fmt::join(job.lost, ", ")).c_str(), left, left == 1 ? "" : "es",
                 static_cast<long long>(m->step), restart + 1, a.max_restarts);
    nproc = left;
    if (!a.resume) extra = {"--resume"};
  }
}

void run_train(const TrainArgs& a) {
  require_positive("--timeout", a.timeout_s);
  require_positive("--nproc", a.nproc);
  check_rank_loss_flags(a);
  train_options(a);  // bad flags before anything runs
  const Plan plan = load_plan(a.plan);
  TrainArgs with_plan = a;
  plan_training_defaults(plan.profile, with_plan.dtype, with_plan.float64, with_plan.optimizer,
                         with_plan.momentum);
  const exec::TrainOptions o = train_options(with_plan);
  // The elastic policy checks the plan (transformer layers, one stage per device) before any
  // process starts.
  if (o.elastic) exec::ElasticPolicy(plan, *o.elastic);
  if (a.nproc > 1 && std::getenv("RANK") == nullptr) {
    run_local_train(a);
    return;
  }
  const exec::DistributedEnv env = exec::DistributedEnv::from_environment();
  std::unique_ptr<exec::Distributed> dist;
  if (env.distributed()) dist = std::make_unique<exec::Distributed>(env, o.exec.timeout);
  exec::Trainer trainer(plan, o, dist.get());
  const exec::TrainResult r = trainer.run();
  if (env.rank != 0 || a.quiet) return;
  if (r.resumed_from >= 0) {
    std::printf("resumed from the checkpoint of step %lld\n",
                static_cast<long long>(r.resumed_from));
  }
  std::printf("trained %lld steps", static_cast<long long>(r.steps));
  if (a.elastic) {
    const Plan& p = trainer.plan();
    std::printf(" (ended at K=%d dp=%d M=%d, %d transformer layers frozen)", p.num_stages(), p.dp,
                p.chunks, trainer.frozen_layers());
  }
  if (r.last_checkpoint >= 0) {
    std::printf("; last checkpoint: step %lld in %s", static_cast<long long>(r.last_checkpoint),
                a.checkpoint_dir.c_str());
  }
  std::printf("\nwrote %s\n", a.log.c_str());
}

// The optimizer and its learning-rate schedule.
void add_optimizer_options(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option("--optimizer", a->optimizer,
                  "sgd or adam (default: the optimizer the plan's profile is for, else sgd)");
  cmd->add_option("--lr", a->lr, "learning rate")->capture_default_str();
  cmd->add_option("--momentum", a->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--lr-decay", a->lr_decay, "multiply the rate by this every --lr-decay-every")
      ->capture_default_str();
  cmd->add_option("--lr-decay-every", a->lr_decay_every, "epochs between decays (0: never)")
      ->capture_default_str();
}

// PipeTransformer's elastic training: the freeze algorithm, AutoPipe, AutoDP, AutoCache.
void add_elastic_options(CLI::App* cmd, TrainArgs* a) {
  CLI::Option* elastic = cmd->add_flag(
      "--elastic", a->elastic,
      "PipeTransformer: freeze layers (Equation 1), re-plan (AutoPipe), add replicas (AutoDP)");
  cmd->add_option("--alpha", a->alpha, "elastic: freeze rate alpha in (0, 1)")
      ->capture_default_str()
      ->needs(elastic);
  cmd->add_option("--freeze-interval", a->freeze_interval,
                  "elastic: freeze step every N epochs (N, Nepoch) or N optimizer steps (Nstep)")
      ->capture_default_str()
      ->needs(elastic);
  cmd->add_option("--lambda-frozen", a->lambda_frozen,
                  "elastic: memory of a frozen layer relative to an active one (AutoPipe)")
      ->capture_default_str()
      ->needs(elastic);
  cmd->add_option("--freeze-rule", a->freeze_rule,
                  "elastic: eq1 (gradient norms and the alpha bound) or bound (Equation 3 alone)")
      ->capture_default_str()
      ->needs(elastic);
  cmd->add_option("--autocache", a->autocache,
                  "elastic: cache the frozen layers' output per sample: auto (when the cost model "
                  "says reading beats the forward pass), on or off")
      ->capture_default_str()
      ->needs(elastic);
  cmd->add_option("--cache-dir", a->cache_dir,
                  "elastic: folder of the machine's shared cache (default: a per-job folder in "
                  "/dev/shm)")
      ->needs(elastic);
  cmd->add_option("--cache-spill-dir", a->cache_spill_dir,
                  "elastic: folder of the entries beyond --cache-memory (default: --cache-dir, "
                  "else a per-job folder in the temp dir)")
      ->needs(elastic);
  cmd->add_option("--cache-memory", a->cache_memory,
                  "elastic: host memory for cached activations, bytes (512MiB, 2GiB; default: "
                  "unlimited); the rest spills to disk")
      ->needs(elastic);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a plan for real over epochs: per-epoch log, atomic checkpoints, resume");
  cmd->add_option("--plan", a->plan, "plan JSON")->required();
  cmd->add_option("--epochs", a->epochs, "epochs to train")->capture_default_str();
  cmd->add_option("--max-steps", a->max_steps, "stop after this many optimizer steps (0: none)")
      ->capture_default_str();
  cmd->add_option("--data", a->data, "digits, digits-tokens or synthetic")->capture_default_str();
  cmd->add_option("--steps-per-epoch", a->steps_per_epoch, "synthetic data: steps per epoch")
      ->capture_default_str();
  cmd->add_option("--eval-batches", a->eval_batches, "synthetic data: held-out batches")
      ->capture_default_str();
  cmd->add_option("--log", a->log, "per-epoch log to write (JSON lines)")->required();
  cmd->add_option("--epoch-log", a->epoch_log,
                  "also write the epochs as a pipetwin.elastic_log (.json, or .csv)");
  cmd->add_option("--freeze-trace", a->freeze_trace, "write the freeze trace here");
  cmd->add_option("--checkpoint-dir", a->checkpoint_dir, "folder of the checkpoints");
  cmd->add_option("--checkpoint-every", a->checkpoint_every,
                  "checkpoint every STEPS optimizer steps, or every \"epoch\" (and at the end)");
  cmd->add_flag("--resume", a->resume, "continue from the last checkpoint in --checkpoint-dir");
  cmd->add_option("--on-rank-loss", a->on_rank_loss,
                  "--nproc, elastic: when a rank dies, stop every rank, or continue: restart "
                  "without it from the last checkpoint, with fewer replicas")
      ->capture_default_str();
  cmd->add_option("--max-restarts", a->max_restarts, "--on-rank-loss continue: restarts at most")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "weights, data order and dropout seed")->capture_default_str();
  add_optimizer_options(cmd, a.get());
  add_elastic_options(cmd, a.get());
  add_dtype_flag(cmd, &a->dtype);
  cmd->add_flag("--float64", a->float64, "train in float64 (--dtype float64)");
  cmd->add_option("--threads-per-stage", a->threads, "intra-op threads per stage")
      ->capture_default_str();
  cmd->add_flag("--no-pin", a->no_pin, "do not pin stage threads to cores");
  cmd->add_option("--nproc", a->nproc, "processes to start on this machine (c10d Gloo)")
      ->capture_default_str();
  cmd->add_option("--master-port", a->master_port, "rendezvous port for --nproc");
  cmd->add_option("--timeout", a->timeout_s, "seconds to wait for a peer before failing")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing");
  cmd->callback([a] { run_train(*a); });
}

}  // namespace pipetwin::cli
