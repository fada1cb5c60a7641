// The executor's verbs: `pipetwin run` (a plan, for real) and `pipetwin profile` (a model);
// `pipetwin train` lives in cmd_train.cpp.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/distributed.hpp"
#include "exec/platform/host.hpp"
#include "exec/platform/launcher.hpp"
#include "exec/platform/tensor_io.hpp"
#include "exec/profile/profiler.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/executor.hpp"
#include "models/torchscript_spec.hpp"

namespace pipetwin::cli {

namespace {

struct RunArgs {
  std::string plan, timeline, metrics, data = "synthetic", optimizer, save_parameters,
                                       device = "auto", dtype;
  int iterations = 0, nproc = 1, master_port = 0, threads = 1, timeout_s = 120;
  uint64_t seed = 1;
  double lr = 0.01, momentum = 0;
  bool float64 = false, no_pin = false, quiet = false;
};

std::vector<std::string> args_without_nproc(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

int g_argc = 0;
char** g_argv = nullptr;

}  // namespace

int relaunch_local(int nproc, int master_port) {
  return relaunch_local_job(nproc, master_port, {}).status;
}

LocalJobResult relaunch_local_job(int nproc, int master_port,
                                  const std::vector<std::string>& extra) {
  if (!exec::built_with_gloo()) {
    throw InputError(
        fmt::format("--nproc {}: this pipetwin was built without Gloo, so it runs in "
                    "one process only",
                    nproc));
  }
  std::vector<std::string> args = args_without_nproc(g_argc, g_argv);
  args.insert(args.end(), extra.begin(), extra.end());
  const exec::LocalJob job = exec::run_local_job(nproc, args, master_port, std::chrono::seconds(5));
  return {job.status, job.lost};
}

namespace {

void run_run(const RunArgs& given) {
  exec::parse_precision_flags(given.dtype, given.float64);  // a bad flag before anything runs
  if (given.nproc > 1 && std::getenv("RANK") == nullptr) {
    const int status = relaunch_local(given.nproc, given.master_port);
    if (status != 0)
      throw InputError(
          fmt::format("run: the {}-process job failed (exit status {})", given.nproc, status));
    return;
  }
  const Plan plan = load_plan(given.plan);
  RunArgs a = given;
  plan_training_defaults(plan.profile, a.dtype, a.float64, a.optimizer, a.momentum);
  const exec::Precision precision = exec::parse_precision_flags(a.dtype, a.float64);
  exec::ExecOptions o;
  o.iterations = a.iterations;
  o.seed = a.seed;
  o.optimizer.kind = a.optimizer;
  o.optimizer.lr = a.lr;
  o.optimizer.momentum = a.momentum;
  o.float64 = precision.float64;
  o.autocast = precision.autocast;
  o.threads_per_stage = a.threads;
  o.pin_threads = !a.no_pin;
  o.timeout = std::chrono::seconds(a.timeout_s);
  o.data = a.data;
  if (a.data != "synthetic" && a.data != "digits" && a.data != "digits-tokens") {
    throw InputError(
        fmt::format("--data: expected synthetic, digits or digits-tokens, got \"{}\"", a.data));
  }
  const exec::DistributedEnv env = exec::DistributedEnv::from_environment();
  // Between processes the stages exchange host tensors (c10d Gloo): "auto" means the CPU there.
  o.device = env.distributed() && a.device == "auto" ? "cpu" : exec::resolve_device(a.device);
  exec::check_precision_device(precision, o.device);
  std::unique_ptr<exec::Distributed> dist;
  if (env.distributed()) dist = std::make_unique<exec::Distributed>(env, o.timeout);
  const exec::ExecResult r = exec::execute_plan(plan, o, dist.get());
  if (!a.save_parameters.empty()) {
    std::filesystem::create_directories(a.save_parameters);
    // A tensor-parallel rank saves its shard: replica{r}_stage{s}_tp{k}.pt.
    const std::string shard = plan.tp() > 1 ? fmt::format("_tp{}", r.tp_rank) : "";
    for (const auto& [key, tensors] : r.parameters) {
      exec::save_tensors(
          fmt::format("{}/replica{}_stage{}{}.pt", a.save_parameters, key.first, key.second, shard),
          tensors);
    }
    for (const auto& [key, tensors] : r.stage_copies) {
      const auto [replica, stage, copy] = key;
      exec::save_tensors(
          fmt::format("{}/replica{}_stage{}_copy{}.pt", a.save_parameters, replica, stage, copy),
          tensors);
    }
  }
  if (env.rank != 0) return;
  if (!a.timeline.empty()) save_timeline(r.timeline, a.timeline);
  if (!a.metrics.empty()) save_metrics(r.metrics, a.metrics);
  if (a.quiet) return;
  const PlanContext ctx(plan, a.iterations);
  std::fputs(metrics_summary(ctx, r.metrics).c_str(), stdout);
  std::string losses;
  for (double l : r.step_loss) losses += fmt::format(" {:.4f}", l);
  if (!r.step_loss.empty() && env.world_size == 1)
    std::printf("\nloss per step:%s\n", losses.c_str());
}

struct ProfileArgs {
  std::string model, output, device = "cpu", catalog_device, micro = "1,2,4,8", optimizer = "sgd",
                             dtype;
  int warmup = 2, repeats = 7, threads = 1;
  double momentum = 0;
  bool float64 = false, quiet = false, no_contention = false, no_cold = false;
  models::TorchScriptFlags torchscript;  // folded into a torchscript: model's name
};

// The cold-start column: the extra after the longest measured wait.
std::string cold_heading(const Profile& p) {
  if (p.cold_pauses_s.empty()) return "cold fwd/bwd";
  return fmt::format("cold fwd/bwd @{:g} ms", p.cold_pauses_s.back() * 1e3);
}

void run_profile(const ProfileArgs& a) {
  const exec::Precision precision = exec::parse_precision_flags(a.dtype, a.float64);
  exec::ProfileOptions o;
  o.micro_batches.clear();
  std::stringstream ss(a.micro);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      o.micro_batches.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw InputError(
          fmt::format("--micro-batch: expected comma-separated integers, got \"{}\"", a.micro));
    }
  }
  o.warmup = a.warmup;
  o.repeats = a.repeats;
  o.threads = a.threads;
  o.float64 = precision.float64;
  o.autocast = precision.autocast;
  o.contention = !a.no_contention;
  if (a.no_cold) o.cold_pauses_s.clear();
  // --device cpu|cuda[:i] says where to measure; any other value is a catalog name (measured on
  // the CPU), as before GPUs were supported. The catalog name recorded: --catalog-device, else
  // the profiler's own choice (cpu-core, or the GPU's entry: exec/profile/profiler.cpp).
  const bool where = a.device == "cpu" || a.device.rfind("cuda", 0) == 0;
  o.torch_device = where ? a.device : "cpu";
  o.device = !a.catalog_device.empty() ? a.catalog_device : where ? "" : a.device;
  o.optimizer.kind = a.optimizer;
  o.optimizer.momentum = a.momentum;
  const Profile p = exec::profile_model(models::torchscript_model_name(a.model, a.torchscript), o);
  save_profile(p, a.output);
  if (a.quiet) return;
  Table t({"layer", "kind", "fwd @b=" + std::to_string(o.micro_batches.back()), "bwd",
           "contention fwd/bwd", cold_heading(p), "params", "saved/sample"});
  for (const auto& l : p.layers) {
    const LayerTiming& x = l.timings.back();
    t.add({l.name, l.kind, fmt_seconds(x.forward_s), fmt_seconds(x.backward_s),
           fmt::format("{:.2f}x / {:.2f}x", x.contention, x.backward_contention()),
           x.cold_forward_s.empty() ? std::string("-")
                                    : fmt_seconds(x.cold_forward_s.back()) + " / " +
                                          fmt_seconds(x.cold_backward_s.back()),
           fmt_bytes(l.param_bytes), fmt_bytes(l.saved_bytes_per_sample)});
  }
  std::printf("profile of %s on %s (%zu layers)\n%s", p.model.c_str(), p.device.c_str(),
              p.layers.size(), t.render().c_str());
  std::printf("wrote %s\n", a.output.c_str());
}

}  // namespace

void add_exec_commands(CLI::App& app) {
  exec::tune_malloc();  // before any thread allocates (exec/platform/host.hpp)
  auto run = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a plan for real with LibTorch and measure it");
  cmd->add_option("--plan", run->plan, "plan JSON")->required();
  cmd->add_option("--iterations", run->iterations, "mini-batches (default: the plan's)");
  cmd->add_option("--timeline", run->timeline, "write the measured Chrome-trace timeline here");
  cmd->add_option("--metrics", run->metrics, "write the measured metrics JSON here");
  cmd->add_option("--data", run->data, "synthetic, digits or digits-tokens")->capture_default_str();
  cmd->add_option("--seed", run->seed, "weights and data seed")->capture_default_str();
  cmd->add_option("--optimizer", run->optimizer,
                  "sgd or adam (default: the optimizer the plan's profile is for, else sgd)");
  cmd->add_option("--lr", run->lr, "learning rate")->capture_default_str();
  cmd->add_option("--momentum", run->momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--dtype", run->dtype,
                  "float32 (default), bfloat16 or float16 (autocast mixed precision over float32 "
                  "weights; float16 with loss scaling, on CUDA), or float64");
  cmd->add_flag("--float64", run->float64, "train in float64 (--dtype float64)");
  cmd->add_option("--device", run->device,
                  "auto, cpu, cuda (stages spread over the GPUs) or cuda:I (all on GPU I)")
      ->capture_default_str();
  cmd->add_option("--threads-per-stage", run->threads, "intra-op threads per stage")
      ->capture_default_str();
  cmd->add_flag("--no-pin", run->no_pin, "do not pin stage threads to cores");
  cmd->add_option("--nproc", run->nproc,
                  "processes to start on this machine (c10d Gloo on 127.0.0.1)")
      ->capture_default_str();
  cmd->add_option("--master-port", run->master_port,
                  "rendezvous port for --nproc (default: a free one)");
  cmd->add_option("--timeout", run->timeout_s, "seconds to wait for a peer before failing")
      ->capture_default_str();
  cmd->add_option("--save-parameters", run->save_parameters,
                  "write the final weights of every hosted stage to DIR/replicaR_stageS.pt "
                  "(a replicated stage's other copies to DIR/replicaR_stageS_copyK.pt)");
  cmd->add_flag("-q,--quiet", run->quiet, "print nothing");
  cmd->callback([run] { run_run(*run); });

  auto prof = std::make_shared<ProfileArgs>();
  CLI::App* p =
      app.add_subcommand("profile", "Measure a model's per-layer profile on this machine");
  p->add_option(
       "--model", prof->model,
       "zoo name, e.g. vit:tiny, bert:tiny, mlp; or torchscript:FILE.pt (docs/your-model.md)")
      ->required();
  models::TorchScriptFlags& ts = prof->torchscript;
  p->add_option("--input-shape", ts.input_shape, "torchscript: one sample's input, D1,D2,...");
  p->add_option("--input-dtype", ts.input_dtype, "torchscript: float32, float64 or int64 (tokens)");
  p->add_option("--vocab", ts.vocab, "torchscript: int64 inputs are drawn from [0, vocab)");
  p->add_option("--loss", ts.loss, "torchscript: cross_entropy (default) or mse");
  p->add_option("--classes", ts.classes, "torchscript: cross_entropy's classes (the output's)");
  p->add_option("--target-shape", ts.target_shape, "torchscript: one sample's target, D1,D2,...");
  p->add_option("--device", prof->device,
                "where to measure: cpu, cuda or cuda:I (or a catalog name, measured on the CPU)")
      ->capture_default_str();
  p->add_option("--catalog-device", prof->catalog_device,
                "hardware catalog name to record (default: cpu-core, or the GPU's entry)");
  p->add_option("--micro-batch", prof->micro, "micro-batch sizes, comma-separated")
      ->capture_default_str();
  p->add_option("--warmup", prof->warmup, "warm-up runs per measurement")->capture_default_str();
  p->add_option("--repeats", prof->repeats, "timed runs per measurement (median)")
      ->capture_default_str();
  p->add_option("--threads", prof->threads, "intra-op threads")->capture_default_str();
  p->add_option("--optimizer", prof->optimizer, "sgd or adam (optimizer state and step time)")
      ->capture_default_str();
  p->add_option("--momentum", prof->momentum, "SGD momentum")->capture_default_str();
  p->add_option("--dtype", prof->dtype,
                "float32 (default), bfloat16 or float16 (under autocast; float16 on CUDA), or "
                "float64");
  p->add_flag("--float64", prof->float64, "profile in float64 (--dtype float64)");
  p->add_flag("--no-contention", prof->no_contention,
              "skip measuring the slow-down under a co-runner on the second core");
  p->add_flag("--no-cold", prof->no_cold,
              "skip measuring what a wait beside the co-runner costs the next pass (cold starts)");
  p->add_flag("-q,--quiet", prof->quiet, "print nothing");
  p->add_option("-o,--output", prof->output, "profile JSON to write")->required();
  p->callback([prof] { run_profile(*prof); });

  add_train_command(app);
}

void set_command_line(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
}

}  // namespace pipetwin::cli
