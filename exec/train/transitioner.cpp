#include <chrono>
#include <cstdio>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/elastic/transformer_layers.hpp"
#include "core/error.hpp"
#include "exec/runtime/autocast.hpp"
#include "exec/runtime/fault.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/auto_cache.hpp"
#include "exec/train/state_exchange.hpp"
#include "exec/train/train_data.hpp"
#include "exec/train/train_run.hpp"
#include "exec/train/transitioner.hpp"

namespace pipetwin::exec {

void Transitioner::collect_gradient_norms(int64_t steps) {
  // Squared norms per (step, profile layer) from replica 0's stages on this rank, summed over the
  // ranks (each layer of replica 0 lives on exactly one rank), so every rank sees every layer.
  const size_t P = static_cast<size_t>(run_.plan.profile.num_layers());
  std::vector<double> table(static_cast<size_t>(steps) * P, 0.0);
  for (const auto& [d, stages] : run_.session->hosted()) {
    for (const auto& [s, rt] : stages) {
      if (!rt->spec().track_gradient_norms) continue;
      const auto norms = rt->take_gradient_norms();
      if (static_cast<int64_t>(norms.size()) != steps) {
        throw std::logic_error(
            fmt::format("stage {}: {} gradient norm records for {} steps", s, norms.size(), steps));
      }
      const auto& layers = rt->spec().layers;
      for (size_t k = 0; k < norms.size(); ++k) {
        for (size_t i = 0; i < layers.size(); ++i) {
          table[k * P + static_cast<size_t>(layers[i])] += norms[k][i];
        }
      }
    }
  }
  table = run_.sum_over_ranks(std::move(table));
  for (int64_t k = 0; k < steps; ++k) {
    const auto first = table.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(k) * P);
    run_.elastic_policy->observe(run_.elastic_policy->transformer_norms(
        std::vector<double>(first, first + static_cast<std::ptrdiff_t>(P))));
  }
}

std::optional<Transition> Transitioner::elastic_decision(bool epoch_end) {
  const TrainProgress& p = run_.progress;
  if (!run_.elastic_policy->due(p.step, epoch_end, p.epoch)) return std::nullopt;
  const int frozen = run_.elastic_policy->freeze_step();
  // Every rank applied Equation 1 to the same all-reduced norms; rank 0's count is the one.
  const int agreed = static_cast<int>(run_.values_of_rank0({static_cast<double>(frozen)})[0]);
  if (agreed != frozen) {
    throw RunFailure(fmt::format(
        "rank {}: freeze step {} after step {}: this rank computed {} frozen layers, rank 0 {}",
        run_.control.rank(), run_.elastic_policy->T(), p.step, frozen, agreed));
  }
  if (frozen == p.frozen_layers) return std::nullopt;
  return run_.elastic_policy->transition(frozen);
}

void Transitioner::agree_on_position(const Plan& next) const {
  // What AutoDP's message group carries to new replicas (Figure 7: "epoch number and learning
  // rate ..., the boundary of frozen layers, and pipeline GPU range"): here every rank keeps it
  // itself, by the same arithmetic; before moving any state the ranks check that they agree
  // with rank 0 on it and on the plan they are about to build.
  const TrainProgress& p = run_.progress;
  const uint64_t fp = fnv1a64(plan_fingerprint(next, precision_tag(run_.options.exec.precision())));
  const std::vector<double> mine = {static_cast<double>(p.step),
                                    static_cast<double>(p.epoch),
                                    static_cast<double>(p.epoch_sample),
                                    p.lr,
                                    static_cast<double>(p.frozen_layers),
                                    static_cast<double>(fp >> 32),
                                    static_cast<double>(fp & 0xffffffffULL)};
  const std::vector<double> rank0 = run_.values_of_rank0(mine);
  if (rank0 != mine) {
    throw std::runtime_error(fmt::format(
        "this rank is at step {}, epoch {}, sample {}, lr {}, {} frozen layers, plan {:x}; rank 0 "
        "at step {}, epoch {}, sample {}, lr {}, {} frozen layers, plan {:x}",
        p.step, p.epoch, p.epoch_sample, p.lr, p.frozen_layers, fp, rank0[0], rank0[1], rank0[2],
        rank0[3], rank0[4],
        (static_cast<uint64_t>(rank0[5]) << 32) | static_cast<uint64_t>(rank0[6])));
  }
}

void Transitioner::carry_out(const Transition& t) {
  TrainProgress& p = run_.progress;
  const auto start = std::chrono::steady_clock::now();
  const int rank = run_.session->rank();
  const std::string what = fmt::format(
      "elastic transition after step {} (K {} -> {}, dp {} -> {}, frozen layers {} -> "
      "{})",
      p.step, run_.plan.num_stages(), t.plan.num_stages(), run_.plan.dp, t.plan.dp, p.frozen_layers,
      t.frozen_layers);
  try {
    agree_on_position(t.plan);
    const Fault fault = Fault::from_environment();
    StageState all =
        gather_layer_state(*run_.session, run_.control, [&] { fault.at_transition(rank, p.step); });
    run_.replace_session(t.plan);
    for (const auto& [d, stages] : run_.session->hosted()) {
      for (const auto& [s, rt] : stages) {
        all.stage = s;
        restore_stage(all, *rt, run_.session->model(), what);
      }
    }
  } catch (const std::exception& e) {
    throw RunFailure(fmt::format("{}{}: {}", run_.control.who(), what, e.what()));
  }
  run_.set_learning_rate();
  cache_.set(cache_.wanted(t));  // AutoCache at the new boundary (Section 3.4)
  if (t.frozen_layers != p.frozen_layers) {
    p.frozen_layers = t.frozen_layers;
    p.freeze.push_back({static_cast<int>(p.epoch), static_cast<long>(p.epoch_sample),
                        static_cast<long>(p.step), t.frozen_layers});
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  p.transition_s += seconds;
  if (run_.options.verbose && rank == 0) {
    std::printf("step %lld: K=%d dp=%d M=%d frozen=%d%s  (transition %.2f s)\n",
                static_cast<long long>(p.step), run_.plan.num_stages(), run_.plan.dp,
                run_.plan.chunks, p.frozen_layers, p.cache ? " cache" : "", seconds);
    std::fflush(stdout);
  }
}

void Transitioner::apply(const Transition& t) {
  const TrainProgress& p = run_.progress;
  if (t.plan.model != run_.plan.model) {
    throw InputError(
        fmt::format("elastic transition: the new plan must keep the model ({}, not {})",
                    run_.plan.model, t.plan.model));
  }
  if (t.frozen_layers < p.frozen_layers || t.frozen_layers > p.freeze_layers) {
    throw InputError(fmt::format(
        "elastic transition: frozen_layers must be in {}..{} (layers do not thaw; {} given)",
        p.frozen_layers, p.freeze_layers, t.frozen_layers));
  }
  Transition checked = t;
  checked.plan.frozen_layers = t.frozen_layers == 0
                                   ? 0
                                   : elastic::TransformerLayers::from_profile(t.plan.profile)
                                         .frozen_profile_layers(t.frozen_layers);
  checked.plan.validate("elastic transition: plan");
  carry_out(checked);
}

}  // namespace pipetwin::exec
