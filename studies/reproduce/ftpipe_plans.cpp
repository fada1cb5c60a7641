// The pipelines of `pipetwin reproduce ftpipe` (see ftpipe.hpp).
//
// Partitions are memory-aware: the partitioner gets the GPU's capacity as its limit, and the plan
// is then checked with the schedule's exact memory walk; when the walk finds a GPU over, the limit
// is tightened (90%, 80%, ... of the GPU) and the partition redone. Seq-pipe lets FTPipe's
// contiguous competitors compete ("FTPipe employs several partitioning methods and let them
// compete, eventually selecting the best result according to its final throughput analysis via
// simulation", Section 4): the min-max contiguous partition with FTPipe's two profiles below,
// our optimal partitioner (forward + backward only), balance by time and balance by size; the
// fastest that fits wins. Mixed-pipe compares its candidates by simulating the very schedule
// that will run, a candidate that does not fit counting as unusable.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/schedule/generators.hpp"
#include "profiles/model_source.hpp"
#include "sim/planner.hpp"
#include "studies/reproduce/ftpipe.hpp"

namespace pipetwin::sim::ftpipe {

Schedule gpipe_last_stage_no_recompute(PipelineShape shape) {
  shape.checkpoint = Checkpoint::kAlways;
  Schedule s = make_gpipe(shape);
  std::vector<char> last(static_cast<size_t>(s.shape.num_stages), 1);
  for (const auto& e : s.shape.edges) last[static_cast<size_t>(e.from)] = 0;
  for (int d = 0; d < s.num_devices(); ++d) {
    auto& list = s.devices[static_cast<size_t>(d)];
    std::vector<int32_t> index(list.size(), -1);  // old -> new
    std::vector<Action> kept;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].op == Op::kRecompute && last[static_cast<size_t>(list[i].stage)]) continue;
      index[i] = static_cast<int32_t>(kept.size());
      kept.push_back(list[i]);
    }
    list = std::move(kept);
    for (auto& c : s.control) {
      for (ActionRef* ref : {&c.before, &c.after}) {
        if (ref->device == d) ref->index = index[static_cast<size_t>(ref->index)];
      }
    }
  }
  return s;
}

Setup make_setup(const Catalog& catalog, const Data& data) {
  Setup s;
  s.catalog = &catalog;
  s.data = &data;
  s.cluster = load_cluster(data.cluster, catalog);
  s.model = data.model;
  s.profile = resolve_profile(s.model, "", s.cluster.device);
  // "T5 experiments used Adafactor optimizer": factored second moments (a row and a column vector
  // per matrix) and no first moment, under 0.1% of the parameter bytes; counted as none.
  if (!data.optimizer_state) {
    for (auto& layer : s.profile.layers) layer.optimizer_bytes = 0;
  }
  return s;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

CostModel cost_model(const Setup& s) {
  CostOptions o;
  o.compute_scale = resolve_compute_scale(s.profile, s.cluster, s.catalog);
  return CostModel(s.profile, s.cluster, o);
}

Plan plan_for(const Setup& s, const std::string& partitioner, const Partition& part, bool async,
              int batch, int chunks) {
  Plan p;
  p.model = s.model;
  p.profile = s.profile;
  p.cluster = s.cluster;
  p.schedule = async ? "ftpipe-async" : "gpipe";
  p.partitioner = partitioner;
  p.batch_size = batch;
  p.chunks = chunks;
  p.checkpoint = async ? Checkpoint::kNone : Checkpoint::kAlways;
  p.compute_scale = resolve_compute_scale(s.profile, s.cluster, s.catalog);
  for (int st = 0; st < part.num_stages(); ++st) {
    p.stages.push_back(
        {part.stages[static_cast<size_t>(st)], part.device.empty() ? st : part.device_of(st)});
  }
  p.validate("reproduce ftpipe");
  return p;
}

SimResult simulate(const Plan& plan) {
  const PlanContext ctx(plan, 0);
  const Schedule s = plan.schedule == "gpipe" ? gpipe_last_stage_no_recompute(ctx.shape)
                                              : make_schedule(plan.schedule, ctx.shape);
  return simulate_plan(ctx, s, "reproduce ftpipe (" + plan.schedule + ")");
}

double max_peak(const SimResult& r) {
  double m = 0;
  for (const auto& d : r.memory.devices) m = std::max(m, d.peak_bytes);
  return m;
}

// FTPipe's Seq-pipe with its two profiles (Section 4.3): contiguous stages, one per GPU,
// minimising the slowest stage where every stage but the last costs forward + recompute +
// backward and the last forward + backward, under the GPU's memory as the schedule holds it —
// GPipe: a recomputing stage keeps the inputs of all M micro-batches and the saved activations
// of one, the last stage all of them; FTPipe's asynchronous pipeline: stage s of K keeps K - s
// inputs (its warm-up) and one set of saved activations, the last stage one of each. Dynamic
// programming over (stages, layers), O(K L^2) with the ranges' terms from prefix sums.
Partition seq_pipe_ftpipe_profiles(const CostModel& cost, bool async, double mb, int M, int K,
                                   double capacity) {
  const int L = cost.num_layers();
  std::vector<double> pre_rec(L + 1, 0), pre_fb(L + 1, 0), pre_static(L + 1, 0),
      pre_saved(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    const auto& p = cost.profile().layers[static_cast<size_t>(l)];
    pre_fb[l + 1] = pre_fb[l] + cost.forward_s(l, mb) + cost.backward_s(l, mb);
    pre_rec[l + 1] = pre_rec[l] + cost.recompute_s(l, mb);
    pre_static[l + 1] = pre_static[l] + 2 * p.param_bytes + p.optimizer_bytes;
    pre_saved[l + 1] = pre_saved[l] + p.saved_bytes_per_sample * mb;
  }
  // Input of the range [i, j): model input at layer 0 plus edges entering from outside.
  auto input = [&](int i, int j) {
    double b = i == 0 ? cost.profile().input_bytes_per_sample * mb : 0;
    for (const auto& e : cost.graph().edges()) {
      if (e.to >= i && e.to < j && (e.from < i || e.from >= j)) b += e.bytes_per_sample * mb;
    }
    return b;
  };
  auto cost_of = [&](int i, int j, int stage) {  // stage time, +inf when it does not fit
    const bool last = stage == K - 1;
    const double in = input(i, j), saved = pre_saved[j] - pre_saved[i];
    const double held = async ? (last ? in + saved : (K - stage) * in + saved)
                              : (last ? M * (in + saved) : M * in + saved);
    if (pre_static[j] - pre_static[i] + held > capacity) return kInf;
    return pre_fb[j] - pre_fb[i] + (last ? 0 : pre_rec[j] - pre_rec[i]);
  };
  std::vector<std::vector<double>> best(K + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> from(K + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= K; ++k) {
    for (int j = k; j <= L - (K - k); ++j) {
      if (k == K && j != L) continue;
      for (int i = k - 1; i < j; ++i) {
        if (best[k - 1][i] == kInf) continue;
        const double t = std::max(best[k - 1][i], cost_of(i, j, k - 1));
        if (t < best[k][j]) {
          best[k][j] = t;
          from[k][j] = i;
        }
      }
    }
  }
  if (best[K][L] == kInf) {
    throw InputError(fmt::format(
        "seq-pipe (FTPipe profiles): no {} contiguous stages fit {:.2f} GiB", K, capacity / kGiB));
  }
  std::vector<int> balance(static_cast<size_t>(K));
  for (int k = K, j = L; k > 0; j = from[k][j], --k)
    balance[static_cast<size_t>(k - 1)] = j - from[k][j];
  return contiguous_partition(balance);
}

}  // namespace

Run run_pipeline(const Setup& setup, bool mixed, bool async, int batch, int chunks) {
  Run best;
  best.mixed = mixed;
  best.async = async;
  best.batch = batch;
  best.chunks = chunks;
  const CostModel cost = cost_model(setup);
  const double capacity = setup.cluster.device.memory_bytes;
  const int gpus = setup.gpus();
  const std::vector<std::string>& names =
      mixed ? setup.data->mixed_partitioners : setup.data->seq_partitioners;
  for (const auto& name : names) {
    PartitionRequest pr;
    pr.cost = &cost;
    pr.num_stages = gpus;
    pr.micro_batch = static_cast<double>(batch) / chunks;
    pr.micro_batches = chunks;
    pr.in_flight = 1;
    pr.evaluate = [&](const Partition& c) {
      try {
        const SimResult r = simulate(plan_for(setup, name, c, async, batch, chunks));
        return max_peak(r) <= capacity ? r.metrics.iteration_time_s : kInf;
      } catch (const InputError&) {
        return kInf;
      }
    };
    // The partitioner's estimate (static bytes + one micro-batch of activations per stage) is
    // short of the walk where a stage keeps several micro-batches: tighten its limit until the
    // walk agrees.
    for (double fraction : setup.data->memory_fractions) {
      pr.memory_limit_bytes = fraction * capacity;
      Run run = best;
      run.partitioner = name;
      try {
        run.partition = name == kFtpipeSeq
                            ? seq_pipe_ftpipe_profiles(cost, async, pr.micro_batch, chunks, gpus,
                                                       pr.memory_limit_bytes)
                            : make_partitioner(name)->partition(pr);
      } catch (const InputError& e) {
        if (!best.fits) best.error = e.what();
        break;
      }
      run.sim = simulate(plan_for(setup, name, run.partition, async, batch, chunks));
      for (const auto& d : run.sim.memory.devices) run.peaks.push_back(d.peak_bytes);
      if (max_peak(run.sim) > capacity) continue;
      run.fits = true;
      run.throughput = run.sim.metrics.throughput_samples_per_s;
      run.error.clear();
      if (!best.fits || run.throughput > best.throughput) best = std::move(run);
      break;
    }
  }
  if (!best.fits && best.error.empty()) {
    best.error = fmt::format("no partition fits {:.2f} GiB per GPU", capacity / kGiB);
  }
  return best;
}

double cross_gpu_bytes_per_sample(const Setup& setup, const Partition& p) {
  const CostModel cost = cost_model(setup);
  std::vector<int> stage_of(static_cast<size_t>(cost.num_layers()), 0);
  for (int s = 0; s < p.num_stages(); ++s) {
    for (int l : p.stages[static_cast<size_t>(s)]) stage_of[static_cast<size_t>(l)] = s;
  }
  double bytes = 0;
  for (const auto& e : cost.stage_edges(stage_of)) {
    if (p.device_of(e.from) != p.device_of(e.to)) bytes += e.bytes_per_sample;
  }
  return bytes;
}

std::vector<double> pipedream_memory(const Setup& setup, const Partition& p, int micro_batch) {
  const CostModel cost = cost_model(setup);
  const int S = p.num_stages();
  std::vector<double> need(static_cast<size_t>(p.num_devices()), 0);
  for (int s = 0; s < S; ++s) {
    // PipeDream (weight stashing, 1F1B): stage s of S keeps S - s weight versions and the
    // activations of S - s micro-batches (EPFL report Table 1: K - k + 1 on device k).
    const StageCost c = cost.stage_cost(p.stages[static_cast<size_t>(s)], micro_batch);
    const double versions = S - s;
    const double bytes = c.static_bytes() + (versions - 1) * c.param_bytes +
                         versions * (c.input_bytes + c.saved_bytes);
    const int copies = p.device.empty() ? p.replicas_of(s) : 1;
    for (int k = 0; k < copies; ++k) need[static_cast<size_t>(p.device_of(s) + k)] += bytes;
  }
  return need;
}

PipeDreamPlan pipedream_plan(const Setup& setup, int micro_batch, bool enforce_memory) {
  PipeDreamPlan out;
  const CostModel cost = cost_model(setup);
  PartitionRequest pr;
  pr.cost = &cost;
  pr.num_stages = setup.gpus();
  pr.micro_batch = micro_batch;
  pr.micro_batches = 1;
  // An asynchronous pipeline without recomputation: the first stage holds up to K micro-batches.
  pr.in_flight = setup.gpus();
  pr.memory_limit_bytes = enforce_memory ? setup.cluster.device.memory_bytes : 0;
  try {
    out.partition = make_partitioner("pipedream-dp")->partition(pr);
  } catch (const InputError& e) {
    out.error = e.what();
    return out;
  }
  out.need = pipedream_memory(setup, out.partition, micro_batch);
  out.stage_of_gpu.assign(out.need.size(), -1);
  for (int s = 0; s < out.partition.num_stages(); ++s) {
    for (int k = 0; k < out.partition.replicas_of(s); ++k) {
      out.stage_of_gpu[static_cast<size_t>(out.partition.device_of(s) + k)] = s;
    }
  }
  return out;
}

}  // namespace pipetwin::sim::ftpipe
